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


def _variant(variant: str | None, engine: str | None) -> str:
    import argparse

    from specstate._engine_option import resolve_variant

    ns = argparse.Namespace(variant=variant, engine=engine)
    return resolve_variant(ns, "fixed-threshold") or "fixed-threshold"


def check(flags: str | Sequence[str] | None = None, *, variant: str | None = None, engine: str | None = None,
          config_file: Path | str | None = None, budget_s: float = 30.0, seed: int = 0,
          parts: Sequence[str] = ("start", "sweep", "fuzz", "prove"), failures: Path | str | None = None,
          quiet: bool = True) -> CheckResult:
    """Check one launch of ``variant`` (or ``engine``'s default variant, else ``fixed-threshold``)."""
    from specstate.errors import UsageError
    from specstate.launch_check import PARTS, check_launch
    from specstate.server_args import launch_tokens, parse_launch

    name = _variant(variant, engine)
    if isinstance(flags, str):
        words, text = (), flags
    else:
        words, text = tuple(flags or ()), None
    if not words and text is None and config_file is None:
        raise UsageError("Expected the launch to check: flags=..., or config_file=...")
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        raise UsageError(f"Expected parts from {list(PARTS)} but got {list(parts)!r}")
    tokens = launch_tokens(after_dashes=words, server_args=text, config_file=config_file, variant=name)
    launch = parse_launch(tokens, name)
    return check_launch(launch, budget_s=budget_s, seed=seed, parts=tuple(parts), failures=failures, quiet=quiet)
