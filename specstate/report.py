"""Human-readable reports of runs and violations (deterministic text for the same run), and the
one command that replays a failure trace (``reproduce_command``, re-exported by ``fuzz/trace.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specstate.model import Action, action_to_json

if TYPE_CHECKING:
    from specstate.check import RunResult

__all__ = ["format_result", "format_actions", "reproduce_command"]


def reproduce_command(path: Path | str, variant: str | None = None) -> str:
    """The command that replays the trace at ``path``; a trace of a user's variant
    (``package.module:Object``) imports it, which the command has to allow."""
    return f"specstate reproduce {path}" + (" --allow-variant-import" if variant and ":" in variant else "")


def format_actions(actions: list[Action], last: int = 6) -> str:
    tail = actions[-last:]
    start = len(actions) - len(tail) + 1
    return "\n".join(f"    {start + i:>6}: {action_to_json(a)}" for i, a in enumerate(tail))


def format_result(result: RunResult, *, title: str, trace_path: Path | None = None) -> str:
    lines = []
    stats = ", ".join(f"{k} {v}" for k, v in sorted(result.stats.items()))
    if result.ok:
        lines.append(f"PASS  {title}: {result.steps} steps, every invariant held after every step")
    else:
        lines.append(f"FAIL  {title}: violation at step {result.first.step} of {result.steps}")  # type: ignore[union-attr]
        for v in result.violations:
            lines.append(f"  {v.describe()}")
            if v.shapes:
                lines.append(f"    shapes: {v.shapes}")
        lines.append("  last actions:")
        lines.append(format_actions(result.actions))
    if result.milestones:
        done = [label for _, label in result.milestones]
        if result.ok:
            lines.append(f"  passed: {', '.join(done)}")
        else:
            lines.append(f"  passed: {', '.join(done[:-1]) or 'nothing'}; failed during {done[-1]}")
    lines.append(f"  counts: {stats}")
    lines.append(f"  witnesses reached: {', '.join(sorted(result.witnesses)) or 'none'}")
    if trace_path is not None:
        lines.append(f"  trace: {trace_path}")
        lines.append(f"  reproduce with: {reproduce_command(trace_path, result.variant)}")
    return "\n".join(lines)
