"""Conformance of sglang 0.5.12 recordings: does the model do what the real worker did, step by step?

(The 0.5.12 adapter's ``conformance`` part; ``integration/conform.py`` loads a recording, pairs
its variant and walks it through ``integration/walk.py`` with ``CONFORMANCE``.)

``recorded_workload`` turns a recorded real run into model actions, walking the recorder's
lines in the order they were written (the scheduler process writes them as things happen):

- schema /2 (``sglang_recorder.SCHEMA_VERSION``): every request ``Arrive``s where the recorder
  saw it reach ``Scheduler._add_request_to_queue`` (with its real ``max_new_tokens`` and the
  longest prompt prefix it shares with an earlier request), so *admission* is the model's own
  decision and is checked; retractions, re-queues and the scheduler's state after every
  iteration (allocator, radix tree, waiting queue, ``new_token_ratio``) are compared;
- schema /1 (older recordings): arrivals are placed just before the prefill that first shows
  them (``max_new_tokens`` from the length they finished at), so admission is not checked.

Between two recorded iterations the real scheduler may have looped idle (``on_idle``; its
``update_running_batch`` drops finished rows) before new requests reached it. Where the first
arrival after an iteration saw an empty running batch (schema /2 logs the scheduler's state
with each arrival; older files: where it came after that iteration's forward ended), or where
every request of a full batch finished (``batch_is_full`` holds the waiting requests back for
one loop: ``_idles_next``), the model gets a tentative ``Step``: kept if the model idles there
too, dropped otherwise (``idle_points``).

What this release brings to the shared route (``integration/walk.py``: read, walk the model step
by step, compare, report) is ``CONFORMANCE``: its replay (``RecordedWorkload``, the actions
above), its recorded observer (``RecordedBackend``: one
:class:`~specstate.integration.backend.Observation` per iteration), its model-side observer
(``ModelBackend.observation``, over the shared walk) and its verdict fields
(``recorded_invariants`` checks the invariant families directly on the recorded states).

Only this module and ``backend.py`` know both 0.5.12 vocabularies; nothing here imports sglang.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from specstate.integration import walk
from specstate.integration.backend import Fwd, Observation, head as _head, is_drafting
from specstate.integration.compare import Mismatch, compare, load_records  # the engine-neutral part (re-exported)
from specstate.integration.sglang_0_5_12.adapter import FAMILY
from specstate.integration.walk import Conformance, Walk, arrival, read
from specstate.model import Abort, Arrive, SpecConfig, Step, StepOutcome
from specstate.model.spec_info import EagleDraftInput, spec_info_for
from specstate.integration.sglang_0_5_12.recording import (_Abort, _Arrive, _Error, _Header, _Iteration, _Kv, _Post, _Reqs,
                                                           _Retract, _ServerArgs, _Spec, model_for, typed_header)
from specstate.schema._record_types import _Open
from specstate.schema._recording import as_given, typed_records

__all__ = ["load_records", "read_recording", "config_from_header", "recorded_workload", "RecordedWorkload",
           "RecordedBackend", "ModelBackend", "Mismatch", "compare", "recorded_invariants", "CONFORMANCE"]

_SIZES = re.compile(r"\((\d+)\)")


def read_recording(path: Path | str, threshold: int | None, *,
                   records: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], SpecConfig, "RecordedWorkload"]:
    """Records, the config of their header and the workload they replay as: everything a
    check of a recording starts from (``walk.read``: records that are well-formed one by one
    but do not fit together are a ``RecordingFormatError``). ``records``: the file's records,
    already loaded."""
    from specstate.errors import UsageError

    records = load_records(path) if records is None else as_given(records)
    family = getattr(records, "family", FAMILY)
    if family != FAMILY:
        raise UsageError(f"{path}: a {family} recording (schema {getattr(records, 'header', {}).get('schema')}); this "
                         f"reads {FAMILY} recordings only (specstate conform and graph --from-recording read every family)")
    config, wl, _ = read(path, records, threshold, CONFORMANCE)
    return records, config, wl


def header_of(header: _Header | dict[str, Any]) -> _Header:
    """A 0.5.12 header as its model: a loaded recording's, or a header dict validated as the
    loader would (its ``ev`` filled in where a hand-built one lacks it)."""
    return header if isinstance(header, _Header) else _Header.model_validate({"ev": "header", **header})


def config_from_header(header: _Header | dict[str, Any], threshold: int | None) -> SpecConfig:
    h = header_of(header)
    sa = h.server_args or _NO_ARGS
    target = (h.graph_runners or {}).get("target")  # the runners by name: {"target": ..., "draft": ...}
    env = h.env or {}  # the environment variables the recorder kept, by name
    return SpecConfig(
        disable_radix_cache=bool(sa.disable_radix_cache or False),
        max_prefill_tokens=int(sa.max_prefill_tokens or 16384),
        schedule_conservativeness=float(sa.schedule_conservativeness or 1.0),
        strict_filter_check=str(env.get("SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK", "1")).lower() not in ("0", "false"),
        speculative_num_steps=int(sa.speculative_num_steps or h.speculative_num_steps),
        speculative_eagle_topk=int(sa.speculative_eagle_topk or h.topk),
        speculative_num_draft_tokens=int(sa.speculative_num_draft_tokens or h.speculative_num_draft_tokens),
        disable_batch_threshold=threshold,
        cuda_graph_max_bs=int(sa.cuda_graph_max_bs or 16),
        cuda_graph_bs_override=tuple(target.capture_bs) if target is not None and target.capture_bs else None,
        max_running_requests=int(sa.max_running_requests or 48),
        target_kv_pool_size=int(h.kv_size or 1 << 24),
        draft_kv_pool_size=int(h.kv_size or 1 << 24),
        chunked_prefill_size=int(sa.chunked_prefill_size or 8192),
        page_size=page_size_of(h),
        target_hidden_size=256, draft_hidden_size=256, num_aux_hidden_states=3,
    )


def page_size_of(header: _Header | dict[str, Any]) -> int:
    """The recording's ``--page-size``: ``ServerArgs.page_size`` as the engine ran it (after
    ``ServerArgs._handle_page_size``), else ``EAGLEWorker.page_size`` (``eagle_worker.py``:
    ``self.page_size = server_args.page_size``); recordings made before either was written: 1."""
    h = header_of(header)
    for v in (h.server_args.page_size if h.server_args is not None else None, h.page_size):
        if v is not None:
            return int(v)
    return 1


def typed(records: Any) -> list[Any]:
    """The records as this release's models (``specstate.schema.typed_records``): a loaded
    recording's own, or a hand-built list of dicts validated as the loader would."""
    return typed_records(records, model_for)


