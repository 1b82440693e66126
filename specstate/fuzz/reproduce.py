"""Reproduce a failure: from a trace file, from a seed of the plain generator, or from a
seed of a built-in scenario. The report is a pure function of the run (no timings, no
absolute paths beyond the one given), so reproducing twice gives byte-identical text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specstate.fuzz.trace import Trace, load_trace, replay_trace
from specstate.report import format_result

if TYPE_CHECKING:
    from specstate.check import RunResult

__all__ = ["Reproduction", "reproduce_file", "reproduce_seed", "EXIT_PASS", "EXIT_VIOLATION", "EXIT_MISMATCH"]

EXIT_PASS, EXIT_VIOLATION, EXIT_MISMATCH = 0, 1, 3


@dataclass(frozen=True)
class Reproduction:
    result: RunResult
    report: str
    exit_code: int


def _verdict(result: RunResult, recorded: dict | None) -> tuple[str, int]:
    got = result.first.to_json() if result.first else None
    if recorded is None:
        return ("  recorded: no violation; replay: " + ("none" if got is None else "VIOLATION"),
                EXIT_PASS if got is None else EXIT_VIOLATION)
    if got == recorded:
        return f"  same violation as recorded: {recorded['invariant']} at step {recorded['step']}", EXIT_VIOLATION
    return f"  DIFFERENT from the recorded violation {recorded['invariant']} at step {recorded['step']}", EXIT_MISMATCH


def reproduce_file(path: Path | str) -> Reproduction:
    trace: Trace = load_trace(path)
    result = replay_trace(trace)
    title = f"trace {Path(path).name} / {trace.variant}"
    line, code = _verdict(result, trace.violation)
    return Reproduction(result, format_result(result, title=title) + "\n" + line, code)


def reproduce_seed(seed: int, variant: str, *, scenario: str | None = None, length: int | None = None,
                   progress: bool = False) -> Reproduction:
    """``scenario``: replay that built-in scenario with ``seed``; else the generator's case.
    ``progress``: a step counter on an interactive stderr (scenarios only)."""
    if scenario is not None:
        from specstate.cli import run_scenario

        result = run_scenario(scenario, variant, seed, progress=progress)
        title = f"{scenario} / {variant} (seed {seed})"
    else:
        from specstate.fuzz.generate import fuzz_seed

        _, result = fuzz_seed(seed, variant) if length is None else fuzz_seed(seed, variant, length=length)
        title = f"generated case / {variant} (seed {seed})"
    return Reproduction(result, format_result(result, title=title), EXIT_PASS if result.ok else EXIT_VIOLATION)
