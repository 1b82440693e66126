"""Decode policies: what the worker does when the decode batch crosses the threshold.

- ``always-spec``: upstream v1 (``EAGLEWorker.forward_batch_generation``), never switches.
- ``naive-threshold`` (alias ``seed-stale-spec-info``): the seed's first patch. Above the
  threshold: plain-decode preparation (``input_ids`` = bonus tokens, one slot per request,
  ``seq_lens += 1``), then ``self.forward_target_extend(batch)`` (capture FULL) with
  ``batch.spec_info`` still attached. ``can_run`` says yes (bs <= max, FULL == FULL), the
  DECODE batch reaches the TARGET_VERIFY graph and ``replay_prepare`` copies 10 tokens into a
  160-token buffer slice: ``The size of tensor a (160) must match the size of tensor b (10)``.
- ``naive-threshold-eager``: the literal patch seen on the H200:
  ``target_worker.forward_batch_generation(batch.get_model_worker_batch())``. The stale
  ``capture_hidden_mode = LAST`` makes ``can_run`` refuse (LAST != FULL), the forward runs
  eager and ``TritonAttnBackend.init_forward_metadata`` reads ``spec_info.kv_indptr`` (None).
- ``fixed-threshold``: the corrected fallback (``worker.fallback_decode``).
- ``steps0-verify``: upstream 0.5.14+'s design: a trivial 1-node verify through a
  TARGET_VERIFY graph captured at ``draft_token_num = 1``, then draft-extend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.batch import ScheduleBatch
from specstate.model.kv import alloc_slots
from specstate.model.modes import CaptureHiddenMode, Worker
from specstate.model.runner import GraphRunner, default_graph_runners, run_forward, target_buffers, target_verify_runner
from specstate.model.spec_info import EagleDraftInput, EagleVerifyInput
from specstate.model.tx import Tx
from specstate.model.variant_registry import Variant, register
from specstate.model.sglang_0_5_12.worker import _fb

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig
    from specstate.model.ops_table import Ops

__all__ = ["threshold_decision", "naive_fallback_decode", "naive_eager_fallback_decode",
           "steps0_graph_runners", "shared_target_runners", "steps0_fallback_decode"]


def threshold_decision(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> bool:
    """The seed's rule: speculate iff the decode batch has at most ``threshold`` requests."""
    return tx.config.speculation_allowed(batch.batch_size)


def _plain_decode_prep(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch]:
    """What ``prepare_for_decode`` skips under speculation: one input token and one KV slot
    per request, ``seq_lens += 1`` (the seed's patch; ``spec_info`` left as it is)."""
    batch = tx.state.running
    bs = batch.batch_size
    s = alloc_slots(tx.state, bs, "naive plain-decode preparation", ops)
    s = s.with_reqs(s.req(r).evolve(kv_allocated_len=s.req(r).kv_allocated_len + 1) for r in batch.rids)
    info = batch.spec_info
    ids = info.bonus_tokens if isinstance(info, EagleDraftInput) else (bs,)
    grown = tuple(L + 1 for L in batch.seq_lens)
    dbatch = batch.evolve(input_ids=ids, positions=(bs,), out_cache_loc=(bs,), seq_lens=grown,
                          stored_seq_lens_sum=sum(grown))
    return tx.with_state(s.evolve(running=dbatch)), dbatch


def naive_fallback_decode(ops: "Ops", tx: Tx) -> Tx:
    """Seed patch, graph path: ``self.forward_target_extend(batch)`` with stale ``spec_info``."""
    tx, dbatch = _plain_decode_prep(ops, tx)
    runner = ops.graph_runners(ops, tx.config)["target_verify"]
    fr = run_forward("naive_fallback_decode", Worker.TARGET, _fb(dbatch, CaptureHiddenMode.FULL), runner,
                     tx.config, expected_tokens=dbatch.batch_size, ops=ops, tx=tx)
    return tx.record(fr)  # v1's result processor ignores next_token_ids: no output appended