def _given(m: _Open | None) -> bool:
    """A record part that is there and not empty (``{}`` is as good as absent)."""
    return m is not None and bool(m.model_fields_set)


_NO_REQS = _Reqs()
_NO_KV = _Kv()
_NO_ARGS = _ServerArgs()


def _iterations(records: Iterable[Any]) -> Iterator[_Iteration]:
    for r in records:
        if _is_iteration(r):
            yield r


@dataclass
class RecordedWorkload:
    actions: list[Any]
    rid_index: dict[str, int]
    iterations: list[_Iteration]
    schema: int = 1
    #: action indices before which a tentative idle ``Step`` is tried (see the module doc)
    idle_points: set[int] = field(default_factory=set)
    #: per iteration: its ``post`` line (``None`` when the recording has none)
    posts: list[_Post | None] = field(default_factory=list)
    #: per iteration: rids retracted by ``retract_decode`` before it
    retracted: list[tuple[str, ...]] = field(default_factory=list)
    #: the allocator and tree as the first arrival saw them (schema /2)
    start_kv: _Kv | None = None

    def tentative_idles(self) -> set[int]:
        return self.idle_points

    def inserted_idles(self) -> int:
        return 0

    def logged(self) -> Callable[[int, Any, StepOutcome], bool]:
        """Every ``Step`` that ran a batch is one logged iteration (``forward_batch_generation``)."""
        return lambda i, a, o: isinstance(a, Step) and o.batch_kind in ("prefill", "decode")

    def describe(self) -> str:
        return f"{len(self.iterations)} recorded iterations, {len(self.rid_index)} requests"


def _final_lengths(records: list[Any]) -> dict[str, int]:
    """``max_new_tokens`` per rid: the output length it finished at with ``FINISH_LENGTH``
    (from ``post`` lines, written after ``process_batch_result``, so requests finishing at
    their prefill are seen too; older recordings without ``post`` fall back to ``fbg``)."""
    out: dict[str, int] = {}
    for r in records:
        if isinstance(r, _Post):
            rids, lens, fins = r.rids, r.out_len, r.finished
        elif isinstance(r, _Iteration) and r.ev == "fbg":
            after = r.reqs_after or _NO_REQS
            rids, lens, fins = after.rid, after.out_len, after.finished
        else:
            continue
        for rid, n, fin in zip(rids, lens, fins):
            if fin == "FINISH_LENGTH" and rid not in out:
                out[rid] = int(n)
    return out


