"""The ``--allow-variant-import`` option and its guard, where the commands take them from.

The fuzzer's subcommands (``reproduce``, ``fuzz``, ``minimize``, ``explore``) are
``specstate/commands/fuzz.py`` and ``graph`` is ``specstate/commands/graph.py``, above every
library; the option and the guard live in ``specstate/_cli_support.py`` and are re-exported
here, where they were (``specstate.integration.commands`` imports them from here).
"""

from __future__ import annotations

from specstate._cli_support import add_allow_import, guard_variant_import

__all__ = ["add_allow_import", "guard_variant_import"]
