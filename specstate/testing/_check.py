"""``specstate.testing.check``: ``specstate check`` from Python, for a team's own test suite.

``check(flags, variant=...)`` reads the launch (a string as a shell would split it, a whole
``python -m sglang.launch_server ...`` line included, or a list of words; or ``config_file``),
runs the parts of ``specstate check`` on its config and returns a ``CheckResult``: ``ok``, the
first violation, the trace file and the command that reproduces it; ``details["parts"]`` holds
each part's verdict. Wrong flags raise ``specstate.errors.UsageError`` (one line naming the flag,
the value and what the release accepts); a violation is the result, never an exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from specstate.check_result import CheckResult

__all__ = ["check"]


def _variant(variant: object, engine: object) -> str:
    """``--variant`` / ``--engine`` as the CLI resolves them, each checked first."""
    import argparse

    from specstate._engine_option import resolve_variant
    from specstate.schema import _arguments as arg

    family = _engine("engine", engine)
    if variant is not None:
        arg.variant_name("variant", variant)
    ns = argparse.Namespace(variant=variant, engine=family)
    return resolve_variant(ns, "fixed-threshold") or "fixed-threshold"


def _engine(name: str, value: object) -> str | None:
    """``None``, or what ``--engine`` takes (a family's name, or a release one family stands for:
    ``0.5.12.post1`` -> ``sglang-0.5.12``), as the family's name."""
    import argparse

    from specstate._engine_option import ENGINES, _engine_arg
    from specstate.errors import InvalidArgument
    from specstate.schema._arguments import _got

    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"Expected None or an engine from {', '.join(ENGINES)} but got {_got(name, value)}")
    try:
        return _engine_arg(ENGINES)(value)  # type: ignore[no-any-return]
    except argparse.ArgumentTypeError as e:
        raise InvalidArgument(f"Expected {name} from {', '.join(ENGINES)} or one of their releases but got "
                              f"{_got(name, value)}: {' '.join(str(e).split())[:200]}") from None


def _check_arguments(flags: object, config_file: object, budget_s: object, seed: object, parts: object,
                     failures: object, quiet: object) -> tuple[object, tuple[str, ...]]:
    """Every argument within the CLI's bounds (``specstate check --budget/--seed/--parts``):
    one ``InvalidArgument`` naming the first that is not. The flags and the parts, normalised."""
    from specstate.errors import UsageError
    from specstate.launch_check import PARTS
    from specstate.schema import _arguments as arg

    words = arg.launch_words("flags", flags)
    if config_file is not None:
        arg.file_path("config_file", config_file)
    if words in (None, (), "") and config_file is None:
        raise UsageError("Expected the launch to check: flags=..., or config_file=...")
    arg.seconds("budget_s", budget_s, *arg.BUDGET_S)
    arg.integer("seed", seed, *arg.LIMITS["check_seed"])
    chosen = arg.names("parts", parts, PARTS)
    arg.folder("failures", failures)
    arg.boolean("quiet", quiet)
    return words, chosen


def check(flags: str | Sequence[str] | None = None, *, variant: str | None = None, engine: str | None = None,
          config_file: Path | str | None = None, budget_s: float = 30.0, seed: int = 0,
          parts: Sequence[str] = ("start", "sweep", "fuzz", "prove"), failures: Path | str | None = None,
          quiet: bool = True) -> CheckResult:
    """Check one launch of ``variant`` (or ``engine``'s default variant, else ``fixed-threshold``).
    Every argument is checked first, with ``specstate check``'s bounds (``InvalidArgument``)."""
    from specstate.launch_check import check_launch
    from specstate.server_args import launch_tokens, parse_launch

    flags, chosen = _check_arguments(flags, config_file, budget_s, seed, parts, failures, quiet)
    name = _variant(variant, engine)
    if isinstance(flags, str):
        words, text = (), flags
    else:
        words, text = tuple(flags or ()), None  # type: ignore[arg-type]
    tokens = launch_tokens(after_dashes=words, server_args=text, config_file=config_file, variant=name)
    launch = parse_launch(tokens, name)
    return check_launch(launch, budget_s=float(budget_s), seed=seed, parts=chosen, failures=failures, quiet=quiet)