def _schema(records: list[Any]) -> int:
    header = typed_header(records)
    return 2 if header is not None and str(header.schema_ or "").endswith("/2") else 1


def _is_iteration(r: Any) -> bool:
    return isinstance(r, _Iteration) and r.path != "idle" and bool(r.bs)


def _accept(r: _Iteration) -> list[int]:
    return (r.result.accept_lens if r.result is not None else None) or []


def _step_of(r: _Iteration) -> Step:
    return Step(accept=tuple(int(a) for a in _accept(r)))


def _end_time(r: _Iteration) -> float:
    return float(r.t or 0.0) + float(r.dt_ms or 0.0) / 1e3


def recorded_workload(records: Any) -> RecordedWorkload:
    """The model actions that reproduce a recorded run (see the module doc); ``records``: a
    loaded recording, or a list of record dicts (``typed``)."""
    records = typed(records)
    if _schema(records) == 2:
        return _workload_v2(records)
    return _workload_v1(records)


def _workload_v2(records: list[Any]) -> RecordedWorkload:
    wl = RecordedWorkload([], {}, [], schema=2)
    last_iter: _Iteration | None = None
    gap_open = False  # an arrival after the last iteration may follow an idle loop
    pending_retract: list[str] = []
    for r in records:
        if isinstance(r, _Arrive):
            if gap_open and last_iter is not None and _idled_before(r, last_iter):
                wl.idle_points.add(len(wl.actions))
            gap_open = False
            if wl.start_kv is None:
                wl.start_kv = r.kv or _NO_KV
            wl.actions.append(arrival(wl.rid_index, r))
        elif isinstance(r, _Abort) and str(r.rid) in wl.rid_index:
            wl.actions.append(Abort(wl.rid_index[str(r.rid)]))
        elif isinstance(r, _Retract):
            pending_retract.extend(str(x) for x in r.retracted)
        elif isinstance(r, _Post) and wl.iterations and wl.posts[-1] is None:
            wl.posts[-1] = r
        elif _is_iteration(r):
            if wl.posts and _idles_next(wl.posts[-1]):
                wl.idle_points.add(len(wl.actions))
            wl.actions.append(_step_of(r))
            wl.iterations.append(r)
            wl.posts.append(None)
            wl.retracted.append(tuple(pending_retract))
            pending_retract = []
            last_iter, gap_open = r, True
    return wl


def _idles_next(post: _Post | None) -> bool:
    """Did the real scheduler loop idle after this iteration, with no arrival to show it?
    When every request of the batch finished while ``batch_is_full`` was set,
    ``get_new_batch_prefill`` still refuses the waiting requests and ``update_running_batch``
    empties the batch (resetting the flag): one idle loop, then the prefill."""
    if post is None or post.sched is None or not post.sched.batch_is_full:
        return False
    return bool(post.finished) and all(post.finished)


def _idled_before(arrival: _Arrive, last_iter: _Iteration) -> bool:
    """Did the real scheduler loop idle between the last iteration and this arrival? The
    arrival's own snapshot of the scheduler says so: a decode leaves its rows in
    ``running_batch`` until the next ``update_running_batch``, which only an idle iteration
    runs before new requests come in. Without a snapshot: the arrival came after the
    iteration's forward ended."""
    if arrival.sched is not None:
        return not arrival.sched.running
    return float(arrival.t or 0.0) >= _end_time(last_iter)


def _workload_v1(records: list[Any]) -> RecordedWorkload:
    its = list(_iterations(records))
    finished_at = _final_lengths(records)
    aborts = sorted((int(r.iter or 0), str(r.rid)) for r in records if isinstance(r, _Abort))
    posts = {int(r.iter or -1): r for r in records if isinstance(r, _Post)}
    wl = RecordedWorkload([], {}, its, schema=1)
    pending = 0
    for r in its:
        it = int(r.iter or 0)
        while pending < len(aborts) and aborts[pending][0] < it:
            rid = aborts[pending][1]
            if rid in wl.rid_index:
                wl.actions.append(Abort(wl.rid_index[rid]))
            pending += 1
        before = r.reqs_before or _NO_REQS
        new = [(rid, plen) for rid, plen in zip(before.rid, before.prompt_len) if rid not in wl.rid_index]
        if new:
            wl.idle_points.add(len(wl.actions))
        for rid, plen in new:
            wl.rid_index[rid] = len(wl.rid_index)
            wl.actions.append(Arrive(int(plen), finished_at.get(rid, 1 << 20)))
        wl.actions.append(_step_of(r))
        wl.posts.append(posts.get(it))
        wl.retracted.append(())
    return wl


