"""The sglang 0.5.23 family on hand-sized stories, each beside the 0.5.17 family on the same
actions: the finish order (0.5.18), the tokens a finished request leaves in the tree (0.5.21),
the decode it no longer runs for a request its queued result finishes (0.5.22), finished rows out
of the running batch at the start of every step (0.5.23), the draft extend at its own width
(0.5.18, read from code) and the default adaptive config (0.5.20). Every number is worked out
in the comments (``SMALL_V2``: 3 steps up to batch size 2, 4 tokens per verify, a 512-slot pool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specstate.check import Run
from specstate.model import Arrive, FinishReason, ReqStatus, SpecConfig, Step, Variant, get_variant
from specstate.model.ops import DEFAULT_OPS
from specstate.model.families import get_family
from specstate.model.request import Req
from specstate.model.sglang_0_5_23 import admission as admission_v23, finish, scheduler
from specstate.model.sglang_0_5_23.runtime import runtime_states_v23
from specstate.model.tx import Tx
from specstate.model.sglang_0_5_17.runtime import runtime_states
from specstate.model.sglang_0_5_17.scheduler import overlap, update_finish_state as update_finish_state_v17
from specstate.scenarios_v2 import SMALL_V2
from specstate.fuzz.trace import Trace, load_trace

V17, V23 = "upstream-adaptive", "upstream-v23"


def _outcomes(variant: str, actions: list) -> list:  # type: ignore[type-arg]
    run = Run(SMALL_V2, variant)
    return [run.apply(a) for a in actions]


@pytest.mark.parametrize("out,eos,v17,v23", [
    (5, True, FinishReason.LENGTH, FinishReason.EOS),     # a run that reaches the cap and ends in EOS
    (6, True, FinishReason.LENGTH, FinishReason.LENGTH),  # EOS past the cap: demoted to the cap
    (4, True, FinishReason.EOS, FinishReason.EOS),        # EOS below the cap: both
    (5, False, FinishReason.LENGTH, FinishReason.LENGTH),
    (4, False, None, None),
])
def test_update_finish_state_checks_eos_before_length(out: int, eos: bool, v17: FinishReason | None,
                                                      v23: FinishReason | None) -> None:
    req = Req(0, 8, 5, output_len=out, status=ReqStatus.RUNNING)
    assert update_finish_state_v17(req, eos).finish_reason == v17
    assert finish.update_finish_state(req, eos).finish_reason == v23


def test_an_abort_still_comes_first() -> None:
    req = Req(0, 8, 5, output_len=5, status=ReqStatus.RUNNING, to_abort=True)
    assert finish.update_finish_state(req, True).finish_reason == FinishReason.ABORT
    assert finish.owned_kv_len(finish.update_finish_state(req.evolve(kv_committed_len=12), True)) == 12


def test_a_run_reaching_the_cap_with_eos_finishes_by_eos_on_0_5_23() -> None:
    """prompt 8, max_new 5: prefill (1 token), then a verify accepting 4 ending in EOS: 1 + 4 = 5."""
    actions = [Arrive(8, 5), Step(), Step(accept=(4,), eos=(0,)), Step(), Step()]
    assert _outcomes(V17, actions)[-1].state.reqs[0].finish_reason == FinishReason.LENGTH
    assert _outcomes(V23, actions)[-1].state.reqs[0].finish_reason == FinishReason.EOS


def test_the_tree_keeps_only_the_tokens_through_the_cap() -> None:
    """prompt 8, max_new 2, one verify accepting 4: output 1 + 4 = 5, committed 8 + 4 = 12.
    0.5.17 inserts the 12 committed tokens (an 11-element bigram key); 0.5.23's ``owned_kv_len``
    is min(12, 8 + finished_len 2) = 10 (a 9-element key), the other slots are freed."""
    actions = [Arrive(8, 2), Step(), Step(accept=(4,)), Step(), Step()]
    s17, s23 = _outcomes(V17, actions)[-1].state, _outcomes(V23, actions)[-1].state
    assert [r.finish_reason for r in (s17.reqs[0], s23.reqs[0])] == [FinishReason.LENGTH] * 2
    assert (s17.tree.total, s17.kv_available) == (11, 512 - 11)
    assert (s23.tree.total, s23.kv_available) == (9, 512 - 9)


def test_a_request_its_queued_result_finishes_is_not_decoded_again() -> None:
    """prompt 8, max_new 4, accept 2: step 4 schedules with decode 2's result queued (output 3,
    3 + 1 >= 4): 0.5.17 decodes it once more (an overrun whose result is dropped), 0.5.23 leaves
    it out (``enable_skip_finishing_decode``) and runs nothing; the step after is idle."""
    actions = [Arrive(8, 4), Step(), Step(accept=(2,)), Step(accept=(2,)), Step(accept=(2,)), Step()]
    o17, o23 = _outcomes(V17, actions), _outcomes(V23, actions)
    assert [o.batch_kind for o in o17[1:]] == ["prefill", "decode", "decode", "decode", "none"]
    assert [o.batch_kind for o in o23[1:]] == ["prefill", "decode", "decode", "none", "idle"]
    assert o23[4].processed == (0,) and o23[4].state.reqs[0].status == ReqStatus.FINISHED
    assert o23[4].state.running.is_empty()
    assert sum(f.phase == "verify" for o in o23 for f in o.forwards) == 2
    assert sum(f.phase == "verify" for o in o17 for f in o.forwards) == 3


def test_finished_rows_leave_the_running_batch_at_the_start_of_a_step() -> None:
    """A state whose running batch still holds a finished row (0.5.17 keeps it until the next
    ``update_running_batch``): 0.5.23's first move of the step drops it and clears batch_is_full."""
    run = Run(SMALL_V2, V17)
    for a in [Arrive(8, 3), Arrive(8, 30), Step(), Step(accept=(4, 1)), Step(accept=(1, 1))]:
        out = run.apply(a)
    s = out.state
    assert s.req(0).done and 0 in s.running.rids  # finished by decode 1's result, still a row
    s = s.evolve(running=s.running.evolve(batch_is_full=True))
    ops = get_variant(V23).ops()
    tx = scheduler.filter_finished_rows(ops, Tx(s))
    assert tx.state.running.rids == (1,) and not tx.state.running.batch_is_full
    assert tx.state.running.spec_info.rows == (1,)  # type: ignore[union-attr]
    same = scheduler.filter_finished_rows(ops, tx)
    assert same.state is tx.state  # nothing finished: nothing changes


