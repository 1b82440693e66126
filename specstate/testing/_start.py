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

import sys
from pathlib import Path

from typing import Any

from specstate.errors import InvalidArgument, InvalidConfig, SpecStateError
from specstate.model import SpecConfig, Variant, as_variant

__all__ = ["check_engine_start", "main"]


def check_engine_start(config: SpecConfig | str | Path, variant: Variant | str = "upstream-adaptive") -> Any:
    """The engine start of ``variant`` (a v2-family variant) on ``config``: what it built, or
    ``EngineStartRefused`` where sglang 0.5.17 refuses to start. ``config``: a ``SpecConfig``, or
    the path of its JSON (read by the one safe reader: a regular UTF-8 file of at most 32 MiB,
    nesting bounded); a variant of a family without an engine start (v1) is an ``InvalidArgument``.
    The answer is the family's start outcome (its ``engine_start`` operation's: 0.5.17's
    ``EngineStart``, ``describe()``), typed ``Any`` here so that the shared module imports no release."""
    from specstate.schema import _arguments as arg

    if not isinstance(config, SpecConfig):
        config = _read_config(arg.file_path("config", config))
    v = arg.variant("variant", variant)
    from specstate.model.families import get_family

    if get_family(v.family_name).start is None:
        raise InvalidArgument(f"Expected a variant of a family with an engine start (the v2 families) "
                              f"but got variant={v.name!r} (family {v.family_name})")
    ops = v.ops()
    return ops.engine_start(ops, v.configure(config))


def _read_config(path: Path) -> SpecConfig:
    from specstate.errors import FileFormatError
    from specstate.schema import config_from_data
    from specstate.schema._files import read_data

    data = read_data(path, what="config file", error=FileFormatError)
    if not isinstance(data, dict):
        raise FileFormatError(f"{path}: expected a JSON object (a SpecConfig) but got {type(data).__name__}")
    return config_from_data(data)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m specstate.testing._start CONFIG.json [VARIANT]", file=sys.stderr)
        return 2
    try:
        print(check_engine_start(args[0], *(args[1:2])).describe())
    except SpecStateError as e:
        refusal = isinstance(e, InvalidConfig) and hasattr(e, "upstream")  # the family's EngineStartRefused
        print(getattr(e, "describe")() if refusal else f"specstate: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