def _spec_shapes(desc: _Spec | None) -> tuple[Any, ...]:
    if desc is None or not _given(desc):
        return (None,)
    f = desc.fields or {}  # the tensors' descriptions: {name: {"s": shape, ...}}

    def s(name: str) -> tuple[int, ...] | None:
        v = f[name] if name in f else None
        return tuple(v["s"]) if isinstance(v, dict) and "s" in v else None

    return (desc.cls, s("topk_p"), s("topk_index"), s("hidden_states"), s("bonus_tokens"))


def _after_spec(r: _Iteration) -> tuple[Any, ...]:
    return _spec_shapes(r.after.spec_info if r.after is not None else None)


def _rec_fwds(r: _Iteration) -> tuple[Fwd, ...]:
    out: list[Fwd] = []
    for ev in r.events:
        if ev.ev != "fwd":
            continue
        g = ev.graph
        graph = g.padded_bs if g is not None and _given(g) and (ev.graph_ran or str(ev.via or "").startswith("graph")) else None
        mode = ev.mode
        drafting = is_drafting(ev.worker, mode)
        seq = ev.seq_lens_cpu
        f = Fwd(ev.worker, mode, int(ev.bs or 0), None if drafting else _head(ev.input_ids), graph,
                None if drafting else _head(ev.out_cache_loc),
                None if drafting or seq is None else tuple(int(x) for x in seq))
        if drafting and out and out[-1] == f:
            continue  # the eager draft loop runs the draft runner steps - 1 times
        out.append(f)
    return tuple(out)


class RecordedBackend:
    """Observations read from the recorder's JSON lines."""

    name = "recorded"

    def observe(self, workload: RecordedWorkload) -> list[Observation]:
        out = []
        for i, r in enumerate(workload.iterations):
            idx = tuple(workload.rid_index[x] for x in r.rids)
            after = r.reqs_after or _NO_REQS
            crash = None
            if r.ev == "fbg_error":
                err = r.error or _Error()
                crash = (str(err.cls), tuple(int(x) for x in _SIZES.findall(err.msg)))
            seq = (r.after.seq_lens if r.after is not None else None) or ()
            kind = "prefill" if r.mode_in in ("EXTEND", "MIXED") else "decode"
            ok = crash is None
            post = workload.posts[i] if i < len(workload.posts) else None
            out.append(Observation(
                kind=kind, rids=idx, path=_norm_path(r.path), accept_lens=tuple(_accept(r)),
                seq_lens_after=tuple(seq) if ok else (),
                out_lens_after=tuple(after.out_len) if ok else (),
                spec_after=_after_spec(r) if ok else (),
                forwards=_rec_fwds(r), crash=crash,
                extend_lens=_rec_extend_lens(r) if kind == "prefill" else None,
                spec_rows_after=_rec_spec_rows(r, workload) if ok and kind == "decode" else None,
                retracted=tuple(workload.rid_index[x] for x in workload.retracted[i]) if workload.schema == 2 else None,
                **(_rec_post(post, workload) if ok else {}),
                extra={"iter": r.iter}))
        return out


def _rec_extend_lens(r: _Iteration) -> tuple[int, ...] | None:
    """A prefill's extend lengths (``None``: the entry snapshot failed, ``snapshot_err``)."""
    return None if r.before is None else tuple(r.before.extend_lens or ())


def _rec_spec_rows(r: _Iteration, wl: RecordedWorkload) -> tuple[int, ...] | None:
    """SGLang's rows are positional: the ``EagleDraftInput`` after a decode holds the batch's
    unfinished requests in batch order."""
    after = r.reqs_after or _NO_REQS
    spec = _after_spec(r)
    if spec[0] != "EagleDraftInput" or spec[1] is None:
        return None
    rows = tuple(wl.rid_index[x] for x, fin in zip(after.rid, after.finished) if not fin)
    return rows if len(rows) == spec[1][0] else None