def test_a_continuing_chunks_row_counts_back_into_admission() -> None:
    """max_running 4, chunk 7: prefill 1 takes r0, r1 and 5 of r2's 6 tokens (r3 waits). Prefill 2
    plans with r0, r1 running and r2's chunk continuing: 3 of 4 rows held, 2 requests of room.
    0.5.17 bounds the adder by the free rows (1, taken by the chunk): the batch is full, r3 waits;
    0.5.23 adds the chunk's own row back (``num_held_rows``): r3 comes in with the chunk's end
    (the CPU oracle's minimal workload, docs/oracle.md)."""
    cfg = SMALL_V2.with_(max_running_requests=4, chunked_prefill_size=7)
    actions = [Arrive(1, 1), Arrive(1, 20), Arrive(6, 20), Arrive(1, 20), Step(), Step()]
    s17, s23 = ([run.apply(a) for a in actions][-1].state for run in (Run(cfg, V17), Run(cfg, V23)))
    assert (s17.waiting, s17.running.batch_is_full) == ((3,), True)
    assert (s23.waiting, s23.running.batch_is_full) == ((), False)


def test_a_chunk_that_spends_the_budget_leaves_the_batch_not_full() -> None:
    """max_running 1, chunk 7, a 25-token prompt: prefill 2 continues the chunk with all 7 tokens
    of the budget while r1 waits. 0.5.17 checks the request bound first (1 row, the chunk's) and
    sets ``batch_is_full``; 0.5.23 stops on the spent budget first and sets nothing."""
    cfg = SMALL_V2.with_(max_running_requests=1, chunked_prefill_size=7)
    actions = [Arrive(25, 1), Step(), Arrive(1, 1), Step()]
    s17, s23 = ([run.apply(a) for a in actions][-1].state for run in (Run(cfg, V17), Run(cfg, V23)))
    assert (s17.waiting, s17.chunked_rid, s17.running.batch_is_full) == ((1,), 0, True)
    assert (s23.waiting, s23.chunked_rid, s23.running.batch_is_full) == ((1,), 0, False)


