"""``specstate check -- vllm serve ...``: the vLLM 0.34.0 family judged on a launch line.

Parts: ``start`` (the engine start: DSD off under data parallelism, the capture plan and its dummy
batches), ``sweep`` (a fixed load: 1..N decodes with a long prompt arriving, the #49548 shape),
``fuzz`` (random workloads from one ``random.Random(seed)``, every vLLM invariant after every step,
``specstate/integration/vllm_0_34_0/invariants.py``). A failure is shrunk to a minimal trace (fewest steps,
requests and tokens that still break the same invariant) and written as JSON.
"""

from __future__ import annotations

import json
import random
import shlex
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from specstate.check_result import coverage_block
from specstate.invariants._core import Violation
from specstate.integration.vllm_0_34_0.invariants import VLLM_INVARIANTS, check_step
from specstate.model.vllm_0_34_0 import ENGINE
from specstate.model.vllm_0_34_0.config import VllmEngineConfig
from specstate.model.vllm_0_34_0.engine import Started, VOps, start, step
from specstate.model.vllm_0_34_0.flags import VllmLaunch
from specstate.model.vllm_0_34_0.launch import DEFAULT_LAUNCH, default_launch
from specstate.model.vllm_0_34_0.state import VAction, VState
from specstate.model.vllm_0_34_0.variants import DEFAULT_VARIANT, VllmVariant, load_variant
from specstate.model.variant_registry import require_variant_import

__all__ = ["Finding", "run_actions", "random_workload", "sweep_workloads", "fuzz", "shrink", "check_vllm", "VllmCheck", "format_check",
           "k_trajectory", "replay_trace", "reproduce_vllm", "default_launch", "DEFAULT_LAUNCH"]

@dataclass(frozen=True)
class Finding:
    """What broke: an invariant (``violation``) or an operation's own error (``error``: torch's, an
    upstream assertion), at ``step`` of ``actions``."""

    step: int
    violation: Violation | None = None
    error: str | None = None
    actions: tuple[VAction, ...] = ()

    @property
    def key(self) -> str:
        if self.violation is not None:
            return self.violation.invariant
        return (self.error or "").split(":", 1)[0]

    def describe(self) -> str:
        if self.violation is not None:
            return self.violation.describe()
        return f"step {self.step}: {self.error}"

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "violation": None if self.violation is None else self.violation.to_json(),
                "error": self.error, "actions": [a.to_json() for a in self.actions]}


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def run_actions(started: Started, ops: VOps, actions: tuple[VAction, ...],
                on_step: Callable[[VState], None] | None = None) -> tuple[VState, Finding | None]:
    """Play ``actions`` from the started engine, checking every invariant after each step (an async
    step that only processes output checks the state against the last scheduled step)."""
    state = started.state
    for i, a in enumerate(actions, 1):
        try:
            state = step(state, a, ops, started.config, started.plan)
        except (RuntimeError, AssertionError, IndexError, TypeError) as e:
            return state, Finding(i, error=_error(e), actions=actions[:i])
        if on_step is not None:
            on_step(state)
        if state.records:
            v = check_step(state, started.config, state.records[-1])
            if v is not None:
                return state, Finding(i, violation=replace(v, step=i), actions=actions[:i])
    return state, None


