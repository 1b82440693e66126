"""Conformance of sglang 0.5.17 recordings with the v2 family (``specstate.model.sglang_0_5_17``).

``recorded_workload`` walks a recording (schema ``specstate-sglang17-rec/1``, ``recorder.py``) in
the order the scheduler wrote it and rebuilds the model's actions:

- every ``arrive`` is an ``Arrive`` (real ``max_new_tokens``, the longest prompt prefix shared
  with an earlier request), every ``abort`` of a known request an ``Abort``;
- every ``loop`` line is one ``Step`` (one ``Scheduler.event_loop_overlap`` iteration that ran or
  processed a batch); its accept lengths are those of the batch it launched, which the *next*
  ``post`` line reports (results are processed in launch order: a FIFO);
- a ``retract`` line belongs to the ``loop`` line *after* it: ``ScheduleBatch.retract_decode``
  runs inside ``get_next_batch_to_run`` (``update_running_batch``), which the ``loop`` line follows;
- a loop line with ``idle_before > 0`` follows iterations that only idled: one idle ``Step`` goes
  before the inputs that arrived since the previous loop line (an idle iteration with inputs is
  logged itself).

``RecordedBackend`` and ``ModelBackend`` both describe each logged iteration as an
``Observation`` (what was launched, with which step count and forwards; what was processed; the
scheduler at the end of the iteration: allocator, radix tree, waiting queue, running batch and
its requests' KV, ``new_token_ratio``, the chunked request, the adaptive controller); ``compare``
(engine-neutral, ``integration/compare.py``) lists the mismatches. The walk itself is the shared
route's (``integration/walk.py``: read, step the model, compare, report); this release brings
``CONFORMANCE``: its replay (``Recording17``), both observers, the state its recordings start
from and its crash verdict hooks (``_at_crash``, ``crash_verdict``). ``integration/conform.py``
loads a recording once and walks it. Nothing here imports sglang.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from specstate.integration import walk
from specstate.integration.backend import Fwd, Observation, head as _head
from specstate.integration.compare import Mismatch, load_records
from specstate.integration.walk import Conformance, Walk, arrival
from specstate.model import Abort, SpecConfig, Step, StepOutcome
from specstate.model.sglang_0_5_17.aborts import OOM_ABORT_MESSAGE
from specstate.model.sglang_0_5_17.adaptive import ignored_keys
from specstate.model.sglang_0_5_17.state import resumed_overlap_state
from specstate.integration.sglang_0_5_17.recording import (_Abort, _Adaptive, _Arrive, _End, _Error, _Header, _Launch,
                                                           _Loop, _Post, _Reqs, _Retract, model_for, typed_header)
from specstate.schema._record_types import SchedMaybeRatio
from specstate.schema._recording import as_given, typed_records

__all__ = ["SCHEMA", "is_v17", "recording_counts", "config_from_header", "variant_from_header", "crash_verdict", "resumed_v2", "message_sizes", "Loop", "Recording17", "recorded_workload",
           "RecordedBackend", "ModelBackend", "check_recording", "CONFORMANCE", "main"]

SCHEMA = "specstate-sglang17-rec/1"


def typed(records: Any) -> list[Any]:
    """The records as this release's models (``specstate.schema.typed_records``): a loaded
    recording's own, or a hand-built list of dicts validated as the loader would."""
    return typed_records(records, model_for)


_NO_REQS = _Reqs()
_NO_SCHED = SchedMaybeRatio()


def is_v17(records: list[dict[str, Any]]) -> bool:
    header = next((r for r in records if r.get("ev") == "header"), {})
    return header.get("schema") == SCHEMA


def header_of(header: _Header | dict[str, Any]) -> _Header:
    """A 0.5.17 header as its model: a loaded recording's, or a header dict validated as the
    loader would (the ``ev`` and ``schema`` it always has filled in where a hand-built one lacks them)."""
    if isinstance(header, _Header):
        return header
    return _Header.model_validate({"ev": "header", "schema": SCHEMA, "server_args": {}, **header})


def _capture_list(header: _Header) -> tuple[int, ...] | None:
    """The explicit ``--cuda-graph-bs-decode`` list (``None``: derived from the max)."""
    bs = header.server_args.cuda_graph_bs_decode
    return tuple(int(b) for b in bs) if bs else None


