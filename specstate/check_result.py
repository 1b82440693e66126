"""``CheckResult``: what every check of ``specstate.testing`` returns.

One frozen value per check (a scenario run, a fuzzing run, an exploration, a recording):
whether it passed, the first violated invariant (model runs), one line per problem, the
trace file that replays the failure and the one command that does so. ``report`` is the
text a test failure or a terminal shows; ``to_json`` is what ``--json`` prints for CI.
``from_prove`` is a proof's result (``specstate prove``, ``check``'s prove part) as one.

A verdict is a statement of coverage: ``coverage`` says what was judged and what assumed
(the launch's flags, the settings sglang derives itself, the paths the run reached and did
not; ``coverage_block``). The verdict is one of three, each its own exit code, the same on
every command (``EXIT_CODES``):

====  ==============  ==========================================================================
exit  ``verdict``     meaning
====  ==============  ==========================================================================
0     ``pass``        every part judged, no violation
1     ``violation``   a violation (or a mismatch) found
2     (usage error)   the input is wrong; no result (``SpecStateError``, one line)
3     (reproduce)     a different violation than the trace recorded
4     ``not judged``  no violation in what ran, but part of the input is outside the model, or a
                      proof could not conclude: ``coverage["not_judged"]`` says which and why
====  ==============  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # an annotation: a result is built without importing the model
    from specstate.invariants import Violation

__all__ = ["CheckResult", "from_prove", "failure_trace", "coverage_block", "coverage_lines", "run_coverage", "EXIT_PASS", "EXIT_VIOLATION",
           "EXIT_NOT_JUDGED", "EXIT_CODES"]

EXIT_PASS, EXIT_VIOLATION, EXIT_NOT_JUDGED = 0, 1, 4
#: every exit code of the ``specstate`` command (``docs/check.md`` prints this table)
EXIT_CODES = {0: "pass: every part judged, no violation", 1: "a violation (or a mismatch with the oracle / a recording)",
              2: "usage error: the input or an option is wrong, or a package or program (graphviz's dot) is missing (one line)",
              3: "reproduce: a different violation than the trace recorded",
              4: "not judged: no violation in what ran, but a flag, setting or bound is outside the model "
                 "(or a proof could not conclude); the coverage block says which",
              70: "a bug in specstate (internal error)", 130: "interrupted by SIGINT", 143: "interrupted by SIGTERM"}


def coverage_block(*, modelled: list[str] | None = None, not_judged: list[dict[str, str]] | None = None,
                   unaffected: list[str] | None = None, not_examined: list[str] | None = None,
                   assumed: list[dict[str, str]] | None = None, environment: list[dict[str, Any]] | None = None,
                   reached: list[str] | None = None, not_reached: list[dict[str, str]] | None = None,
                   judged: str = "", derived: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The coverage block every verdict carries (every key present, lists possibly empty):
    ``judged`` (one line: what ran on what), the launch's ``modelled`` flags, ``not_judged``
    (``{"flag" or "what", "parts", "reason"}``: the verdict cannot pass), ``unaffected`` and
    ``not_examined`` flags, the settings ``derived`` from the model and GPU (``{"setting", "value",
    "source"}``: ``--model-config``, ``--gpu``), ``assumed`` settings (``{"setting", "value", "why"}``), the line's
    ``environment``, the paths ``reached`` and ``not_reached`` (``{"path", "why"}``)."""
    return {"judged": judged, "modelled": list(modelled or ()), "not_judged": list(not_judged or ()),
            "unaffected": list(unaffected or ()), "not_examined": list(not_examined or ()),
            "derived": list(derived or ()), "assumed": list(assumed or ()), "environment": list(environment or ()),
            "reached": list(reached or ()), "not_reached": list(not_reached or ())}


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
    #: what was judged and assumed (``coverage_block``); with ``not_judged`` entries and no
    #: violation, the verdict is ``not judged`` and ``ok`` is false
    coverage: Mapping[str, Any] = field(default_factory=coverage_block)

    def __post_init__(self) -> None:
        if self.ok and self.coverage.get("not_judged"):
            object.__setattr__(self, "ok", False)  # no violation, but not a pass either

    @property
    def verdict(self) -> str:
        """``pass``, ``violation`` or ``not judged`` (no violation, part of it outside the model)."""
        if self.ok:
            return "pass"
        return "not judged" if self.violation is None and self.coverage.get("not_judged") and not self.problems \
            else "violation"

    @property
    def exit_code(self) -> int:
        """0 pass, 1 violation, 4 not judged (``EXIT_CODES``)."""
        return {"pass": EXIT_PASS, "violation": EXIT_VIOLATION}.get(self.verdict, EXIT_NOT_JUDGED)

    @property
    def report(self) -> str:
        """A few lines: verdict, problems, what was not judged, trace, and the command that reproduces it."""
        head = {"pass": "PASS", "violation": "FAIL", "not judged": "NOT JUDGED"}[self.verdict]
        lines = [f"specstate {self.kind}: {self.subject}: {head}"]
        lines += [f"  {p}" for p in self.problems]
        lines += [f"  not judged: {x.get('flag') or x.get('what')}: {x['reason']}" for x in self.coverage.get("not_judged", ())]
        if self.trace_path is not None:
            lines.append(f"  trace: {self.trace_path}")
        if self.repro_command is not None and self.verdict == "violation":
            lines.append(f"  reproduce with: {self.repro_command}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (``sort_keys`` gives a stable text)."""
        return {"kind": self.kind, "subject": self.subject, "variant": self.variant, "ok": self.ok,
                "verdict": self.verdict, "exit_code": self.exit_code, "coverage": dict(self.coverage),
                "violation": self.violation.to_json() if self.violation else None, "problems": list(self.problems),
                "trace": str(self.trace_path) if self.trace_path is not None else None,
                "reproduce": self.repro_command, "elapsed_s": round(self.elapsed_s, 3), "details": dict(self.details)}


def failure_trace(result, variant: str):  # noqa: ANN001, ANN201
    """The smallest failing bound's path as a trace (``specstate reproduce`` replays it)."""
    from specstate.fuzz.trace import Trace

    f = result.failure
    return Trace(config=f.config, variant=variant, actions=list(f.actions), violation=f.violations[0].to_json(),
                 notes={"source": "prove", "bs": f.bound, "script": f.script, "capture_list": f.capture_list})


def from_prove(result, *, failures: Path | str | None = None, launch: Any = None):  # noqa: ANN001, ANN201, ANN401
    """A proof as a ``CheckResult``; a failure is written as a trace (``launch``: the
    ``server_args.Launch`` proved, whose coverage it carries)."""
    from specstate.fuzz.trace import reproduce_command, safe_part, save_trace

    lists = [{"name": v.name, "capture": list(v.capture), "checked_up_to": v.checked_up_to,
              "failing_bs": v.failure.bound if v.failure else None, "unreached": v.unreached,
              "unreached_bs": v.unreached_bs, "proved_up_to": v.proved_up_to, "runs": v.runs,
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
        return CheckResult("prove", subject, result.variant, result.holds or result.inconclusive, None, (), None, None,
                           result.elapsed_s, details, prove_coverage(result, getattr(launch, "coverage", None)))
    path = save_trace(failure_trace(result, result.variant), failures,
                      name=f"{safe_part(result.variant)}-prove-bs{f.bound}")
    return CheckResult("prove", subject, result.variant, False, f.violations[0], tuple(v.describe() for v in f.violations),
                       path, reproduce_command(path, result.variant), result.elapsed_s, details, prove_coverage(result, getattr(launch, "coverage", None)))


def prove_coverage(result, launch_coverage: Mapping[str, Any] | None = None) -> dict[str, Any]:  # noqa: ANN001
    """A proof's coverage: the bounds and capture lists judged; each list that stopped at a bound it
    could not reach is not judged above it (why, and what to change)."""
    c = dict(launch_coverage or {})
    not_judged = list(c.pop("not_judged", ()))
    not_judged += [{"what": f"prove bs {v.unreached_bs}..{result.max_bs} under capture list {v.name}",
                    "parts": "prove", "reason": v.unreached} for v in result.lists if v.unreached is not None]
    reached = sorted(set().union(*(v.witnesses for v in result.lists))) if result.lists else []
    judged = ", ".join(f"{v.name} bs 1..{v.proved_up_to if v.failure is None else v.failure.bound}"
                       for v in result.lists)
    c.pop("judged", None)
    c.pop("reached", None)
    return coverage_block(judged=f"prove {result.variant}: {judged}", not_judged=not_judged,
                          reached=reached, **{k: v for k, v in c.items() if k != "not_reached"})


def coverage_lines(block: Mapping[str, Any]) -> list[str]:
    """The coverage block as the text report prints it (empty lists left out)."""
    lines = [f"coverage: judged: {block['judged']}"] if block.get("judged") else ["coverage:"]
    for x in block.get("not_judged", ()):
        lines.append(f"  NOT JUDGED: {x.get('flag') or x.get('what')} ({x['parts']}): {x['reason']}")
    if block.get("modelled"):
        lines.append(f"  modelled flags: {', '.join(block['modelled'])}")
    if block.get("unaffected"):
        lines.append(f"  accepted, checked to change nothing the model holds: {', '.join(block['unaffected'])}")
    if block.get("not_examined"):
        lines.append(f"  accepted, not examined (their effect on the batch is not derived): "
                     f"{', '.join(block['not_examined'])}")
    for d in block.get("derived", ()):
        lines.append(f"  derived {d['setting']} = {d['value']}: {d['source']}")
    for a in block.get("assumed", ()):
        lines.append(f"  assumed {a['setting']} = {a['value']}: {a['why']}")
    for e in block.get("environment", ()):
        lines.append(f"  environment {e['name']}={e['value']}: {'applied: ' if e['applied'] else ''}{e['note']}")
    if block.get("reached"):
        lines.append(f"  paths reached: {', '.join(block['reached'])}")
    for p in block.get("not_reached", ()):
        lines.append(f"  path not reached: {p['path']}: {p['why']}")
    return lines


def run_coverage(judged: str, *, launch: Any = None, reached: Mapping[str, int] | list[str] | None = None,  # noqa: ANN401
                 not_judged: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A command's coverage: the launch's (flags, settings, environment; ``launch``: a
    ``server_args.Launch`` or ``None`` for a built-in config) with what this run judged and reached."""
    c = dict(getattr(launch, "coverage", None) or {})
    if isinstance(reached, Mapping):
        reached = [f"{k} ({v})" for k, v in sorted(reached.items())]
    return coverage_block(judged=judged if launch is None else f"{judged} on {launch.describe()}",
                          modelled=c.get("modelled"), not_judged=[*c.get("not_judged", ()), *(not_judged or ())],
                          unaffected=c.get("unaffected"), not_examined=c.get("not_examined"),
                          assumed=c.get("assumed"), environment=c.get("environment"), reached=list(reached or ()),
                          derived=c.get("derived"))