def random_workload(rng: random.Random, config: VllmEngineConfig, steps: int = 40) -> tuple[VAction, ...]:
    """Arrivals (0-3 a step, early steps heavier), prompts short or long (long ones: over the token
    budget, so they run as chunks), outputs of 1-48 tokens, per-request acceptance."""
    out = []
    top = config.max_model_len - 1
    for s in range(steps):
        n = rng.choice((0, 0, 1, 1, 2, 3)) if s < steps // 2 else rng.choice((0, 0, 0, 1))
        arrive = []
        for _ in range(n):
            if rng.random() < 0.3 and top > 64:
                prompt = rng.randint(min(top, max(1, config.max_num_batched_tokens // 2)), top)
            else:
                prompt = rng.randint(1, min(top, 64))
            arrive.append((prompt, rng.randint(1, 48)))
        k = max(config.num_speculative_tokens, 1)
        accept = tuple(rng.randint(0, k) for _ in range(rng.randint(1, 3)))
        out.append(VAction(tuple(arrive), accept))
    return tuple(out)


def _fails_same(started: Started, ops: VOps, actions: tuple[VAction, ...], key: str) -> Finding | None:
    try:
        _, f = run_actions(started, ops, actions)
    except Exception:  # noqa: BLE001 - a shrink candidate the model refuses (InvalidAction) is no candidate
        return None
    return f if f is not None and f.key == key else None


def shrink(started: Started, ops: VOps, finding: Finding, budget: int = 400) -> Finding:
    """Greedy: cut steps after the failure, drop steps, drop arrivals, halve prompts and outputs,
    lower acceptance; keep each cut that still breaks the same invariant (or raises the same error)."""
    best, key, tries = finding, finding.key, 0

    def attempt(cand: tuple[VAction, ...]) -> bool:
        nonlocal best, tries
        tries += 1
        f = _fails_same(started, ops, cand, key)
        if f is not None and (len(f.actions), _size(f.actions)) < (len(best.actions), _size(best.actions)):
            best = f
            return True
        return False

    changed = True
    while changed and tries < budget:
        changed = False
        acts = best.actions
        for i in range(len(acts)):
            if i < len(best.actions) and attempt(best.actions[:i] + best.actions[i + 1:]):
                changed = True
                break
        if changed:
            continue
        for i, a in enumerate(best.actions):
            for j in range(len(a.arrive)):
                cand = replace(a, arrive=a.arrive[:j] + a.arrive[j + 1:])
                if attempt(best.actions[:i] + (cand,) + best.actions[i + 1:]):
                    changed = True
                    break
                p, m = a.arrive[j]
                for smaller in ((max(1, p // 2), m), (p, max(1, m // 2)), (p - 1, m), (p, m - 1)):
                    if smaller != (p, m) and min(smaller) >= 1:
                        cand = replace(a, arrive=a.arrive[:j] + (smaller,) + a.arrive[j + 1:])
                        if attempt(best.actions[:i] + (cand,) + best.actions[i + 1:]):
                            changed = True
                            break
                if changed:
                    break
            if changed:
                break
            if len(a.accept) > 1 or (a.accept and a.accept[0] > 0):
                cand = replace(a, accept=(max(0, min(a.accept) - (1 if len(a.accept) == 1 else 0)),))
                if cand != a and attempt(best.actions[:i] + (cand,) + best.actions[i + 1:]):
                    changed = True
                    break
    return best


def _size(actions: tuple[VAction, ...]) -> int:
    return sum(p + m for a in actions for p, m in a.arrive) + sum(len(a.arrive) for a in actions)


def fuzz(started: Started, ops: VOps, *, seed: int = 0, max_examples: int = 200, steps: int = 40,
         deadline_s: float | None = None) -> tuple[int, Finding | None, dict[str, int]]:
    """``max_examples`` random workloads from ``random.Random(seed)``; the first finding, shrunk.
    Returns (workloads run, finding, paths reached)."""
    rng = random.Random(seed)
    reached: dict[str, int] = {}
    t0 = time.monotonic()

    def note(state: VState) -> None:
        if not state.records:
            return
        r = state.records[-1]
        if r.k == 0 and r.scheduled:
            reached["K=0 step"] = reached.get("K=0 step", 0) + 1
        if len(r.samples) < len(r.scheduled):
            reached["prefill chunk beside decodes"] = reached.get("prefill chunk beside decodes", 0) + 1
        if r.preempted:
            reached["preemption"] = reached.get("preemption", 0) + 1
        if r.dispatch is not None:
            reached[f"{r.dispatch.mode} graph"] = reached.get(f"{r.dispatch.mode} graph", 0) + 1
        if any(k is not None and k != r.k for _, k in r.spec_k) or (state.records[-2:-1] and state.records[-2].k != r.k):
            reached["K switch"] = reached.get("K switch", 0) + 1

    for n in range(1, max_examples + 1):
        actions = random_workload(rng, started.config, steps)
        _, f = run_actions(started, ops, actions, on_step=note)
        if f is not None:
            return n, shrink(started, ops, f), reached
        if deadline_s is not None and time.monotonic() - t0 > deadline_s:
            return n, None, reached
    return max_examples, None, reached


def k_trajectory(started: Started, ops: VOps, actions: tuple[VAction, ...]) -> list[int]:
    """The K of every scheduled step (``num_spec_tokens_to_schedule``), invariants not checked."""
    ks: list[int] = []
    state = started.state
    for a in actions:
        before = state.step
        state = step(state, a, ops, started.config, started.plan)
        if state.step != before and state.records:
            ks.append(state.records[-1].k)
    return ks


def sweep_workloads(config: VllmEngineConfig) -> list[tuple[VAction, ...]]:
    """The fixed load: for d = 1..8 decodes (within ``max_num_seqs``), d short requests decoding, then
    a prompt longer than the token budget arriving (it runs as chunks beside the decodes: the
    #49548 shape), every draft accepted."""
    long_prompt = min(config.max_model_len - 1, config.max_num_batched_tokens * 2 + 1)
    k = (max(config.num_speculative_tokens, 1),)
    out = []
    for d in range(1, min(8, config.max_num_seqs - 1) + 1):
        acts = [VAction(((8, 40),) * d, k), VAction((), k), VAction((), k), VAction(((long_prompt, 4),), k)]
        out.append(tuple(acts + [VAction((), k)] * 6))
    return out


@dataclass
class VllmCheck:
    launch: VllmLaunch | None
    variant: str
    parts: list[dict[str, Any]] = field(default_factory=list)
    finding: Finding | None = None
    finding_part: str | None = None
    trace_path: str | None = None
    coverage: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    #: ``reproduce``: the replay broke something other than the trace's recorded finding (exit 3)
    mismatch: bool = False
    #: the command that replays the finding (``specstate reproduce TRACE``)
    repro_command: str | None = None

    @property
    def verdict(self) -> str:
        if self.finding is not None or any(p["status"] == "failed" for p in self.parts):
            return "fail"
        if self.coverage.get("not_judged"):
            return "not judged"
        return "pass"

    @property
    def exit_code(self) -> int:
        if self.mismatch:
            return 3
        return {"pass": 0, "fail": 1, "not judged": 4}[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {"engine": ENGINE, "variant": self.variant, "verdict": self.verdict, "ok": self.verdict == "pass",
                "exit_code": self.exit_code, "parts": self.parts,
                "finding": None if self.finding is None else self.finding.to_json(), "trace": self.trace_path,
                "coverage": self.coverage, "launch": None if self.launch is None else self.launch.describe(),
                "repro_command": self.repro_command}


def _start_part(launch: VllmLaunch, ops: VOps, result: "VllmCheck") -> tuple[Started | None, dict[str, Any]]:
    """The engine start (``engine.start``): a capture's dummy batch asserting is a failed start."""
    try:
        started = start(launch.config, ops)
    except AssertionError as e:
        result.finding, result.finding_part = Finding(0, error=_error(e)), "start"
        return None, {"name": "start", "status": "failed", "summary": f"the engine does not start: {_error(e)}"}
    notes = "; ".join(started.notes)
    return started, {"name": "start", "status": "passed",
                     "summary": f"capture plan: {started.plan.describe()}" + (f"; {notes}" if notes else "")}


def _sweep_part(started: Started, ops: VOps, result: "VllmCheck") -> dict[str, Any]:
    f = None
    loads = sweep_workloads(started.config)
    for load in loads:
        _, f = run_actions(started, ops, load)
        if f is not None:
            result.finding, result.finding_part = shrink(started, ops, f), "sweep"
            return {"name": "sweep", "status": "failed", "summary": result.finding.describe()}
    return {"name": "sweep", "status": "passed",
            "summary": f"1-{len(loads)} decodes with a chunked prompt beside them: every invariant held"}


def _write_trace(result: "VllmCheck", config: VllmEngineConfig, failures: str | bool | None) -> None:
    """The finding as JSON in ``failures`` (default ``./specstate-failures``; ``False``: none written)."""
    if result.finding is None or not result.finding.actions or failures is False:
        return
    folder = Path(failures if isinstance(failures, str) else "specstate-failures")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{ENGINE}-{result.variant}-{result.finding.key}.json"
    path.write_text(json.dumps({"engine": ENGINE, "variant": result.variant, "config": _config_json(config),
                                "finding": result.finding.to_json()}, indent=1))
    result.trace_path = str(path)
    result.repro_command = f"specstate reproduce {shlex.quote(str(path))}"


def check_vllm(launch: VllmLaunch, variant: str | VllmVariant = DEFAULT_VARIANT, *, seed: int = 0,
               max_examples: int = 200, budget_s: float | None = None, failures: str | bool | None = None,
               parts: tuple[str, ...] = ("start", "sweep", "fuzz"),
               on_part: Callable[[dict[str, Any]], None] | None = None) -> VllmCheck:
    """Judge ``launch`` under ``variant``: each part's status, the first finding (shrunk), the trace
    file, the coverage block. The engine always starts first."""
    t0 = time.monotonic()
    v = variant if isinstance(variant, VllmVariant) else load_variant(variant)
    ops = v.ops
    result = VllmCheck(launch, v.name)
    reached: dict[str, int] = {}

    def done(part: dict[str, Any]) -> None:
        result.parts.append(part)
        if on_part is not None:
            on_part(part)

    started, part = _start_part(launch, ops, result)
    done(part)
    if started is not None and "sweep" in parts:
        done(_sweep_part(started, ops, result))
    if started is not None and "fuzz" in parts and result.finding is None:
        n, f, reached = fuzz(started, ops, seed=seed, max_examples=max_examples, deadline_s=budget_s)
        if f is not None:
            result.finding, result.finding_part = f, "fuzz"
        done({"name": "fuzz", "status": "failed" if f else "passed",
              "summary": (f.describe() if f else f"{n} workloads (seed {seed}), "
                          f"{len(VLLM_INVARIANTS)} invariants after every step")})
    elif "fuzz" in parts:
        done({"name": "fuzz", "status": "not run", "summary": "not run: " + (
            "the engine does not start" if started is None else f"{result.finding_part} already failed")})
    if "prove" in parts:
        done({"name": "prove", "status": "not modelled", "summary": "not modelled for the vLLM family (no batch-size "
              "abstraction of its state yet): the fuzz and sweep judge it"})
    _write_trace(result, started.config if started else launch.config, failures)
    result.coverage = coverage_block(
        judged=f"{ENGINE} {v.name}: {', '.join(p['name'] for p in result.parts if p['status'] in ('passed', 'failed'))} on "
               f"{launch.describe()}",
        modelled=list(launch.modelled), not_judged=list(launch.not_judged), unaffected=list(launch.unaffected),
        not_examined=list(launch.not_examined), assumed=list(launch.assumed),
        reached=[f"{k} ({n})" for k, n in sorted(reached.items())])
    result.elapsed_s = time.monotonic() - t0
    return result


def _config_json(c: VllmEngineConfig) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(c)
    d["schedule"] = None if c.schedule is None else [list(e) for e in c.schedule]
    return d


def format_check(result: VllmCheck) -> str:
    from specstate.check_result import coverage_lines

    lines = []
    for p in result.parts:
        status = {"passed": "passed ", "failed": "FAILED ", "not run": "", "not modelled": ""}[p["status"]]
        lines.append(f"  {p['name']:6s} {status}{p['summary']}")
    lines += coverage_lines(result.coverage)
    if result.verdict == "pass":
        unmodelled = [p["name"] for p in result.parts if p["status"] == "not modelled"]
        lines.append("verdict: PASS: every part passed" + (f" ({', '.join(unmodelled)}: not modelled for this family)"
                                                          if unmodelled else ""))
    elif result.verdict == "not judged":
        what = "; ".join(x.get("flag") or x.get("what") for x in result.coverage["not_judged"])
        lines.append(f"verdict: NOT JUDGED: no violation in what ran; not judged: {what} (exit 4)")
    else:
        f = result.finding
        lines.append(f"verdict: FAIL: {result.finding_part} failed")
        if f is not None:
            lines.append(f"  first violation ({result.finding_part}): {f.describe()}")
            if f.actions:
                lines.append(f"  minimal trace: {len(f.actions)} steps: "
                             + "; ".join(f"{i}: arrive {list(a.arrive)} accept {list(a.accept)}"
                                         for i, a in enumerate(f.actions, 1)))
        if result.trace_path:
            lines.append(f"  trace: {result.trace_path}")
        if result.repro_command:
            lines.append(f"  reproduce with: {result.repro_command}")
    return "\n".join(lines)


def _load_trace(path: str | Path) -> tuple[dict[str, Any], VllmEngineConfig, tuple[VAction, ...]]:
    from specstate.errors import UsageError

    try:
        data = json.loads(Path(path).read_text())
        c = dict(data["config"])
        c["schedule"] = None if c.get("schedule") is None else tuple(tuple(e) for e in c["schedule"])
        c["capture_sizes"] = None if c.get("capture_sizes") is None else tuple(c["capture_sizes"])
        actions = tuple(VAction(tuple((int(x[0]), int(x[1])) for x in a["arrive"]), tuple(int(x) for x in a["accept"]))
                        for a in data["finding"]["actions"])
        return data, VllmEngineConfig(**c), actions
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a vLLM trace specstate wrote ({type(e).__name__}: {str(e)[:80]})") from None


def _replay(config: VllmEngineConfig, ops: VOps, actions: tuple[VAction, ...]) -> Finding | None:
    try:
        started = start(config, ops)
    except AssertionError as e:
        return Finding(0, error=_error(e))
    return run_actions(started, ops, actions)[1]


def replay_trace(path: str | Path, *, allow_variant_import: bool = False) -> Finding | None:
    """Replay a trace ``check`` wrote (its engine config, variant and actions): the finding again, or
    ``None`` when it no longer reproduces. A ``package.module:Object`` variant the trace names is
    imported only with ``allow_variant_import`` (the one rule: ``require_variant_import``)."""
    data, config, actions = _load_trace(path)
    require_variant_import(str(data["variant"]), path, allow_variant_import)
    return _replay(config, load_variant(data["variant"]).ops, actions)


def reproduce_vllm(path: str | Path, variant: str | None = None, launch: VllmLaunch | None = None, *,
                   allow_variant_import: bool = False) -> VllmCheck:
    """``specstate reproduce TRACE`` on a vLLM trace: its actions replayed on its config (or
    ``launch``'s) under its variant (or ``variant``), every invariant after every step. Verdict FAIL
    (exit 1) with the recorded finding again, PASS (exit 0) when it no longer reproduces, exit 3 when
    a different finding comes (``mismatch``); the coverage block says what was replayed on what."""
    t0 = time.monotonic()
    data, config, actions = _load_trace(path)
    if variant is None:  # the trace's own variant: imported only with permission (the one rule)
        require_variant_import(str(data["variant"]), path, allow_variant_import)
    v = load_variant(variant or data["variant"])
    if launch is not None:
        config = launch.config
    f = _replay(config, v.ops, actions)
    result = VllmCheck(launch, v.name, finding=f, finding_part="replay" if f else None, trace_path=str(path))
    rec = data["finding"]
    rec_key = (rec.get("violation") or {}).get("invariant") or (rec.get("error") or "").split(":", 1)[0]
    if f is None:
        summary = f"{len(actions)} steps replayed: every invariant held (the recorded {rec_key} does not reproduce)"
    elif (f.key, f.step) == (rec_key, rec.get("step")):
        summary = f"the recorded finding again: {f.key} at step {f.step}"
    else:
        result.mismatch = True
        summary = (f"DIFFERENT from the recorded {rec_key} at step {rec.get('step')}: {f.key} at step {f.step} "
                   f"(exit 3)")
    result.parts.append({"name": "replay", "status": "failed" if f else "passed", "summary": summary})
    on = launch.describe() if launch is not None else "the trace's engine config"
    result.coverage = coverage_block(
        judged=f"{ENGINE} {v.name}: trace {Path(path).name} ({len(actions)} steps) replayed on {on}",
        modelled=list(launch.modelled) if launch else [], not_judged=list(launch.not_judged) if launch else [],
        unaffected=list(launch.unaffected) if launch else [], not_examined=list(launch.not_examined) if launch else [],
        assumed=list(launch.assumed) if launch else
        [{"setting": "engine config", "value": "the trace's", "why": "the config the finding was found on, as written"}])
    result.repro_command = f"specstate reproduce {shlex.quote(str(path))}"
    result.elapsed_s = time.monotonic() - t0
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m specstate.integration.vllm_0_34_0.check TRACE.json`` (the first printed reproduction; ``specstate
    reproduce TRACE.json`` is the command now): replay a vLLM trace; exit 1 when its finding
    reproduces (printed), 0 when it does not."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m specstate.integration.vllm_0_34_0.check TRACE.json", file=sys.stderr)
        return 2
    from specstate.errors import UsageError

    try:
        f = replay_trace(args[0])
    except UsageError as e:  # a trace naming a module's variant, without SPECSTATE_ALLOW_VARIANT_IMPORT=1
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"reproduced: {f.describe()}" if f is not None else "does not reproduce")
    return 1 if f is not None else 0


if __name__ == "__main__":
    raise SystemExit(main())