def config_from_header(header: _Header | dict[str, Any]) -> SpecConfig:
    """The model config of a 0.5.17 recording (server arguments and the scheduler's own sizes); a
    recording whose server arguments say ``speculative_adaptive: false`` is a static launch, and
    one whose header names the switch patch (``patch``) carries its threshold."""
    h = header_of(header)
    sa = h.server_args
    kv = int(h.kv_size or h.max_total_num_tokens or 1 << 24)
    text = h.adaptive_config_text
    steps = int(sa.speculative_num_steps or 3)
    return SpecConfig(
        speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
        disable_batch_threshold=_patch_threshold(h), cuda_graph_max_bs=int(sa.cuda_graph_max_bs_decode or 16),
        cuda_graph_bs_override=_capture_list(h), max_running_requests=int(h.max_running_requests or 48),
        target_kv_pool_size=kv, draft_kv_pool_size=kv,
        chunked_prefill_size=int(h.chunked_prefill_size or sa.chunked_prefill_size or 8192),
        max_prefill_tokens=int(h.max_prefill_tokens or sa.max_prefill_tokens or 16384),
        schedule_conservativeness=float(sa.schedule_conservativeness or 1.0),
        disable_radix_cache=bool(sa.disable_radix_cache or False),
        context_len=int(h.context_len or 4096), target_hidden_size=256, draft_hidden_size=256,
        page_size=int(sa.page_size or 1),
        disable_overlap_schedule=False, speculative_adaptive=sa.speculative_adaptive is not False,
        speculative_adaptive_config=json.dumps(json.loads(text), sort_keys=True) if text else None)


def _patch_threshold(header: _Header) -> int | None:
    """The switch patch's threshold (``switch_patch.SwitchConfig.header``), on a static launch only."""
    if header.patch is None or header.server_args.speculative_adaptive is not False:
        return None
    return int(header.patch.threshold)


def variant_from_header(header: _Header | dict[str, Any]) -> str:
    """The model variant a recording is conformed with: the switch patch's (``header["patch"]``,
    written by the recorder from ``SPECSTATE_PATCH``) on a static launch, ``upstream-static`` on
    an unpatched static launch, ``upstream-adaptive`` otherwise (a patched adaptive launch: the
    patch stays out, ``switch_patch.around_activate_step_by_batch``)."""
    h = header_of(header)
    static = h.server_args.speculative_adaptive is False
    if static and h.patch is not None:
        return str(h.patch.variant)
    return "upstream-static" if static else "upstream-adaptive"


@dataclass
class Loop:
    """One logged loop iteration: its lines."""

    line: _Loop | None  #: ``None``: a step standing for a loop line (``Conformance.from_actions``)
    fbg: _Launch | None = None
    post: _Post | None = None
    end: _End | None = None
    retracted: list[str] = field(default_factory=list)  #: ``retract_decode`` in this iteration's planning
    aborted: list[str] = field(default_factory=list)  #: its out-of-memory abort
    step_index: int = -1  #: index of its ``Step`` in ``actions``
    accept: list[int] | None = None  #: the launched batch's accept lengths (from a later ``post``)


@dataclass
class Recording17:
    header: _Header | None  #: ``None``: actions standing for a recording (``Conformance.from_actions``)
    actions: list[Any]
    rid_index: dict[str, int]
    loops: list[Loop]
    idle_steps: set[int] = field(default_factory=set)  #: action indices of inserted idle steps
    start: _Arrive | None = None  #: the first arrival (the scheduler as it saw it: ``kv``, ``ratio``)

    def tentative_idles(self) -> set[int]:
        return set()  # an idle loop shows itself (``idle_before``): its ``Step`` is among the actions

    def inserted_idles(self) -> int:
        return len(self.idle_steps)

    def logged(self) -> Callable[[int, Any, StepOutcome], bool]:
        """Every loop line's ``Step`` is one logged iteration, whatever it ran."""
        steps = {loop.step_index for loop in self.loops}
        return lambda i, a, o: i in steps

    def describe(self) -> str:
        return f"{len(self.loops)} recorded loops, {len(self.rid_index)} requests"


