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
- ``seed-patch``: the seed's patch as the seed describes it and as every-rank.md's T5 reads it:
  above the threshold ``self.forward_target_extend(batch)`` (capture FULL, graph path) on the
  batch *as the scheduler handed it*: no ``input_ids`` rebuilt, no slot allocated, ``spec_info``
  still attached. Under v1 speculation ``ScheduleBatch.prepare_for_decode`` returned before
  setting ``input_ids`` / ``out_cache_loc``, so the batch carries the ``input_ids`` of the prefill
  that became the running batch (2 rows: two requests of a cached prompt, 1 extend token each)
  and the ``out_cache_loc = None`` of ``merge_batch``. sglang 0.5.9's sequential copies raise
  ``The size of tensor a (160) must match the size of tensor b (2)``; 0.5.10+'s grouped copy
  (0.5.12) raises ``AttributeError: 'NoneType' object has no attribute 'dtype'`` first.
- ``seed-patch-alloc``: every-rank.md's T4: the same, but the patch allocates one slot per
  request (``out_cache_loc`` of ``bs``, ``seq_lens + 1``) and still leaves ``input_ids``: both
  releases raise ``160 vs 2``.
- ``fixed-threshold``: the corrected fallback (``worker.fallback_decode``).
- ``steps0-verify``: upstream 0.5.14+'s design: a trivial 1-node verify through a
  TARGET_VERIFY graph captured at ``draft_token_num = 1``, then draft-extend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.batch import ScheduleBatch, set_rows
from specstate.model.kv import alloc_decode_slots
from specstate.model.modes import CaptureHiddenMode, Worker
from specstate.model.runner import GraphRunner, default_graph_runners, run_forward, target_buffers, target_verify_runner
from specstate.model.spec_info import EagleDraftInput, EagleVerifyInput
from specstate.model.tx import Tx
from specstate.model.variant_registry import Variant, register
from specstate.model.sglang_0_5_12.worker import _fb

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig
    from specstate.model.ops_table import Ops

__all__ = ["threshold_decision", "naive_fallback_decode", "naive_eager_fallback_decode", "seed_patch_decode",
           "seed_patch_alloc_decode",
           "steps0_graph_runners", "shared_target_runners", "steps0_fallback_decode"]


def threshold_decision(ops: "Ops", tx: Tx, batch: ScheduleBatch) -> bool:
    """The seed's rule: speculate iff the decode batch has at most ``threshold`` requests."""
    return tx.config.speculation_allowed(batch.batch_size)


def _plain_decode_prep(ops: "Ops", tx: Tx) -> tuple[Tx, ScheduleBatch]:
    """What ``prepare_for_decode`` skips under speculation: one input token and one KV slot
    per request, ``seq_lens += 1`` (the seed's patch; ``spec_info`` left as it is)."""
    batch = tx.state.running
    bs = batch.batch_size
    s = alloc_decode_slots(tx.state, [tx.state.req(r).kv_allocated_len for r in batch.rids],
                           "naive plain-decode preparation", ops)
    s = s.with_reqs(s.req(r).evolve(kv_allocated_len=s.req(r).kv_allocated_len + 1) for r in batch.rids)
    info = batch.spec_info
    ids = info.bonus_tokens if isinstance(info, EagleDraftInput) else (bs,)
    grown = tuple(L + 1 for L in batch.seq_lens)
    dbatch = batch.evolve(input_ids=ids, positions=(bs,), out_cache_loc=(bs,), seq_lens=grown,
                          stored_seq_lens_sum=sum(grown))
    dbatch = set_rows(dbatch, tx.state.step_index, input_ids="naive plain-decode preparation (the bonus tokens)",
                      out_cache_loc="naive plain-decode preparation (one slot per request)")
    return tx.with_state(s.evolve(running=dbatch)), dbatch


