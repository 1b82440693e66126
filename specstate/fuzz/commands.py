"""Deprecated: ``--allow-variant-import`` and its guard (``add_allow_import``,
``guard_variant_import``) live in ``specstate._cli_support``; the fuzzer's subcommands are
``specstate/cli/fuzz.py``. This path still imports, as that very module, with a
``SpecstateDeprecationWarning`` (``specstate/_deprecation.py``). Nothing in specstate imports it."""

from specstate._deprecation import moved_module

moved_module(__name__, "specstate._cli_support")
