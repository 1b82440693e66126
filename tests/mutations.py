"""Deliberate model mutations: can conformance against the real recordings fail?

Each mutation is a variant of ``fixed-threshold`` that changes one operation family the way a
plausible modelling mistake would (one per family: KV, draft KV, filter/merge identity,
finish, admission, retraction, chunking, prefix match, radix insert, graph choice and
padding, token counts / ``out_cache_loc``, ``seq_lens_sum``, forward lengths, idle, ...).
``tests/test_mutations.py`` replays the H200 recordings (``tests/data/gpu``) against each and
requires a mismatch, a model invariant violation or a crash the real worker did not have.

``python -m tests.mutations`` prints the mutation score table of
``docs/results/mutations.md`` (recording that caught it, first mismatch).

``REGISTRY_MUTATIONS`` (issue 41) are the invariant registry's violating cases where no mutation
above and no known bug shows an invariant firing in a family; ``tests/test_invariant_registry.py``
runs them on scripted stories, not the recordings.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from specstate.integration.sglang_0_5_12.conformance import (
    ModelBackend, RecordedBackend, RecordedWorkload, compare, config_from_header, load_records, recorded_workload,
)
from specstate.integration.backend import Observation
from specstate.model.sglang_0_5_12 import known_bugs as KB
from specstate.model import scheduler as S
from specstate.model.sglang_0_5_12 import worker as W
from specstate.model.admission import add_one_req as _add_one_req
from specstate.model.batch import ScheduleBatch
from specstate.model.kv import free_slots
from specstate.model.prefix_cache import cache_unfinished_req as _cache_unfinished, release_kv_cache as _release
from specstate.model.radix import ROOT
from specstate.model.replay import replay_prepare
from specstate.model.tx import Tx
from specstate.model.variants import Variant

DATA = Path(__file__).parent / "data" / "gpu"

#: small, varied recordings first (most mutations are caught early), then the rest
FIRST = ("pressure-a/f120", "pressure-a/pressure-prefix-20", "pressure-a/pressure-chunk-21",
         "pressure-a/pressure-abort-20", "agree/random-0-0", "fixed/random-0-3", "pressure-a/pressure-retract-22",
         "pressure-b/pressure-mixed-31", "pressure-a/seed-sweep")


# -- the mutations --------------------------------------------------------------------

def _leak_one(ops: Any, s: Any, rids: tuple[int, ...], n: int, accepted: list[int]) -> Any:
    return free_slots(s, max(0, len(rids) * n - sum(accepted) - 1))


def _truncating_filter(ops: Any, tx: Tx, spec: Any, keep: list[int], has_been_filtered: bool) -> Any:
    return S.filter_spec_info(ops, tx, spec, keep, True) if len(keep) <= spec.num_rows else (tx, spec)


def _merge_other_first(ops: Any, running: ScheduleBatch, other: ScheduleBatch) -> ScheduleBatch:
    merged = S.merge_batch(ops, running, other)
    n = other.batch_size
    return merged.evolve(rids=merged.rids[-n:] + merged.rids[:-n], seq_lens=merged.seq_lens[-n:] + merged.seq_lens[:-n],
                         req_pool_indices=merged.req_pool_indices[-n:] + merged.req_pool_indices[:-n])


def _finished_keep_kv(ops: Any, tx: Tx) -> Tx:
    return tx  # process_batch_result_decode never releases finished requests


def _one_token_longer(ops: Any, tx: Tx, action: Any) -> Tx:
    return S.arrive(ops, tx, replace(action, max_new_tokens=action.max_new_tokens + 1))


def _ignore_max_running(ops: Any, tx: Tx) -> Any:
    cfg = tx.config
    tx2 = tx.with_state(tx.state.evolve(config=cfg.with_(max_running_requests=cfg.max_running_requests + 8)))
    tx2, batch = S.schedule_prefill(ops, tx2)
    return tx2.with_state(tx2.state.evolve(config=cfg)), batch


def _no_ratio_decay(ops: Any, tx: Tx) -> Tx:
    ratio = tx.state.new_token_ratio
    out = S.update_running_batch(ops, tx)
    retracted = any(e.kind == "retract" for e in out.events[len(tx.events):])
    return out if retracted else out.with_state(out.state.evolve(new_token_ratio=ratio))


def _retract_front(ops: Any, tx: Tx) -> Tx:
    running = tx.state.running
    flipped = running.evolve(rids=running.rids[::-1], seq_lens=running.seq_lens[::-1],
                             req_pool_indices=running.req_pool_indices[::-1])
    return S.retract_decode(ops, tx.with_running(flipped))


def _requeue_front(ops: Any, tx: Tx) -> Tx:
    before = tx.state.waiting
    out = S.retract_decode(ops, tx)
    new = out.state.waiting[len(before):]
    return out.with_state(out.state.evolve(waiting=new + before))


def _retract_keeps_ratio(ops: Any, tx: Tx) -> Tx:
    out = S.retract_decode(ops, tx)
    return out.with_state(out.state.evolve(new_token_ratio=tx.state.new_token_ratio))


def _no_prefix_match(ops: Any, s: Any, req: Any) -> Any:
    return s, req.evolve(prefix_len=0, cache_protected_len=0, last_node=ROOT)


def _unfinished_not_cached(ops: Any, s: Any, req: Any) -> Any:
    if req.rid == s.chunked_rid:
        return _cache_unfinished(ops, s, req)
    return s, req.evolve(prefix_len=req.kv_committed_len)  # stays the request's own, locked as before


def _retract_inserts(ops: Any, s: Any, req: Any, is_insert: bool = True) -> Any:
    return _release(ops, s, req, True)


def _fallback_loc_unfiltered(ops: Any, tx: Tx) -> Tx:
    tx, ext = W.plain_decode(ops, tx)
    running = tx.state.running
    tx = tx.with_running(running.evolve(out_cache_loc=(running.batch_size,)))
    return ops.forward_draft_extend_after_decode(ops, tx, ext)


def _plain_decode_with(ops: Any, tx: Tx, *, stale_sum: bool = False, at_L: bool = False) -> tuple[Tx, Any]:
    batch = tx.state.running
    real = W.triton_decode_metadata
    if stale_sum:
        W.triton_decode_metadata = lambda b: real(b.evolve(stored_seq_lens_sum=batch.stored_sum))  # type: ignore[assignment]
    try:
        tx2, ext = W.plain_decode(ops, tx)
    finally:
        W.triton_decode_metadata = real  # type: ignore[assignment]
    if at_L:
        fwds = tx2.forwards
        last = fwds[-1]
        tx2 = replace(tx2, forwards=fwds[:-1] + (replace(last, seq_lens=batch.seq_lens),))
    return tx2, ext


def _fallback_stale_sum(ops: Any, tx: Tx) -> Tx:
    tx, ext = _plain_decode_with(ops, tx, stale_sum=True)
    return ops.forward_draft_extend_after_decode(ops, tx, ext)


def _fallback_at_L(ops: Any, tx: Tx) -> Tx:
    tx, ext = _plain_decode_with(ops, tx, at_L=True)
    return ops.forward_draft_extend_after_decode(ops, tx, ext)


def _idle_keeps_ratio(ops: Any, tx: Tx) -> Tx:
    return tx.log("idle", "no batch to run")


def _admit_without_lock(ops: Any, s: Any, b: Any, req: Any, adm: Any) -> Any:
    s2, res = _add_one_req(ops, s, b, req, adm)
    if adm.picked and adm.picked[-1][0] == req.rid and req.last_node != ROOT:
        from specstate.model.radix import dec_lock_ref

        s2 = s2.evolve(tree=dec_lock_ref(s2.tree, req.last_node))
    return s2, res


def _pad_to_largest(ops: Any, runner: Any, fb: Any, graphs: Any, iteration: int, config: Any) -> Any:
    use = replay_prepare(ops, runner, fb, graphs, iteration, config)
    return replace(use, padded_bs=runner.max_bs)


def _m(name: str, family: str, summary: str, **kw: Any) -> Variant:
    return Variant(f"mutant-{name}", f"[{family}] {summary}", base="fixed-threshold", **kw)


MUTATIONS: tuple[Variant, ...] = (
    _m("kv-leak", "KV", "verify frees one rejected draft slot too few", overrides={"free_rejected_slots": _leak_one}),
    _m("finished-kv-kept", "finish", "process_batch_result_decode never releases a finished request's KV",
       overrides={"process_batch_result_decode": _finished_keep_kv}),
    _m("one-token-longer", "finish", "requests stop one token after max_new_tokens",
       overrides={"arrive": _one_token_longer}),
    _m("draft-kv-behind", "draft KV", "the fallback skips draft-extend: the draft KV falls one step behind",
       overrides={"fallback_decode": KB.fallback_without_draft_extend}),
    _m("filter-truncates", "filter identity", "EagleDraftInput.filter_batch truncates instead of selecting rows",
       overrides={"filter_spec_info": _truncating_filter}),
    _m("merge-order", "merge identity", "merge_batch puts the prefilled rows before the running ones",
       overrides={"merge_batch": _merge_other_first}),
    _m("max-running-ignored", "admission", "admission allows 8 more than max_running_requests",
       overrides={"schedule_prefill": _ignore_max_running}),
    _m("ratio-no-decay", "admission", "new_token_ratio never decays between decode steps",
       overrides={"update_running_batch": _no_ratio_decay}),
    _m("admit-unlocked", "admission", "an admitted request's prefix is not locked (stays evictable)",
       overrides={"add_one_req": _admit_without_lock}),
    _m("retract-front", "retraction", "retract_decode takes requests from the front",
       overrides={"retract_decode": _retract_front}),
    _m("requeue-front", "retraction", "retracted requests go to the front of the waiting queue",
       overrides={"retract_decode": _requeue_front}),
    _m("retract-keeps-ratio", "retraction", "retraction does not reset new_token_ratio",
       overrides={"retract_decode": _retract_keeps_ratio}),
    _m("retract-inserts", "retraction", "retraction inserts the request's KV into the radix tree",
       overrides={"release_kv_cache": _retract_inserts}),
    _m("chunk-budget", "chunking", "chunked_prefill_size off by one", config_changes={"chunked_prefill_size_delta": 1}),
    _m("no-prefix-match", "prefix match", "no radix prefix match at admission",
       overrides={"init_next_round_input": _no_prefix_match}),
    _m("unfinished-not-cached", "prefix match", "a prefilled request's prompt is not inserted into the tree",
       overrides={"cache_unfinished_req": _unfinished_not_cached}),
    _m("graph-list", "graph choice", "the target's capture list misses 10-14 (bs 9-14 padded to 16)",
       config_changes={"cuda_graph_bs_override": (1, 2, 3, 4, 5, 6, 7, 8, 16)}),
    _m("no-padding-reset", "padding", "graph replays skip the padding-row reset (stale rows of a larger replay)",
       overrides={"replay_prepare": KB.replay_without_padding_reset}),
    _m("pad-to-largest", "padding", "every graph replay pads to the largest captured size",
       overrides={"replay_prepare": _pad_to_largest}),
    _m("fallback-loc-unfiltered", "token counts", "the fallback keeps finished rows' out_cache_loc for draft-extend",
       overrides={"fallback_decode": _fallback_loc_unfiltered}),
    _m("stale-seq-lens-sum", "seq_lens_sum", "the fallback does not recompute seq_lens_sum",
       overrides={"fallback_decode": _fallback_stale_sum}),
    _m("fallback-at-L", "forward lengths", "the fallback's target forward attends over L, not L + 1",
       overrides={"fallback_decode": _fallback_at_L}),
    _m("idle-keeps-ratio", "idle", "on_idle does not reset new_token_ratio", overrides={"idle": _idle_keeps_ratio}),
)


# -- running them ---------------------------------------------------------------------

@dataclass(frozen=True)
class Catch:
    mutation: str
    recording: str | None  #: the first recording that caught it (None: survived)
    how: str  #: the first mismatch / violation / crash


def recordings() -> list[str]:
    every = sorted(str(p.relative_to(DATA))[: -len(".jsonl.gz")] for p in DATA.glob("*/*.jsonl.gz")
                   if not p.name.startswith("timing") and p.parent.name not in ("naive-graph", "naive-eager", "none", "seed-carried", "seed-alloc"))
    return [r for r in FIRST if r in every] + [r for r in every if r not in FIRST]


@lru_cache(maxsize=None)
def _loaded(name: str) -> tuple[Any, RecordedWorkload, tuple[Observation, ...]]:
    records = load_records(DATA / f"{name}.jsonl.gz")
    header = next(r for r in records if r.get("ev") == "header")
    wl = recorded_workload(records)
    return config_from_header(header, 5), wl, tuple(RecordedBackend().observe(wl))


def _configured(m: Variant, config: Any) -> Variant:
    delta = dict(m.config_changes).pop("chunked_prefill_size_delta", None)
    if delta is None:
        return m
    changes = {k: v for k, v in m.config_changes.items() if k != "chunked_prefill_size_delta"}
    changes["chunked_prefill_size"] = config.chunked_prefill_size + delta
    return replace(m, config_changes=changes)


def catch(m: Variant, names: list[str] | None = None) -> Catch:
    for name in names or recordings():
        config, wl, real = _loaded(name)
        backend = ModelBackend(config, _configured(m, config))
        model = backend.observe(wl, stop_at_first=True)
        if backend.violations:
            return Catch(m.name, name, "invariant " + backend.violations[0].describe())
        mism = compare(model, list(real))
        if mism:
            return Catch(m.name, name, mism[0].describe())
    return Catch(m.name, None, "survived every recording")


def table(catches: list[Catch]) -> str:
    lines = ["| mutation | family: what it changes | caught by | first mismatch |", "| --- | --- | --- | --- |"]
    by_name = {m.name: m for m in MUTATIONS}
    for c in catches:
        how = c.how.replace("|", "\\|")
        how = how if len(how) <= 220 else how[:217] + "..."
        lines.append(f"| `{c.mutation}` | {by_name[c.mutation].summary} | {c.recording or '**survived**'} | {how} |")
    caught = sum(c.recording is not None for c in catches)
    lines.append("")
    lines.append(f"Mutation score: {caught} of {len(catches)} caught.")
    return "\n".join(lines)




# -- the v2 family (sglang 0.5.17): aborts, retraction pairing, engine start, result provenance ------

V17 = DATA / "v17"


def _v2_pending_abort_inserts(ops: Any, tx: Tx) -> Tx:
    """``process_pending_chunked_abort`` inserting the aborted chunk into the tree."""
    from specstate.model.sglang_0_5_17 import aborts as A

    release = ops.release_kv_cache
    inserting = ops.replace(release_kv_cache=lambda o, s, req, is_insert=True: release(o, s, req, True))
    return A.process_pending_chunked_abort(inserting, tx)


def _v2_ema_newest_batch(ops: Any, tx: Tx, pending: Any) -> Tx:
    """``_resolve_spec_v2_tokens`` feeding the EMA the batch size of the batch just launched."""
    from specstate.model.sglang_0_5_17 import scheduler as V2S

    real = ops.on_verify_complete
    newest = tx.state.running.batch_size or pending.batch.batch_size
    fed = ops.replace(on_verify_complete=lambda o, t, num, bs: real(o, t, num, newest))
    return V2S.resolve_spec_v2_tokens(fed, tx, pending)


def _v2_mutations() -> tuple[Variant, ...]:
    from specstate.model.scheduler import abort, get_next_batch_to_run
    from specstate.model.sglang_0_5_17.variants import UNCHECKED_START

    def m(name: str, family: str, summary: str, overrides: dict[str, Any]) -> Variant:
        return Variant(f"mutant-v2-{name}", f"[{family}] {summary}", overrides=overrides, base="upstream-adaptive")

    return (
        m("skip-pending-chunked-abort", "abort", "an abort of the chunked request only sets to_finish: it is "
          "prefilled to its end", {"abort": abort, "get_next_batch_to_run": get_next_batch_to_run}),
        m("chunked-abort-inserts", "abort", "the pending chunked abort inserts the aborted chunk into the tree",
          {"process_pending_chunked_abort": _v2_pending_abort_inserts}),
        m("start-unchecked", "start", "the engine start sizes the shared logits buffer for the largest candidate "
          "and takes any startup step count", dict(UNCHECKED_START)),
        m("ema-newest-batch", "provenance", "the acceptance EMA is fed the batch size of the newest launch, not "
          "of the result's own", {"resolve_spec_v2_tokens": _v2_ema_newest_batch}),
    )


def v2_recordings() -> list[Path]:
    return sorted((V17 / "pressure").glob("*.jsonl.gz")) + sorted(V17.glob("*.jsonl.gz"))


def _shift_retractions(rec: Any) -> None:
    """The old pairing: a ``retract`` line given to the loop iteration before its own."""
    for before, loop in zip(rec.loops, rec.loops[1:]):
        before.retracted, loop.retracted = before.retracted + loop.retracted, []
        before.aborted, loop.aborted = before.aborted + loop.aborted, []


def _v2_start_catch(m: Variant) -> Catch | None:
    """The model's start against the H200's on the seven start configs of ``starts.json``."""
    import json

    from specstate.model.sglang_0_5_17.start import starts
    from specstate.model.variants import register

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.test_v17_pressure import STARTS, _config

    register(m)
    for row in STARTS:
        if starts(m.name, _config(row)) != row["started"]:
            return Catch(m.name, "pressure/starts.json", f"engine {row['engine']}: model starts "
                         f"{not row['started']}, the H200 {json.dumps(row['started'])} ({row['error']})")
    return None


def v2_catch(m: Variant | str, names: list[Path] | None = None) -> Catch:
    """A v2 mutation (a variant, or ``shift-retraction``: the conformance's old pairing) against the
    0.5.17 recordings and the H200 start configs."""
    from specstate.integration.sglang_0_5_17.conformance import ModelBackend as MB17, RecordedBackend as RB17
    from specstate.integration.sglang_0_5_17.conformance import config_from_header as cfh17, recorded_workload as rw17

    name = m if isinstance(m, str) else m.name
    if not isinstance(m, str):
        caught = _v2_start_catch(m)
        if caught is not None:
            return caught
    for p in names or v2_recordings():
        rec = rw17(load_records(p))
        if isinstance(m, str):
            _shift_retractions(rec)
        backend = MB17(cfh17(rec.header), "upstream-adaptive" if isinstance(m, str) else m)
        model = backend.observe(rec)
        where = f"{p.parent.name}/{p.name[: -len('.jsonl.gz')]}"
        if backend.violations:
            return Catch(name, where, "invariant " + backend.violations[0].describe())
        mism = compare(model, RB17().observe(rec))
        if mism:
            return Catch(name, where, mism[0].describe())
    return Catch(name, None, "survived every recording")


V2_MUTATIONS: tuple[Variant, ...] = _v2_mutations()
V2_SHIFT = "mutant-v2-shift-retraction"  #: the conformance mutation (no model variant)


def v2_table(catches: list[Catch]) -> str:
    summaries = {m.name: m.summary for m in V2_MUTATIONS}
    summaries[V2_SHIFT] = "[retraction] conformance pairs each retract line with the loop iteration before its own"
    lines = ["| mutation | family: what it changes | caught by | first mismatch |", "| --- | --- | --- | --- |"]
    for c in catches:
        how = c.how.replace("|", "\\|")
        how = how if len(how) <= 220 else how[:217] + "..."
        lines.append(f"| `{c.mutation}` | {summaries[c.mutation]} | {c.recording or '**survived**'} | {how} |")
    lines += ["", f"v2 mutation score: {sum(c.recording is not None for c in catches)} of {len(catches)} caught."]
    return "\n".join(lines)


# -- the invariant registry's violating cases (tests/invariant_registry.py) -------------------
#
# Mutations that exist to show an invariant can fire in a family where no mutation above and no
# known bug shows it: each is a plausible modelling mistake in one operation, run on a scripted
# story (not the recordings: ``test_conformance_catches`` does not run these).


def _rebased(m: Variant, base: str) -> Variant:
    """Mutation ``m``'s overrides on another family's correct variant (an operation both share)."""
    return Variant(f"{m.name}-on-{base}", m.summary, overrides=dict(m.overrides), base=base)


def _without_draft_input(base: str) -> Any:
    """``iteration``: a decode leaves the running batch without its next ``EagleDraftInput``."""
    from specstate.model import get_variant

    real = get_variant(base).ops().iteration

    def iteration(ops: Any, tx: Tx) -> Any:
        tx, kind, rids = real(ops, tx)
        running = tx.state.running
        if kind == "decode" and running.spec_info is not None:
            tx = tx.with_running(running.evolve(spec_info=None))
        return tx, kind, rids

    return iteration


def _verify_loc_one_short(ops: Any, tx: Tx, batch: Any, vinput: Any, lens: Any, state: Any) -> Any:
    """``verify_v2`` whose ``eagle_prepare_for_verify`` gives the forward one cache location too few."""
    from specstate.model.sglang_0_5_17 import worker as V2W

    tx, accept = V2W.verify_v2(ops, tx, batch, vinput, lens, state)
    last = tx.forwards[-1]
    loc = last.out_cache_loc
    short = (loc[0] - 1,) + tuple(loc[1:]) if loc else loc
    return replace(tx, forwards=tx.forwards[:-1] + (replace(last, out_cache_loc=short),)), accept


def _activate_counting_queue(ops: Any, tx: Tx, batch: Any) -> Any:
    """``activate_step_by_batch`` routed by the decode rows plus the waiting queue (v2's switch-thrash)."""
    from specstate.model.sglang_0_5_17 import worker as V2W
    from specstate.model.sglang_0_5_17.scheduler import overlap
    from specstate.model.state import Decision

    v2 = overlap(tx.state)
    size = batch.batch_size + len(tx.state.waiting)
    steps = v2.adaptive.steps_for_batch(size)
    if steps != v2.active_steps:
        tx = ops.apply_runtime_state(ops, tx, steps)
    s = tx.state
    context = tuple(slot.current_steps for _, slot in v2.adaptive.slots)
    d = Decision(batch.rids, steps > 0, s.step_index, context)
    assert V2W.activate_step_by_batch is not None  # the operation this one replaces
    return tx.with_state(s.evolve(decisions=(s.decisions + (d,))[-2:])), steps


def _paged_free_rejected_slots(ops: Any, s: Any, rids: tuple[int, ...], n: int, accepted: list[int]) -> Any:
    """``free_rejected_slots`` freeing every rejected draft slot, as at page size 1 (not whole pages:
    ``align_evict_mask_to_page_size`` keeps the page of the last accepted token)."""
    return free_slots(s, len(rids) * n - sum(accepted))


def _paged_unaligned_release(ops: Any, s: Any, req: Any, is_insert: bool = True) -> Any:
    """``release_kv_cache`` inserting the committed tokens' key uncut (no ``RadixKey.page_aligned``)."""
    from dataclasses import replace as _replace

    page = s.tree.page_size
    s, req = _release(ops, s.evolve(tree=_replace(s.tree, page_size=1)), req, is_insert)
    return s.evolve(tree=_replace(s.tree, page_size=page)), req


def _paged_decode_in_last_page(ops: Any, tx: Tx) -> Tx:
    """``fallback_decode`` that takes a decode token fitting the request's last partial page as
    needing no slot: ``kv_allocated_len`` is not grown for it."""
    tx = W.fallback_decode(ops, tx)
    s = tx.state
    page = s.config.page_size
    grown = [s.req(r) for r in s.running.rids if s.req(r).live and (s.req(r).kv_committed_len - 1) % page]
    return tx.with_state(s.with_reqs(r.evolve(kv_allocated_len=r.kv_allocated_len - 1) for r in grown))


def _paged_admission_token_overhead(ops: Any, s: Any, b: Any, req: Any, adm: Any) -> Any:
    """``add_one_req`` whose budgets count tokens at any page size (no ``ceil_paged_tokens``, one
    token of overhead per request instead of a page)."""
    b.page = 1
    return _add_one_req(ops, s, b, req, adm)


def _paged_v2_token_decode_alloc(ops: Any, tx: Tx) -> Tx:
    """``eagle_prepare_for_decode`` as at page size 1: ``nxt = max(cur, committed + reserve)``
    unaligned, and that many tokens taken from the pool instead of whole pages (no
    ``alloc_paged_token_slots_extend``)."""
    from specstate.model.kv import alloc_slots

    s = tx.state
    reserve = ops.alloc_reserve_per_decode(ops, s)
    grown = {r: max(s.req(r).kv_allocated_len, s.req(r).kv_committed_len + reserve) for r in s.running.rids}
    need = sum(n - s.req(r).kv_allocated_len for r, n in grown.items())
    if need > 0:
        s = alloc_slots(s, need, "alloc_for_spec_decode", ops)
    return tx.with_state(s.with_reqs(s.req(r).evolve(kv_allocated_len=n) for r, n in grown.items()))


def _paged_v2_alloc_rounded_down(ops: Any, tx: Tx) -> Tx:
    """``eagle_prepare_for_decode`` rounding ``committed + reserve`` down to a page, not up: a
    request near the end of its last page grows no allocation and its verify commits past it."""
    from specstate.model.sglang_0_5_17.scheduler import grow_allocations

    s = tx.state
    reserve, page = ops.alloc_reserve_per_decode(ops, s), s.config.page_size
    grown = {r: max(s.req(r).kv_allocated_len, (s.req(r).kv_committed_len + reserve) // page * page)
             for r in s.running.rids}
    return tx.with_state(grow_allocations(ops, s, grown))


def _paged_v2_extra_page(ops: Any, tx: Tx) -> Tx:
    """``eagle_prepare_for_decode`` taking one page more than the page-aligned reservation: near the
    context length the allocation outgrows the ``req_to_token`` row's paged headroom."""
    from specstate.model.sglang_0_5_17.scheduler import decode_alloc_lens, grow_allocations

    s = tx.state
    page = s.config.page_size
    grown = {r: n + page for r, n in decode_alloc_lens(s, ops.alloc_reserve_per_decode(ops, s)).items()}
    return tx.with_state(grow_allocations(ops, s, grown))


def _paged_v2_unaligned_release(ops: Any, s: Any, req: Any, is_insert: bool = True) -> Any:
    """The overlap family's ``release_kv_cache`` inserting the committed tokens' key uncut (no
    ``RadixKey.page_aligned``)."""
    from dataclasses import replace as _replace

    from specstate.model.sglang_0_5_17.scheduler import release_kv_cache_v2

    page = s.tree.page_size
    s, req = release_kv_cache_v2(ops, s.evolve(tree=_replace(s.tree, page_size=1)), req, is_insert)
    return s.evolve(tree=_replace(s.tree, page_size=page)), req


#: page-level mutations the CPU oracle judges at page sizes 16 and 64 (``tests/test_paged_kv.py``)
PAGED_MUTATIONS: tuple[Variant, ...] = (
    Variant("mutant-paged-admission-token-overhead", "[KV pages] admission budgets count tokens, not pages",
            overrides={"add_one_req": _paged_admission_token_overhead}, base="fixed-threshold"),
    Variant("mutant-paged-v2-alloc-rounded-down", "[KV pages] the v2 decode over-allocation rounds down to a page, "
            "not up", overrides={"eagle_prepare_for_decode": _paged_v2_alloc_rounded_down}, base="upstream-adaptive"),
)


def _registry_mutations() -> tuple[Variant, ...]:
    by_name = {m.name: m for m in MUTATIONS}

    def m(name: str, family: str, summary: str, base: str, overrides: dict[str, Any]) -> Variant:
        return Variant(f"mutant-{name}", f"[{family}] {summary}", overrides=overrides, base=base)

    return (
        m("decode-drops-draft-input", "mode", "a decode leaves the running batch without its next EagleDraftInput",
          "fixed-threshold", {"iteration": _without_draft_input("fixed-threshold")}),
        m("v2-decode-drops-draft-input", "mode", "a v2 decode leaves the running batch without its next draft input",
          "upstream-adaptive", {"iteration": _without_draft_input("upstream-adaptive")}),
        m("v2-verify-loc-short", "token counts", "the v2 verify forward gets bs * n - 1 cache locations",
          "upstream-adaptive", {"verify_v2": _verify_loc_one_short}),
        m("v2-activate-counts-queue", "switch", "the adaptive step count is routed by decode rows + waiting queue",
          "upstream-adaptive", {"activate_step_by_batch": _activate_counting_queue}),
        m("paged-free-rejected-slots", "KV pages", "verify frees each rejected draft slot, not whole empty pages",
          "fixed-threshold", {"free_rejected_slots": _paged_free_rejected_slots}),
        m("paged-unaligned-insert", "KV pages", "a finished request's key goes into the tree uncut to whole pages",
          "fixed-threshold", {"release_kv_cache": _paged_unaligned_release}),
        m("paged-decode-in-last-page", "KV pages", "a decode token that fits the last partial page grows no allocation",
          "fixed-threshold", {"fallback_decode": _paged_decode_in_last_page}),
        m("paged-v2-token-decode-alloc", "KV pages", "the v2 decode over-allocation takes tokens, not whole pages",
          "upstream-adaptive", {"eagle_prepare_for_decode": _paged_v2_token_decode_alloc}),
        m("paged-v2-extra-page", "KV pages", "the v2 decode over-allocation takes a page beyond the reservation",
          "upstream-adaptive", {"eagle_prepare_for_decode": _paged_v2_extra_page}),
        m("paged-v2-unaligned-insert", "KV pages", "a finished request's key goes into the v2 tree uncut to whole pages",
          "upstream-adaptive", {"release_kv_cache": _paged_v2_unaligned_release}),
        _rebased(by_name["mutant-merge-order"], "upstream-adaptive"),
        _rebased(by_name["mutant-pad-to-largest"], "upstream-adaptive"),
    )


REGISTRY_MUTATIONS: tuple[Variant, ...] = _registry_mutations()


def main() -> int:
    catches = [catch(m) for m in MUTATIONS]
    print(table(catches))
    v2 = [v2_catch(m) for m in V2_MUTATIONS] + [v2_catch(V2_SHIFT)]
    print()
    print(v2_table(v2))
    return 0 if all(c.recording for c in catches + v2) else 1


if __name__ == "__main__":
    sys.exit(main())