#: steps 2 (a verify accepts up to 3), a 50-slot pool, five rows: the fuzzer's minimal workload
#: for the split at the prompt boundary (docs/oracle.md, "sglang 0.5.23"); ``tests/test_oracle.py``
#: runs it on upstream 0.5.23
RETRACT_SPLIT_CONFIG = SpecConfig(speculative_num_steps=2, speculative_eagle_topk=1, speculative_num_draft_tokens=3,
                                  disable_batch_threshold=None, max_running_requests=5, target_kv_pool_size=50,
                                  draft_kv_pool_size=50, chunked_prefill_size=8192, target_hidden_size=256,
                                  draft_hidden_size=256, cuda_graph_max_bs=8, disable_overlap_schedule=False,
                                  speculative_adaptive_config='{"1": {"candidate_steps": [2]}}')
_FULL = Step(accept=(3,) * 5)
RETRACT_SPLIT = ([Arrive(1, 6), Arrive(1, 6), Arrive(1, 6), Arrive(2, 6), Arrive(7, 6), Step(), _FULL]
                 + [Step()] * 6 + [Arrive(1, 20), Arrive(1, 21), Step(), *[_FULL] * 6, Step(), Step()])


def _node_lengths(tree: object, rid: int) -> list[int]:
    """Key lengths, root first, of the tree nodes over request ``rid``'s own tokens."""
    own = [n for n in tree.nodes[1:] if n[2][0][0] == rid]  # type: ignore[attr-defined]
    return [len(n[2]) for n in sorted(own, key=lambda n: n[2][0][2])]


def test_a_re_prefilled_request_keeps_its_prompt_as_a_node_of_its_own() -> None:
    """Five rows outgrow the pool at the third decode: r4 (prompt 7, the longest prompt among the
    fewest outputs) is retracted with 4 outputs. Its re-prefill fills prompt + output, 7 + 4 = 11
    tokens, and the checkpoint inserts their 10 bigrams at once. 0.5.23's ``RadixCache.checkpoint``
    then inserts the prompt's 6 bigrams alone, which splits that node 6 + 4
    (``model/sglang_0_5_23/tree.py``); without the split (the ops put back) it stays one node of 10.
    A later eviction then frees the 4 output slots and keeps the prompt: the oracle's finding."""
    unsplit = Variant("v23-tree-unsplit", "0.5.23 without the split at the prompt boundary",
                      overrides={"cache_unfinished_req": DEFAULT_OPS.cache_unfinished_req,
                                 "release_kv_cache": finish.release_kv_cache_owned}, base=V23)
    shapes = {}
    for v in (V23, unsplit):
        run = Run(RETRACT_SPLIT_CONFIG, v)
        outs = [run.apply(a) for a in RETRACT_SPLIT[:12]]  # through the step after r4's re-prefill
        r4 = outs[8].state.req(4)  # the fourth step (the third decode) retracted it
        assert (r4.status, r4.output_len, outs[10].batch_kind, outs[10].batch_rids) == (ReqStatus.WAITING, 4, "prefill",
                                                                                        (4,))
        shapes[v if isinstance(v, str) else v.name] = _node_lengths(outs[-1].state.tree, 4)
    assert shapes == {V23: [6, 4], "v23-tree-unsplit": [10]}