def _on_loop(rec: Recording17, r: _Loop, inputs: list[Any], retracts: list[_Retract]) -> Loop:
    if r.idle_before > 0 and rec.loops:
        rec.idle_steps.add(len(rec.actions))
        rec.actions.append(Step())
    rec.actions.extend(inputs)
    loop = Loop(r, step_index=len(rec.actions))
    for x in retracts:  # retract_decode ran inside this iteration's get_next_batch_to_run
        loop.retracted.extend(str(y) for y in x.retracted)
        loop.aborted.extend(str(y) for y in x.aborted)
    rec.actions.append(Step())
    rec.loops.append(loop)
    return loop


def recorded_workload(records: Any) -> Recording17:
    """The model actions that reproduce a 0.5.17 recording (see the module doc); ``records``: a
    loaded recording, or a list of record dicts (``typed``)."""
    records = typed(records)
    rec = Recording17(typed_header(records), [], {}, [])
    inputs: list[Any] = []
    retracts: list[_Retract] = []  #: ``retract`` lines since the last ``loop`` line
    launched: deque[Loop] = deque()
    current: Loop | None = None
    for r in records:
        if isinstance(r, _Arrive) and r.ev == "arrive" and "prompt_len" in r.model_fields_set:
            rec.start = rec.start or r
            inputs.append(arrival(rec.rid_index, r))
        elif isinstance(r, _Abort) and str(r.rid) in rec.rid_index:
            inputs.append(Abort(rec.rid_index[str(r.rid)]))
        elif isinstance(r, _Retract):
            retracts.append(r)
        elif isinstance(r, _Loop):
            current, inputs, retracts = _on_loop(rec, r, inputs, retracts), [], []
        elif current is not None:
            _attach(current, r, launched)
    for loop in rec.loops:
        if loop.accept:
            rec.actions[loop.step_index] = Step(accept=tuple(int(a) for a in loop.accept))
    return rec


def _attach(loop: Loop, r: Any, launched: "deque[Loop]") -> None:
    if isinstance(r, _Launch):
        loop.fbg = r
        launched.append(loop)
    elif isinstance(r, _Post):
        loop.post = r
        if launched:
            launched.popleft().accept = r.accept_lens  # results are processed in launch order
    elif isinstance(r, _End) and loop.end is None:
        loop.end = r


# -- the recorded side -------------------------------------------------------------------------

def _rec_fwds(fbg: _Launch | None) -> tuple[Fwd, ...]:
    out = []
    for ev in fbg.events if fbg is not None else ():
        if ev.ev != "fwd" or "mode" not in ev.model_fields_set:
            continue
        graph = ev.padded_bs if ev.graph_ran else None
        drafting_graph = ev.worker == "draft" and ev.mode == "DECODE" and graph is not None
        seq = ev.seq_lens_cpu
        out.append(Fwd(ev.worker, ev.mode, int(ev.bs or 0), None if drafting_graph else _head(ev.input_ids), graph,
                       _head(ev.out_cache_loc), None if seq is None else tuple(int(x) for x in seq)))
    return tuple(out)


def _idx(rec: Recording17, rids: Any) -> tuple[int, ...]:
    return tuple(rec.rid_index[str(r)] for r in rids or ())


def _rec_adaptive(a: _Adaptive | None) -> tuple[Any, ...] | None:
    if a is None or not a.model_fields_set:
        return None
    slots = tuple(sorted((int(k), int(v[0]), float(v[1]), int(v[2])) for k, v in a.slots.items()))
    return (a.steps, slots)


def _rec_end(rec: Recording17, end: _End | None) -> dict[str, Any]:
    if end is None or end.kv is None:
        return {}
    kv, sched, reqs = end.kv, end.sched or _NO_SCHED, end.reqs or _NO_REQS
    return {"kv_after": (kv.available, kv.evictable, kv.protected),
            "waiting_after": _idx(rec, sched.waiting), "running_after": _idx(rec, sched.running),
            "chunked_after": rec.rid_index[sched.chunked] if sched.chunked and sched.chunked in rec.rid_index else None,
            "ratio_after": round(float(sched.new_token_ratio), 12) if sched.new_token_ratio is not None else None,
            "batch_is_full_after": bool(sched.batch_is_full),
            "req_kv_after": tuple(zip(reqs.kv_committed, reqs.kv_allocated)),
            "adaptive_after": _rec_adaptive(end.adaptive)}


