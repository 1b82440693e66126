"""``CheckResult``: what every check of ``specstate.testing`` returns.

One frozen value per check (a scenario run, a fuzzing run, an exploration, a recording):
whether it passed, the first violated invariant (model runs), one line per problem, the
trace file that replays the failure and the one command that does so. ``report`` is the
text a test failure or a terminal shows; ``to_json`` is what ``--json`` prints for CI.
``from_prove`` is a proof's result (``specstate prove``, ``check``'s prove part) as one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # an annotation: a result is built without importing the model
    from specstate.invariants import Violation

__all__ = ["CheckResult", "from_prove", "failure_trace"]


@dataclass(frozen=True)
class CheckResult:
    kind: str  #: "scenario", "fuzz", "explore", "recording", "reproduce" or "minimize"
    subject: str  #: what was checked: "seed-sweep / mypatch:Variant", a recording's path, ...
    variant: str  #: the variant name (a built-in name or ``package.module:Object``)
    ok: bool  #: no violation, no mismatch, every wanted witness reached
    violation: Violation | None = None  #: the first violated invariant (model runs), if any
    problems: tuple[str, ...] = ()  #: one line per problem found (empty when ``ok``)
    trace_path: Path | None = None  #: the trace file that replays the failure, if one was written
    repro_command: str | None = None  #: the one command that reproduces the failure
    elapsed_s: float = 0.0  #: wall-clock seconds the check took
    details: Mapping[str, Any] = field(default_factory=dict)  #: figures of this kind of check (JSON values)

    @property
    def report(self) -> str:
        """A few lines: verdict, problems, trace, and the command that reproduces it."""
        lines = [f"specstate {self.kind}: {self.subject}: {'PASS' if self.ok else 'FAIL'}"]
        lines += [f"  {p}" for p in self.problems]
        if self.trace_path is not None:
            lines.append(f"  trace: {self.trace_path}")
        if self.repro_command is not None and not self.ok:
            lines.append(f"  reproduce with: {self.repro_command}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (``sort_keys`` gives a stable text)."""
        return {"kind": self.kind, "subject": self.subject, "variant": self.variant, "ok": self.ok,
                "violation": self.violation.to_json() if self.violation else None, "problems": list(self.problems),
                "trace": str(self.trace_path) if self.trace_path is not None else None,
                "reproduce": self.repro_command, "elapsed_s": round(self.elapsed_s, 3), "details": dict(self.details)}


def failure_trace(result, variant: str):  # noqa: ANN001, ANN201
    """The smallest failing bound's path as a trace (``specstate reproduce`` replays it)."""
    from specstate.fuzz.trace import Trace

    f = result.failure
    return Trace(config=f.config, variant=variant, actions=list(f.actions), violation=f.violations[0].to_json(),
                 notes={"source": "prove", "bs": f.bound, "script": f.script, "capture_list": f.capture_list})


def from_prove(result, *, failures: Path | str | None = None):  # noqa: ANN001, ANN201
    """A proof as a ``CheckResult``; a failure is written as a trace."""
    from specstate.fuzz.trace import reproduce_command, safe_part, save_trace

    lists = [{"name": v.name, "capture": list(v.capture), "checked_up_to": v.checked_up_to,
              "failing_bs": v.failure.bound if v.failure else None, "unreached": v.unreached, "runs": v.runs,
              "steps": v.steps, "bounds_run": v.bounds_run, "restarts": v.restarts, "points": v.points}
             for v in result.lists]
    f = result.failure
    details = {"max_bs": result.max_bs, "verdict": result.verdict(), "failing_bs": f.bound if f else None,
               "method": "exhaustive" if result.exhaustive else "intervals",
               "cpu_s": round(result.cpu_s, 3),  # the proof's own CPU seconds (no start-up); a timing: --timings
               "lists": lists, "steps": result.steps,
               "witnesses": sorted(set().union(*(v.witnesses for v in result.lists)))}
    subject = f"{result.variant} (bs 1..{result.max_bs})"
    if f is None:
        return CheckResult("prove", subject, result.variant, result.holds, None, (), None, None, result.elapsed_s,
                           details)
    path = save_trace(failure_trace(result, result.variant), failures,
                      name=f"{safe_part(result.variant)}-prove-bs{f.bound}")
    return CheckResult("prove", subject, result.variant, False, f.violations[0], tuple(v.describe() for v in f.violations),
                       path, reproduce_command(path, result.variant), result.elapsed_s, details)