def test_draft_extend_is_captured_at_each_states_own_width() -> None:
    """0.5.17: every state's draft extend at the startup 4 tokens per request; 0.5.23: steps + 1."""
    cfg = get_variant(V23).configure(SMALL_V2)
    assert {s: r.draft_extend.num_tokens_per_bs for s, r in runtime_states(cfg).items()} == {0: 4, 3: 4}
    assert {s: r.draft_extend.num_tokens_per_bs for s, r in runtime_states_v23(cfg).items()} == {0: 1, 3: 4}
    assert "select_index" in {b.name for b in runtime_states_v23(cfg)[0].draft_extend.buffers}


def _draft_extend_graphs(variant: str) -> set[tuple[int, bool]]:
    """(batch size, replayed a graph) of every draft extend in a run with 3 requests (steps 0)."""
    run = Run(SMALL_V2, variant)
    out = [run.apply(a) for a in [Arrive(8, 20), Arrive(8, 20), Arrive(8, 20), Step(), Step(), Step(), Step()]]
    return {(f.batch_size, f.graph is not None) for o in out for f in o.forwards if f.phase == "draft_extend"}


def test_at_steps_0_the_draft_extend_replays_a_graph_on_0_5_23_and_runs_eager_in_the_startup_reading() -> None:
    assert _draft_extend_graphs(V23) == {(3, True)}
    assert _draft_extend_graphs("upstream-v23-startup-width") == {(3, False)}
    assert _draft_extend_graphs(V17) == {(3, False)}


def test_no_adaptive_config_gets_0_5_20s_default() -> None:
    cfg = get_family("sglang-0.5.23").prepare(SpecConfig(disable_batch_threshold=None))
    slots = json.loads(cfg.speculative_adaptive_config or "{}")
    assert slots["1"]["candidate_steps"] == [1, 3, 5, 7]
    assert get_family("sglang-0.5.17").prepare(SpecConfig(disable_batch_threshold=None)).speculative_adaptive_config is None
    # a v1 threshold still becomes upstream's two-slot config, as in 0.5.17
    assert get_family("sglang-0.5.23").prepare(SpecConfig()) == get_family("sglang-0.5.17").prepare(SpecConfig())


def test_the_family_declares_its_base_and_only_its_overrides() -> None:
    fam, v = get_family("sglang-0.5.23"), get_variant(V23)
    assert (fam.base, fam.default_variant, fam.releases, v.family_name) == ("sglang-0.5.17", V23, ("0.5.23",),
                                                                           "sglang-0.5.23")
    changed = {k for k, fn in v.all_overrides().items() if get_variant(V17).all_overrides().get(k) is not fn}
    assert changed == {"update_finish_state", "release_kv_cache", "get_next_batch_to_run", "schedule_prefill",
                       "runtime_states", "cache_unfinished_req",
                       # the engine start (start.py); init_adaptive_speculative_params stays 0.5.17's
                       "engine_start", "graph_shared_output", "build_adaptive_runtime_state", "capture_runner"}
    assert get_variant("upstream-v23-startup-width").family_name == "sglang-0.5.23"


def test_the_reviewed_scheduler_citations_are_cited_again_and_not_open() -> None:
    """Each entry of ``REVIEWED_SCHEDULER`` (read in the 0.5.17 -> 0.5.23 diff) is cited again by
    the family (docs/model-0.5.23.md), so the release-range check counts it reviewed, and is no
    longer open."""
    from pathlib import Path

    from specstate.citations import citations_of
    from specstate.model.sglang_0_5_23.ledger import REVIEWED_SCHEDULER, REVIEWED_START, UNREVIEWED

    cited = {(Path(c.file).name, c.symbol) for c in citations_of("sglang-0.5.23")}
    reviewed = {(f, s) for f, s, release, _ in REVIEWED_SCHEDULER if release == "0.5.23"}
    assert len(reviewed) == len(REVIEWED_SCHEDULER) == 38
    assert reviewed <= cited, sorted(reviewed - cited)
    assert not reviewed & set(UNREVIEWED) and not reviewed & {(f, s) for f, s, _, _ in REVIEWED_START}


