"""Reproduce a failure: from a trace file, from a seed of the plain generator, or from a
seed of a built-in scenario. The report is a pure function of the run (no timings, no
absolute paths beyond the one given), so reproducing twice gives byte-identical text.

A trace file is read once: the bytes whose variant was checked (``--allow-variant-import``,
``allow_variant_import``) are the ones replayed, so a file swapped in between cannot bring
in a module nobody approved. Options that contradict the trace (``--seed``, ``--scenario``,
another ``--variant``, an ``--engine`` of another family) are refused, not ignored
(``trace_for_options``, ``check_trace_engine``); text the trace carries (the recorded
violation) is printed with control characters escaped.

A trace file is validated before anything that replays it is imported (``trace_for_options``):
a file the schema refuses answers in a tenth of ``import torch``'s time (``tests/test_startup.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specstate.errors import UsageError

if TYPE_CHECKING:
    from specstate.check import RunResult
    from specstate.fuzz.trace import Trace

__all__ = ["Reproduction", "reproduce_file", "reproduce_trace", "reproduce_seed", "trace_for_options",
           "check_trace_engine", "trace_family", "EXIT_PASS", "EXIT_VIOLATION", "EXIT_MISMATCH"]

EXIT_PASS, EXIT_VIOLATION, EXIT_MISMATCH = 0, 1, 3


@dataclass(frozen=True)
class Reproduction:
    result: RunResult
    report: str
    exit_code: int


def _verdict(result: RunResult, recorded: dict | None) -> tuple[str, int]:
    from specstate.schema._messages import printable

    got = result.first.to_json() if result.first else None
    if recorded is None:
        return ("  recorded: no violation; replay: " + ("none" if got is None else "VIOLATION"),
                EXIT_PASS if got is None else EXIT_VIOLATION)
    where = f"{printable(recorded.get('invariant'))[:200]} at step {printable(recorded.get('step'))[:40]}"
    if got == recorded:
        return f"  same violation as recorded: {where}", EXIT_VIOLATION
    return f"  DIFFERENT from the recorded violation {where}", EXIT_MISMATCH


def trace_for_options(path: Path | str, *, variant: str | None = None, engine: str | None = None,
                      seed: int | None = None, scenario: str | None = None) -> Trace:
    """The trace at ``path`` (read once), refusing the ``reproduce`` options it contradicts:
    ``--seed`` / ``--scenario`` (a trace fixes its own) and a ``--variant`` other than its own.
    ``--engine`` waits for ``check_trace_engine`` (the family of a user's variant needs its import)."""
    if seed is not None or scenario is not None:
        given = " ".join(f"--{k} {v}" for k, v in (("seed", seed), ("scenario", scenario)) if v is not None)
        raise UsageError(f"Expected TRACE.json or --seed N --variant V [--scenario S], not both: {path} replays its own "
                         f"actions, so {given} would be ignored")
    from specstate.schema import read_trace

    data = read_trace(path)  # refused here before the replay's modules are imported (module doc)
    from specstate.fuzz.trace import Trace

    trace = Trace._from_data(data)
    if variant is not None and variant != trace.variant:
        raise UsageError(f"Expected --variant {trace.variant} (the variant {path} was recorded under) or no --variant "
                         f"but got --variant {variant}: a trace replays under its own variant")
    return trace


def trace_family(trace: Trace, *, allow_variant_import: bool = False) -> str | None:
    """The engine family of ``trace``'s variant; ``None`` where knowing it would import a
    module without permission."""
    from specstate.fuzz.trace import import_allowed
    from specstate.model import get_variant

    if not import_allowed(trace, allow_variant_import):
        return None
    return get_variant(trace.variant).family_name


def check_trace_engine(trace: Trace, path: Path | str, engine: str | None, *, allow_variant_import: bool = False) -> None:
    """``--engine`` beside a trace must name the trace's own family."""
    family = trace_family(trace, allow_variant_import=allow_variant_import) if engine is not None else None
    if family is not None and family != engine:
        raise UsageError(f"Expected --engine {family} (the family of {path}'s variant {trace.variant}) or no --engine "
                         f"but got --engine {engine}")


def reproduce_trace(trace: Trace, path: Path | str, *, allow_variant_import: bool = False) -> Reproduction:
    """Replay an already-read ``trace`` (from ``path``) and compare with its recorded violation."""
    from specstate.fuzz.trace import replay_trace, require_import_permission
    from specstate.report import format_result
    from specstate.schema._messages import printable

    require_import_permission(trace, path, allow_variant_import)
    result = replay_trace(trace, allow_variant_import=True)
    title = f"trace {printable(Path(path).name)} / {trace.variant}"
    line, code = _verdict(result, trace.violation)
    return Reproduction(result, format_result(result, title=title) + "\n" + line, code)


def reproduce_file(path: Path | str, *, allow_variant_import: bool = False) -> Reproduction:
    """Read ``path`` once and replay it; a trace of a user's variant (``package.module:Object``)
    needs ``allow_variant_import=True``, since replaying imports (runs) that module."""
    from specstate.fuzz.trace import load_trace

    return reproduce_trace(load_trace(path), path, allow_variant_import=allow_variant_import)


def reproduce_seed(seed: int, variant: str, *, scenario: str | None = None, length: int | None = None,
                   progress: bool = False) -> Reproduction:
    """``scenario``: replay that built-in scenario with ``seed``; else the generator's case.
    ``progress``: a step counter on an interactive stderr (scenarios only)."""
    from specstate.report import format_result

    if scenario is not None:
        from specstate.scenarios import run_scenario

        result = run_scenario(scenario, variant, seed, progress=progress)
        title = f"{scenario} / {variant} (seed {seed})"
    else:
        from specstate.fuzz.generate import fuzz_seed

        _, result = fuzz_seed(seed, variant) if length is None else fuzz_seed(seed, variant, length=length)
        title = f"generated case / {variant} (seed {seed})"
    return Reproduction(result, format_result(result, title=title), EXIT_PASS if result.ok else EXIT_VIOLATION)