def message_sizes(message: str) -> tuple[int, ...]:
    """The sizes an error message names, largest first: the parenthesised ones (PyTorch's ``The size
    of tensor a (6) must match the size of tensor b (24)``), else every number (``index 8 is out of
    bounds for dimension 0 with size 6``). Read the same way from the engine's message and the
    model's (``Crash.message``)."""
    import re

    found = re.findall(r"\((\d+)\)", message) or re.findall(r"\d+", message)
    return tuple(sorted((int(x) for x in found), reverse=True))


def _crash(fbg: _Launch | None) -> tuple[str, tuple[int, ...]] | None:
    if fbg is None or fbg.ev != "fbg_error":
        return None
    err = fbg.error or _Error()
    return (str(err.cls), message_sizes(str(err.msg or "")))


def _rec_admitted(fbg: _Launch | None, kind: str) -> dict[str, Any]:
    """A prefill's ``prefix_lens`` / ``extend_lens`` where the recording has them (``recorder.admitted``)."""
    if kind != "prefill" or fbg is None:
        return {}
    return {k: tuple(int(x) for x in v) for k, v in (("prefix_lens", fbg.prefix_lens), ("extend_lens", fbg.extend_lens))
            if v is not None}


class RecordedBackend:
    """Observations read from a 0.5.17 recording, one per logged loop iteration."""

    name = "recorded"

    def observe(self, rec: Recording17) -> list[Observation]:
        out = []
        for loop in rec.loops:
            fbg, post, line = loop.fbg, loop.post, loop.line
            kind = "none" if fbg is None else ("prefill" if fbg.mode_in in ("EXTEND", "MIXED") else "decode")
            batch = line.batch if line is not None else None
            out.append(Observation(
                kind=kind, rids=_idx(rec, batch.rids if batch is not None else None),
                path=(fbg.path if fbg is not None else None) or "none", steps=fbg.steps if fbg is not None else None,
                forwards=_rec_fwds(fbg), crash=_crash(fbg), processed=_idx(rec, post.rids if post is not None else None),
                **_rec_admitted(fbg, kind),
                out_lens_after=tuple(((post.reqs if post is not None else None) or _NO_REQS).out_len),
                retracted=tuple(rec.rid_index[x] for x in loop.retracted),
                aborted=tuple(rec.rid_index[x] for x in loop.aborted),
                **_rec_end(rec, loop.end), extra={"iter": line.loop if line is not None else None}))
        return out


# -- the model's side ---------------------------------------------------------------------------

def _model_fwds(o: StepOutcome) -> tuple[Fwd, ...]:
    out = []
    for f in o.forwards:
        graph = f.graph.padded_bs if f.graph else None
        drafting_graph = f.worker.value == "draft" and f.forward_mode.value == "DECODE" and graph is not None
        out.append(Fwd(f.worker.value, f.forward_mode.value, f.batch_size, None if drafting_graph else f.input_ids[0],
                       graph, f.out_cache_loc[0] if f.out_cache_loc else None, tuple(f.seq_lens)))
    return tuple(out)


def _model_path(o: StepOutcome) -> tuple[str, int | None]:
    v2 = o.state.v2
    launched = v2.pending if v2 is not None else None
    if o.batch_kind == "prefill":
        return "extend", launched.steps if launched else None
    if o.batch_kind == "decode" and launched is not None:
        return ("trivial" if launched.steps == 0 else "spec"), launched.steps
    return "none", None


def _model_adaptive(o: StepOutcome) -> tuple[Any, ...] | None:
    v2 = o.state.v2
    if v2 is None:
        return None
    if v2.adaptive is None:  # a static launch: the worker's step count (a switch patch's), no controller slots
        return (v2.active_steps, ())
    slots = tuple((k, s.current_steps, s.ema_accept_len, s.batch_count) for k, s in v2.adaptive.slots)
    return (v2.active_steps, slots)