_EVICT_TRACE = Path(__file__).resolve().parents[1] / "docs" / "results" / "oracle-0_5_23-evict-8-vs-6.json"


def _kv_after_iteration(trace: Trace, iteration: int) -> tuple[int, int, int]:
    """(available, evictable, protected) after the model's ``iteration``-th step of ``trace``
    (0-based, one ``Step`` an iteration): the oracle's ``kv_after``."""
    run = Run(trace.config, trace.variant)
    steps = -1
    for a in trace.actions:
        out = run.apply(a)
        if isinstance(a, Step):
            steps += 1
            if steps == iteration:
                s = out.state
                return s.kv_available, s.tree.evictable, s.tree.protected
    raise AssertionError(f"the trace has no iteration {iteration}")


def test_the_waiting_requests_tree_paths_are_refreshed_every_32nd_prefill_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle's finding (docs/results/oracle-0_5_23-evict-8-vs-6.json): 0.5.23's
    ``SchedulePolicy.calc_priority`` refreshes the waiting requests' tree paths at its 1st, 33rd,
    ... call with a waiting queue (``admission.touch_waiting_prefixes``). At iteration 37 (the
    33rd) the waiting r7's one-bigram prompt splits r3's 6-bigram leaf 1 + 5 and stamps it, so r6's
    chunk (7 slots, 2 free) evicts r5's older 7 + 1 (8). The model replays the trace to upstream's
    recorded ``kv_after``; without the refresh it evicts r3's 6, the value it had before the fix."""
    trace = load_trace(_EVICT_TRACE)
    upstream, before = trace.notes["upstream"], trace.notes["model_before_fix"]
    assert _kv_after_iteration(trace, upstream["iteration"]) == tuple(upstream["kv_after"])
    monkeypatch.setattr(admission_v23, "touch_waiting_prefixes", lambda s: s)
    assert _kv_after_iteration(trace, before["iteration"]) == tuple(before["kv_after"])


def test_the_refresh_counts_calls_with_waiting_requests_and_walks_at_every_32nd() -> None:
    """``_waiting_prefix_refresh_calls``: a call with an empty queue neither counts nor walks; the
    walk (a split of the node the waiting key ends in) comes at count 0, the next at 32."""
    run = Run(SMALL_V2, V23)
    outs = [run.apply(a) for a in (Arrive(9, 1), Step(), Step(), Step())]
    s0 = outs[-1].state
    assert [len(n[2]) for n in s0.tree.nodes[1:]] == [8] and not s0.waiting  # r0 finished, its 8 bigrams one leaf
    s1 = s0.with_new_req(Req(rid=1, prompt_len=4, max_new_tokens=1, segments=((4, 0),))).evolve(waiting=(1,))
    nodes = len(s0.tree.nodes)
    counted = admission_v23.touch_waiting_prefixes(s1.evolve(v2=overlap(s1).evolve(waiting_refresh_calls=31)))
    assert (overlap(counted).waiting_refresh_calls, len(counted.tree.nodes)) == (0, nodes)  # counted, no walk
    walked = admission_v23.touch_waiting_prefixes(counted)
    assert (overlap(walked).waiting_refresh_calls, len(walked.tree.nodes)) == (1, nodes + 1)  # r0's leaf split at 3 bigrams
    assert admission_v23.touch_waiting_prefixes(s0.evolve(waiting=())) == s0.evolve(waiting=())