def naive_fallback_decode(ops: "Ops", tx: Tx) -> Tx:
    """Seed patch, graph path: ``self.forward_target_extend(batch)`` with stale ``spec_info``."""
    tx, dbatch = _plain_decode_prep(ops, tx)
    runner = ops.graph_runners(ops, tx.config)["target_verify"]
    fr = run_forward("naive_fallback_decode", Worker.TARGET, _fb(dbatch, CaptureHiddenMode.FULL), runner,
                     tx.config, expected_tokens=dbatch.batch_size, ops=ops, tx=tx)
    return tx.record(fr)  # v1's result processor ignores next_token_ids: no output appended


def _target_extend_as_handed(ops: "Ops", tx: Tx, phase: str) -> Tx:
    """``EAGLEWorker.forward_target_extend(batch)`` on the running batch as it is: capture FULL,
    ``ForwardBatch.init_new``'s positions (``spec_info.positions`` when set, else
    ``clamp_position(seq_lens)``: one per request), the batch's own ``input_ids`` and
    ``out_cache_loc``; ``can_run`` says yes (bs <= max, FULL) and the TARGET_VERIFY graph replays."""
    batch = tx.state.running
    positions = getattr(batch.spec_info, "positions", None) or (batch.batch_size,)
    fb = _fb(batch, CaptureHiddenMode.FULL, positions=positions)
    runner = ops.graph_runners(ops, tx.config)["target_verify"]
    fr = run_forward(phase, Worker.TARGET, fb, runner, tx.config, expected_tokens=batch.batch_size, ops=ops, tx=tx)
    return tx.record(fr)  # v1's result processor ignores next_token_ids: no output appended


def seed_patch_decode(ops: "Ops", tx: Tx) -> Tx:
    """The seed's patch on the batch as handed (every-rank.md T5): nothing rebuilt, nothing allocated."""
    return _target_extend_as_handed(ops, tx, "seed_patch_decode")


def seed_patch_alloc_decode(ops: "Ops", tx: Tx) -> Tx:
    """The seed's patch with one slot per request allocated (every-rank.md T4): ``out_cache_loc``
    of ``bs`` and ``seq_lens + 1`` as the naive preparation, ``input_ids`` left as carried."""
    carried, carried_from = tx.state.running.input_ids, tx.state.running.input_ids_from
    tx, dbatch = _plain_decode_prep(ops, tx)
    tx = tx.with_running(dbatch.evolve(input_ids=carried, input_ids_from=carried_from))
    return _target_extend_as_handed(ops, tx, "seed_patch_decode")


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
SEED_PATCH = register(Variant(
    "seed-patch",
    "the seed's patch on the batch as the scheduler handed it (input_ids as carried, out_cache_loc None, spec_info "
    "attached), through the TARGET_VERIFY graph: 0.5.9 raises 160 vs 2, 0.5.12 AttributeError .dtype",
    overrides={"decide_speculation": threshold_decision, "fallback_decode": seed_patch_decode},
    expected_invariant="worker-crash", reference="seed (crash-at-c10.md); every-rank.md T5", scenario="seed-benchmark"))
SEED_PATCH_ALLOC = register(Variant(
    "seed-patch-alloc",
    "the seed's patch allocating one slot per request but leaving input_ids as carried, through the TARGET_VERIFY "
    "graph: 160 vs 2 on 0.5.9 and 0.5.12",
    overrides={"decide_speculation": threshold_decision, "fallback_decode": seed_patch_alloc_decode},
    expected_invariant="worker-crash", reference="every-rank.md T4", scenario="seed-benchmark"))
FIXED = register(Variant(
    "fixed-threshold",
    "clear spec_info, eager 1-token decode, outputs as verify, draft-extend keeps the draft KV and a fresh EagleDraftInput",
    overrides={"decide_speculation": threshold_decision}, correct=True))
STEPS0 = register(Variant(
    "steps0-verify",
    "upstream 0.5.14+: a trivial 1-node verify through a TARGET_VERIFY graph captured at draft_token_num=1, plus draft-extend",
    overrides={"decide_speculation": threshold_decision, "graph_runners": steps0_graph_runners,
               "fallback_decode": steps0_fallback_decode}, correct=True))