def model_admitted(o: StepOutcome) -> dict[str, Any]:
    """The launched prefill's ``extend_lens`` and radix match (its target extend forward's
    ``seq_lens`` less ``extend_lens``: ``prefix_indices`` + the extend, per request)."""
    if o.batch_kind != "prefill":
        return {}
    f = next((f for f in o.forwards if f.worker.value == "target" and f.extend_lens is not None), None)
    if f is None:
        return {}
    return {"extend_lens": tuple(f.extend_lens),
            "prefix_lens": tuple(s - e for s, e in zip(f.seq_lens, f.extend_lens)) if f.seq_lens else None}


def model_observation(o: StepOutcome) -> Observation:
    s = o.state
    path, steps = _model_path(o)
    kind = o.batch_kind if o.batch_kind in ("prefill", "decode") else "none"
    if o.crash is not None:
        return Observation(kind=kind, rids=o.batch_rids, path=path, steps=steps, forwards=_model_fwds(o),
                           crash=(o.crash.error_class, message_sizes(o.crash.message)),
                           extra={"crash_where": o.crash.where, "crash_message": o.crash.message})
    return Observation(
        kind=kind, rids=o.batch_rids, path=path, steps=steps, forwards=_model_fwds(o), processed=o.processed,
        **model_admitted(o),
        out_lens_after=tuple(s.req(r).output_len for r in o.processed),
        retracted=tuple(e.rid for e in o.events if e.kind == "retract" and e.rid is not None),
        aborted=tuple(e.rid for e in o.events if e.kind == "abort" and e.detail.startswith(OOM_ABORT_MESSAGE)
                      and e.rid is not None),
        kv_after=(s.kv_available, s.tree.evictable, s.tree.protected), waiting_after=s.waiting,
        running_after=s.running.rids, chunked_after=s.chunked_rid, ratio_after=round(s.new_token_ratio, 12),
        batch_is_full_after=s.running.batch_is_full,
        req_kv_after=tuple((s.req(r).kv_committed_len, s.req(r).kv_allocated_len) for r in s.running.rids),
        adaptive_after=_model_adaptive(o))


class ModelBackend(walk.ModelBackend):
    """The 0.5.17 model side of the shared walk (``walk.ModelBackend``): every loop line's step
    as the v2 recorder logs it (``model_observation``), from the state the recording's header
    found (``initial``); ``upstream-adaptive`` unless a variant is named."""

    default_variant = "upstream-adaptive"

    def initial(self, state: Any, replay: Any) -> Any:
        return _initial(state, replay)

    def observation(self, o: StepOutcome, replay: Any) -> Observation:
        return model_observation(o)


def _initial(state: Any, rec: Recording17) -> Any:
    """The model's state where the recording starts: the first arrival's ``new_token_ratio``,
    and the adaptive controller and active runtime state the header found (the engine ran
    earlier workloads; ``adaptive_start``, absent in older recordings: a fresh engine)."""
    ratio = rec.start.ratio if rec.start is not None else None
    if ratio is not None:
        state = state.evolve(new_token_ratio=float(ratio))
    start = rec.header.adaptive_start if rec.header is not None else None
    if start is not None and start.model_fields_set and state.v2 is not None and start.steps is not None:
        state = state.evolve(v2=resumed_v2(state.v2, int(start.steps), start.slots))
    return state


def resumed_v2(v2: Any, steps: int, slots: dict[str, Any]) -> Any:
    """The overlap state an idle engine resumes with: the adaptive controller's
    (``state.resumed_overlap_state``), or, on a static launch (no controller), the worker's step
    count alone (``EAGLEWorkerV2.speculative_num_steps``: what a switch patch set last; its chain
    buffers stay the launch's, the patch rebuilds none)."""
    if v2.adaptive is None:
        return v2.evolve(pending=None, launched=None, chunked_abort=None, active_steps=steps)
    return resumed_overlap_state(v2, steps, {int(k): (int(v[0]), float(v[1]), int(v[2])) for k, v in slots.items()})


