"""Will sglang 0.5.17 start on my config? The v2 family's engine start alone
(``specstate/model/sglang_0_5_17/start.py``), from the Python API or a config file::

    from specstate.testing import check_engine_start

    start = check_engine_start(my_config)              # a SpecConfig, or a path to its JSON
    print(start.describe())                            # runtime states, captures, the shared logits buffer
    # a config upstream refuses raises EngineStartRefused (an InvalidConfig, a ValueError):
    #   sglang 0.5.17 refuses this config at engine start building the runtime state steps=3:
    #   AssertionError at GraphSharedOutput.get_logits_buffer (graph_shared_output.py): ...

``python -m specstate.testing._start CONFIG.json [VARIANT]`` prints the same (exit 0 when it
starts, 2 with the refusal in one line when it does not). The JSON is a ``SpecConfig``
(``SpecConfig.to_json``); a v1 config gets the v2 family's switch (``prepare_v2``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specstate.model import SpecConfig, Variant, as_variant
from specstate.model.sglang_0_5_17.start import EngineStart, EngineStartRefused

__all__ = ["check_engine_start", "EngineStartRefused", "main"]


def check_engine_start(config: SpecConfig | str | Path, variant: Variant | str = "upstream-adaptive") -> EngineStart:
    """The engine start of ``variant`` (a v2-family variant) on ``config``: what it built, or
    ``EngineStartRefused`` where sglang 0.5.17 refuses to start."""
    if not isinstance(config, SpecConfig):
        from specstate.schema import config_from_data

        config = config_from_data(json.loads(Path(config).read_text()))
    v = as_variant(variant)
    ops = v.ops()
    return ops.engine_start(ops, v.configure(config))  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m specstate.testing._start CONFIG.json [VARIANT]", file=sys.stderr)
        return 2
    try:
        print(check_engine_start(args[0], *(args[1:2])).describe())
    except EngineStartRefused as e:
        print(e.describe(), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