def _rec_post(post: _Post | None, wl: RecordedWorkload) -> dict[str, Any]:
    if post is None or post.kv is None:
        return {}
    kv = post.kv
    unfinished = [i for i, fin in enumerate(post.finished) if not fin]
    alloc = post.kv_allocated
    out: dict[str, Any] = {
        "kv_after": (kv.available, kv.evictable, kv.protected),
        "req_kv_after": tuple((post.kv_committed[i], alloc[i] if alloc else None) for i in unfinished),
    }
    sched = post.sched
    if sched is not None and _given(sched):
        out.update(waiting_after=tuple(wl.rid_index[x] for x in sched.waiting),
                   chunked_after=wl.rid_index[sched.chunked] if sched.chunked in wl.rid_index else None,
                   ratio_after=round(float(sched.new_token_ratio), 12),
                   batch_is_full_after=bool(sched.batch_is_full))
    return out


def _norm_path(p: str | None) -> str:
    if p in ("spec", "extend"):
        return p
    return "fallback" if p in ("fallback", "naive", "naive_graph", "naive_eager") or (p or "").startswith("naive") else (p or "?")


def _model_fwds(o: StepOutcome) -> tuple[Fwd, ...]:
    out = []
    for f in o.forwards:
        drafting = is_drafting(f.worker.value, f.forward_mode.value)
        out.append(Fwd(f.worker.value, f.forward_mode.value, f.batch_size, None if drafting else f.input_ids[0],
                       f.graph.padded_bs if f.graph else None,
                       None if drafting or not f.out_cache_loc else f.out_cache_loc[0],
                       None if drafting else tuple(f.seq_lens)))
    return tuple(out)


class ModelBackend(walk.ModelBackend):
    """The 0.5.12 model side of the shared walk (``walk.ModelBackend``): a step that ran a batch
    as the v1 recorder logs it at ``forward_batch_generation``'s exit (``observation``), from the
    radix tree the recording starts with (``initial``)."""

    def initial(self, state: Any, replay: Any) -> Any:
        return _initial(state, replay)

    def observation(self, o: StepOutcome, replay: Any) -> Observation:
        fwds = _model_fwds(o)
        if o.crash is not None:
            # the sizes the raised error names, as the recording's side reads them (a size error names
            # two; an AttributeError on a None field none): the model's error is torch's / Python's own
            crash = (o.crash.error_class, tuple(int(x) for x in _SIZES.findall(o.crash.message)))
            return Observation(kind=o.batch_kind, rids=o.batch_rids, path=_model_path(o), forwards=fwds, crash=crash)
        s = o.state
        batch = s.last_batch if o.batch_kind == "prefill" else s.running
        assert batch is not None
        spec = batch.spec_info
        spec_after = (type(spec).__name__, getattr(spec, "topk_p", None), getattr(spec, "topk_index", None),
                      getattr(spec, "hidden_states", None), getattr(spec, "bonus_tokens", None)) if spec is not None else (None,)
        path = _model_path(o)
        accept: tuple[int, ...] = ()
        if path == "spec":
            accept = tuple(s.req(r).output_len - o.before.req(r).output_len for r in o.batch_rids)
        # the recorder reads requests at forward_batch_generation's exit, before
        # process_batch_result_prefill appends the prefill's token
        lens_from = o.before if o.batch_kind == "prefill" else s
        live = [s.req(r) for r in batch.rids if s.req(r).live]
        rows = getattr(spec, "rows", None) if o.batch_kind == "decode" and isinstance(spec, EagleDraftInput) else None
        return Observation(
            kind=o.batch_kind, rids=o.batch_rids, path=path, accept_lens=accept, seq_lens_after=batch.seq_lens,
            out_lens_after=tuple(lens_from.req(r).output_len for r in batch.rids), spec_after=spec_after, forwards=fwds,
            extend_lens=tuple(batch.extend_lens or ()) if o.batch_kind == "prefill" else None,
            kv_after=(s.kv_available, s.tree.evictable, s.tree.protected),
            req_kv_after=tuple((r.kv_committed_len, r.kv_allocated_len) for r in live),
            spec_rows_after=tuple(rows) if rows is not None else None,
            retracted=tuple(e.rid for e in o.events if e.kind == "retract" and e.rid is not None),
            waiting_after=s.waiting, chunked_after=s.chunked_rid, ratio_after=round(s.new_token_ratio, 12),
            batch_is_full_after=s.running.batch_is_full)


