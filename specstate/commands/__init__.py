"""The command modules of the ``specstate`` command that sit above every library they drive.

``specstate.cli`` builds the parser from each module's ``add_parsers(subparsers)``: ``check``
(a user's launch flags: ``specstate.launch_check``), ``fuzz``
(``reproduce``, ``fuzz``, ``minimize``, ``explore``) and ``graph`` (``graph``, whose ``--raw``
exploration is ``fuzz.run_explore``'s). They import the libraries (``fuzz/``, ``graph/``,
``testing``, ``launch_check``, ``across_commands``, ``report``) and nothing imports them but the
CLI, so no library imports command code.
"""