def check_recording(path: Any, variant: str | None = None, *, records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything for one 0.5.17 recording: conformance with the v2 variant (the header's,
    ``variant_from_header``, unless one is named), step by step, through the shared route
    (``walk.check``; ``records``: the file's, already loaded, perhaps changed since: validated again)."""
    records = load_records(path) if records is None else as_given(records)
    return walk.check(path, records, variant or variant_from_header(typed_header(typed(records)) or {}), None, CONFORMANCE)


def _verdict(w: Walk) -> dict[str, Any]:
    """0.5.17's own report fields: the crash verdict (``crash_verdict``), the model's violations
    at the step it crashed in and elsewhere, the launch's threshold, the switches between decode
    step counts and the adaptive config keys sglang ignores."""
    crashes = [o.crash for o in w.real if o.crash]
    violations = w.backend.violations
    crash_step = next((v.step for v in violations if v.invariant == "worker-crash"), None)
    at_crash = [v for v in violations if crash_step is not None and v.step == crash_step]
    crash_fbg = next((loop.fbg for loop in w.replay.loops if loop.fbg is not None and loop.fbg.ev == "fbg_error"), None)
    model_where = next((o.extra.get("crash_where") for o in w.model if o.crash), None)
    return {"threshold": w.config.disable_batch_threshold,
            "crash_verdict": crash_verdict(crashes[0] if crashes else None, w.model_crash, crash_fbg, model_where,
                                           mismatches=len(w.mismatches)),
            "recorded_invariant_violations": [f"worker-crash: {c}" for c in crashes],
            # the model's violations at the step it crashed in (the predicted failure's own findings)
            "violations_at_model_crash": len(at_crash), "violations_elsewhere": len(violations) - len(at_crash),
            "switches": _switch_counts(w.real),
            "adaptive_config_ignored": list(ignored_keys(w.replay.header.adaptive_config_text if w.replay.header else None))}


#: what is compared at an iteration where both the model and the engine crashed (``_at_crash``)
CRASH_FIELDS = ("kind", "rids", "crash", "iterations")


def _at_crash(mism: list[Mismatch], model: list[Observation], real: list[Observation]) -> list[Mismatch]:
    """The mismatches, less those of an iteration where both sides crashed in fields other than
    ``CRASH_FIELDS``: there the model's outcome holds the state before the step (its path and
    step count) and the forwards up to the raising one, and the recorder's ``fbg_error`` line
    has neither path nor step count (``recorder._crash``) and the forwards it saw begin."""
    both = {i for i, (m, r) in enumerate(zip(model, real)) if m.crash and r.crash}
    return [m for m in mism if m.index not in both or m.field in CRASH_FIELDS]


#: the 0.5.17 part of the shared route (``integration/walk.py``; the adapter's ``conformance`` part):
#: the recording carries its adaptive config, so no switching threshold is taken
CONFORMANCE = Conformance(schema=lambda rec: SCHEMA, config=lambda header, threshold: config_from_header(header),
                          read_replay=recorded_workload, recorded=lambda rec: RecordedBackend().observe(rec),
                          model=ModelBackend, verdict=_verdict, mismatches=_at_crash,
                          from_actions=lambda actions: Recording17(None, actions, {}, [Loop(None, step_index=i) for i, a in
                                                                                      enumerate(actions) if isinstance(a, Step)]))


def crash_verdict(real: tuple[str, tuple[int, ...]] | None, model: tuple[str, tuple[int, ...]] | None,
                  fbg_error: _Launch | dict[str, Any] | None = None, model_where: str | None = None, *,
                  mismatches: int = 0) -> dict[str, Any] | None:
    """The engine's crash (the recorder's ``fbg_error``: error class and the sizes its message
    names, ``_crash``) against the model's predicted one (``Crash.error_class`` and the sizes its
    message names: ``model_observation``; both read by ``message_sizes``): ``as-predicted`` when both crashed with the same
    class and sizes at the same iteration (no mismatch before: ``mismatches``), ``differs``
    (both crashed, another way or elsewhere), ``unpredicted`` (only the engine crashed),
    ``predicted-not-seen`` (only the model); ``None`` when neither crashed. ``where_seen``: the
    model's raising function (``Crash.where``) is among the traceback's last frames (``None``
    where the recording has no traceback)."""
    if real is None and model is None:
        return None
    out: dict[str, Any] = {"real": list(real) if real else None, "model": list(model) if model else None,
                           "model_where": model_where}
    if real is not None and model is not None:
        same = real[0] == model[0] and tuple(sorted(real[1], reverse=True)) == tuple(model[1])
        out["verdict"] = "as-predicted" if same and not mismatches else "differs"
    else:
        out["verdict"] = "unpredicted" if real is not None else "predicted-not-seen"
    err = _error_of(fbg_error)
    tb = err.tb_tail if err is not None else None
    if tb and model_where:
        func = model_where.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
        out["where_seen"] = any(f"in {func}" in line for line in tb)
    out["message"] = str((err.msg if err is not None else None) or "")[:300] or None
    return out


def _error_of(fbg_error: _Launch | dict[str, Any] | None) -> _Error | None:
    """The error of an ``fbg_error`` record: a typed one's, or a record dict's validated."""
    if fbg_error is None or isinstance(fbg_error, _Launch):
        return fbg_error.error if fbg_error is not None else None
    return _Error.model_validate(fbg_error["error"]) if fbg_error.get("error") is not None else None


def _switch_counts(real: list[Observation]) -> dict[str, int]:
    """Decode iterations per step count, and switches between consecutive decode iterations."""
    steps = [o.steps for o in real if o.kind == "decode" and o.steps is not None]
    counts: dict[str, int] = {}
    for s in steps:
        counts[f"decodes_steps_{s}"] = counts.get(f"decodes_steps_{s}", 0) + 1
    return counts | step_switches(steps)


def step_switches(steps: Sequence[int | None]) -> dict[str, int]:
    """The switches between consecutive decode launches' step counts: drafting turned off
    (``switch_down``: k > 0 -> 0) and on (``switch_up``: 0 -> k > 0), and the adaptive step
    changes while drafting (``step_changes``: k -> j, both > 0 and different: 3 -> 1 -> 3 is
    two; ``steps_down`` / ``steps_up`` split them), each its own count; a pair with an
    unlogged (``None``) count is none of them (issue 36: 50 step
    changes are not one switch down and one up)."""
    pairs = [(a, b) for a, b in zip(steps, steps[1:]) if a is not None and b is not None]  # None: not logged
    moved = [(a, b) for a, b in pairs if a and b and a != b]
    return {"switch_down": sum(1 for a, b in pairs if a and not b), "switch_up": sum(1 for a, b in pairs if not a and b),
            "step_changes": len(moved), "steps_down": sum(1 for a, b in moved if b < a),
            "steps_up": sum(1 for a, b in moved if b > a)}


def recording_counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What a 0.5.17 recording shows at a glance: logged iterations, launches by path and step
    count, switches between consecutive decodes (drafting off / on, and step changes:
    ``step_switches``), accept lengths, crashes."""
    fbgs = [r for r in records if r.get("ev") in ("fbg", "fbg_error")]
    counts: dict[str, Any] = {"loops": sum(1 for r in records if r.get("ev") == "loop"), "paths": {}, "accept_hist": {}}
    for r in fbgs:
        counts["paths"][str(r.get("path"))] = counts["paths"].get(str(r.get("path")), 0) + 1
    steps = [r.get("steps") for r in fbgs if r.get("path") in ("spec", "trivial")]
    counts.update(step_switches(steps))
    for r in records:
        for a in (r.get("accept_lens") or []) if r.get("ev") == "post" else []:
            counts["accept_hist"][str(a)] = counts["accept_hist"].get(str(a), 0) + 1
    counts["crashes"] = sum(1 for r in fbgs if r.get("ev") == "fbg_error")
    counts["desc_errors"] = sum(1 for r in records if "desc_err" in r)
    return counts


def main(argv: list[str] | None = None) -> int:
    """The old command, ``python -m specstate.integration.sglang_0_5_17.conformance FOLDER [OUT.json]``:
    the shared folder runner's (``integration/conform_folder.py``), which reads every release."""
    from specstate.integration.conform_folder import main as shared

    return shared(argv)


if __name__ == "__main__":
    raise SystemExit(main())