def naive_eager_fallback_decode(ops: "Ops", tx: Tx) -> Tx:
    """Seed patch, literal form: ``target_worker.forward_batch_generation(get_model_worker_batch())``:
    the batch's capture mode comes from the stale ``spec_info`` (LAST)."""
    tx, dbatch = _plain_decode_prep(ops, tx)
    info = dbatch.spec_info
    capture = getattr(info, "capture_hidden_mode", CaptureHiddenMode.NULL)
    runner = ops.graph_runners(ops, tx.config)["target_verify"]
    fr = run_forward("naive_fallback_decode", Worker.TARGET, _fb(dbatch, capture), runner, tx.config,
                     expected_tokens=dbatch.batch_size, ops=ops, tx=tx)
    return tx.record(fr)


def steps0_graph_runners(ops: "Ops", config: "SpecConfig") -> dict[str, GraphRunner]:
    """Upstream 0.5.14+ also captures TARGET_VERIFY at ``draft_token_num = 1``
    (``adaptive_runtime_state.py``: one ``SpecRuntimeState`` per step count). The runtime
    states share the target's static buffers (same keys), sized at capture for the state
    with the most draft tokens; ``sized_for`` below that fails inside ``replay_prepare``."""
    return shared_target_runners(config, sized_for=config.speculative_num_draft_tokens)


def shared_target_runners(config: "SpecConfig", *, sized_for: int) -> dict[str, GraphRunner]:
    """Default runners plus ``target_verify_1``, both target runners over one set of static
    buffers holding ``max_bs * sized_for`` token rows."""
    runners = default_graph_runners(config)
    max_bs, n = max(config.cuda_graph_bs), config.speculative_num_draft_tokens
    runners["target_verify"] = target_verify_runner("target_verify", config, n, target_buffers("target", n, max_bs, sized_for))
    runners["target_verify_1"] = target_verify_runner("target_verify_1", config, 1,
                                                      target_buffers("target", 1, max_bs, sized_for))
    return runners


def steps0_fallback_decode(ops: "Ops", tx: Tx) -> Tx:
    """``_build_trivial_verify_input`` in ``eagle_worker_v2.py`` (0.5.14+, not in 0.5.12): verify a 1-node tree
    (the bonus token), accept exactly it, then draft-extend over it."""
    batch = tx.state.running
    bs = batch.batch_size
    trivial = EagleVerifyInput(
        rows=batch.rids, draft_token=(bs,), custom_mask=(batch.seq_lens_sum + bs,), positions=(bs,),
        retrieve_index=(bs, 1), retrieve_next_token=(bs, 1), retrieve_next_sibling=(bs, 1),
        spec_steps=0, topk=1, draft_token_num=1, seq_lens_sum=batch.seq_lens_sum)
    tx = tx.with_running(batch.evolve(spec_info=trivial))
    tx, ext = ops.verify(ops, tx, ops.graph_runners(ops, tx.config)["target_verify_1"])
    return ops.forward_draft_extend_after_decode(ops, tx, ext)


ALWAYS_SPEC = register(Variant(
    "always-spec", "upstream v1 EAGLEWorker: speculate at every batch size",
    config_changes={"disable_batch_threshold": None}, correct=True))
NAIVE = register(Variant(
    "naive-threshold",
    "the seed's patch: above the threshold a plain decode runs with the stale spec_info, through the TARGET_VERIFY graph",
    overrides={"decide_speculation": threshold_decision, "fallback_decode": naive_fallback_decode},
    expected_invariant="worker-crash", reference="seed (crash-at-c10.md)"), "seed-stale-spec-info")
NAIVE_EAGER = register(Variant(
    "naive-threshold-eager",
    "the seed's literal patch: can_run refuses (stale capture mode LAST), eager attention reads spec_info.kv_indptr",
    overrides={"decide_speculation": threshold_decision, "fallback_decode": naive_eager_fallback_decode},
    expected_invariant="worker-crash", reference="naive-crash-on-real-worker.md"))
FIXED = register(Variant(
    "fixed-threshold",
    "clear spec_info, eager 1-token decode, outputs as verify, draft-extend keeps the draft KV and a fresh EagleDraftInput",
    overrides={"decide_speculation": threshold_decision}, correct=True))
STEPS0 = register(Variant(
    "steps0-verify",
    "upstream 0.5.14+: a trivial 1-node verify through a TARGET_VERIFY graph captured at draft_token_num=1, plus draft-extend",
    overrides={"decide_speculation": threshold_decision, "graph_runners": steps0_graph_runners,
               "fallback_decode": steps0_fallback_decode}, correct=True))
