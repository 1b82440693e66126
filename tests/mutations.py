"""Deliberate model mutations: can conformance against the real recordings fail?

Each mutation is a variant of ``fixed-threshold`` that changes one operation family the way a
plausible modelling mistake would (one per family: KV, draft KV, filter/merge identity,
finish, admission, retraction, chunking, prefix match, radix insert, graph choice and
padding, token counts / ``out_cache_loc``, ``seq_lens_sum``, forward lengths, idle, ...).
``tests/test_mutations.py`` replays the H200 recordings (``tests/data/gpu``) against each and
requires a mismatch, a model invariant violation or a crash the real worker did not have.

``python -m tests.mutations`` prints the mutation score table of
``docs/results/mutations.md`` (recording that caught it, first mismatch).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from specstate.integration.conformance import (
    ModelBackend, RecordedBackend, RecordedWorkload, compare, config_from_header, load_records, recorded_workload,
)
from specstate.integration.backend import Observation
from specstate.model import known_bugs as KB
from specstate.model import scheduler as S
from specstate.model import worker as W
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
                   if not p.name.startswith("timing") and p.parent.name not in ("naive-graph", "naive-eager", "none"))
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


def main() -> int:
    catches = [catch(m) for m in MUTATIONS]
    print(table(catches))
    return 0 if all(c.recording for c in catches) else 1


if __name__ == "__main__":
    sys.exit(main())