def _initial(state: Any, wl: RecordedWorkload) -> Any:
    """The model's state where the recording starts. Recordings made without flushing the
    cache between workloads start with the earlier workloads' radix tree: it is modelled as
    one opaque evictable node of the same size (none of its tokens is shared with what
    follows; eviction order inside it is not known, so such recordings are for large pools)."""
    kv = (wl.iterations[0].kv_before if wl.iterations else None) or _NO_KV
    tree_slots = int(kv.evictable or 0) + int(kv.protected or 0)
    if not tree_slots or wl.start_kv is not None and not wl.start_kv.evictable:
        return state
    from specstate.model.radix import RadixTree

    key = tuple(("opaque", i) for i in range(tree_slots))
    tree = RadixTree(nodes=((0, -1, (), 1, 0), (1, 0, key, 0, 0)), next_id=2, evictable=tree_slots)
    return state.evolve(tree=tree, kv_available=state.kv_available - tree_slots)


def _model_path(o: StepOutcome) -> str:
    if o.batch_kind == "prefill":
        return "extend"
    return "spec" if any(f.phase == "draft" for f in o.forwards) else "fallback"


def recorded_invariants(records: Any, topk: int) -> list[str]:
    """Invariant families checked on the recorded states themselves (``mode-consistency``'s
    ``spec_info`` per forward mode read from the model's own table: ``model.spec_info.spec_info_for``)."""
    bad: list[str] = []
    for r in _iterations(typed(records)):
        if r.ev == "fbg_error":
            err = r.error or _Error()
            bad.append(f"iter {r.iter}: worker-crash: {err.cls}: {err.msg[:120]}")
            continue
        for ev in r.events:
            if ev.ev != "fwd" or ev.worker != "target":
                continue
            n, mode = _head(ev.input_ids) or 0, ev.mode
            loc = _head(ev.out_cache_loc)
            if loc is not None and loc != n:
                bad.append(f"iter {r.iter}: token-counts: target {mode} out_cache_loc {loc} != input_ids {n}")
            constrained, want = spec_info_for("target", mode)  # the model's mode-consistency table
            if constrained and ev.spec != want:
                bad.append(f"iter {r.iter}: mode-consistency: " + (f"target DECODE with {ev.spec} attached" if want is None
                                                                   else f"{mode} with {ev.spec}"))
            g = ev.graph
            if g is not None and _given(g) and ev.graph_ran and g.raw_num_token not in (None, n):
                bad.append(f"iter {r.iter}: mode-consistency: graph expects {g.raw_num_token} tokens, got {n}")
        unfinished = sum(1 for f in (r.reqs_after or _NO_REQS).finished if not f)
        spec = _after_spec(r)
        if spec[0] == "EagleDraftInput" and r.mode_in == "DECODE":
            for name, shp in zip(("topk_p", "topk_index", "hidden_states", "bonus_tokens"), spec[1:]):
                if shp is not None and shp[0] != unfinished:
                    bad.append(f"iter {r.iter}: spec-info-rows: {name} rows {shp[0]} != unfinished {unfinished}")
            if spec[1] is not None and len(spec[1]) > 1 and spec[1][1] != topk:
                bad.append(f"iter {r.iter}: spec-info-rows: topk_p width {spec[1][1]} != topk {topk}")
    return bad


def _verdict(w: Walk) -> dict[str, Any]:
    """0.5.12's own report fields: the invariant families on the recorded states
    (``recorded_invariants``) and the model's violations less those its own crash brings
    (``worker-crash``, ``mode-consistency``: the crash is judged as a mismatch)."""
    crashed = w.model_crash is not None
    return {"recorded_invariant_violations": recorded_invariants(w.records, w.config.speculative_eagle_topk),
            "model_invariant_violations": [v.describe() for v in w.backend.violations
                                           if not (crashed and v.invariant in ("worker-crash", "mode-consistency"))][:5]}


#: the 0.5.12 part of the shared route (``integration/walk.py``; the adapter's ``conformance`` part)
CONFORMANCE = Conformance(schema=lambda wl: wl.schema, config=config_from_header, read_replay=recorded_workload,
                          recorded=lambda wl: RecordedBackend().observe(wl), model=ModelBackend,
                          from_actions=lambda actions: RecordedWorkload(actions, {}, [], schema=2), verdict=_verdict)
