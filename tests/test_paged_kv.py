"""Paged KV (``--page-size`` P > 1, issue 39) in the shared core and the overlap families: the
allocator's page arithmetic (``alloc_extend`` / ``alloc_decode``, the last partial page), the paged
verify's free of whole empty pages only, the page-aligned radix tree, the v2 decode over-allocation
in whole pages and the row's paged headroom, the launch flag, the KV page invariants, and page size 1
left exactly as it was. The CPU oracles at page sizes 16 and 64 are the ``fuzz``-marked test at the end."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from specstate.check import run_actions
from specstate.errors import InvalidConfig, UsageError
from specstate.fuzz.generate import generate_case
from specstate.model import Arrive, SpecConfig, Step
from specstate.model.kv import OutOfSlots, alloc_decode_slots, alloc_extend_slots, alloc_slots, held_slots, new_pages
from specstate.model.ops import default_ops
from specstate.model.radix import empty_tree, evict, insert, match_prefix
from specstate.model.step import initial_state
from specstate.scenarios import play_scenario
from specstate.server_args import launch_tokens, parse_launch

SEED = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 --max-running-requests 48 "
        "--speculative-disable-batch-threshold 5")


def _state(page: int, pool: int = 256) -> Any:
    return initial_state(SpecConfig(page_size=page, target_kv_pool_size=pool, draft_kv_pool_size=pool))


def test_new_pages_is_get_num_new_pages() -> None:
    # ceil(seq / P) - ceil(prefix / P): the last partial page is filled before a new page is taken
    assert new_pages([(0, 1)], 16) == 1 and new_pages([(0, 16)], 16) == 1 and new_pages([(0, 17)], 16) == 2
    assert new_pages([(10, 16)], 16) == 0 and new_pages([(10, 20)], 16) == 1 and new_pages([(16, 17)], 16) == 1
    assert new_pages([(14, 18), (30, 31)], 16) == 1  # a verify crossing a page boundary; one that does not
    assert held_slots(17, 16, 16) == 16 and held_slots(0, 0, 16) == 0 and held_slots(5, 0, 1) == 5


def test_paged_allocation_takes_whole_pages_and_page_size_1_is_unpaged() -> None:
    ops = default_ops()
    s = alloc_extend_slots(_state(16), [(0, 5), (0, 33)], "test", ops)
    assert s.kv_available == 256 - (1 + 3) * 16
    s = alloc_decode_slots(s, [5, 16, 32], "test", ops)  # positions 5 (in its page), 16 and 32 (new pages)
    assert s.kv_available == 256 - 6 * 16
    with pytest.raises(OutOfSlots, match="pages"):
        alloc_extend_slots(_state(64, 128), [(0, 129)], "test", ops)
    one = _state(1)
    assert alloc_extend_slots(one, [(3, 8), (0, 4)], "t", ops) == alloc_slots(one, 9, "t", ops)
    assert alloc_decode_slots(one, [3, 9], "t", ops) == alloc_slots(one, 2, "t", ops)


def test_the_radix_tree_holds_whole_pages() -> None:
    t = empty_tree(4)
    a = tuple(("a", i) for i in range(11))
    t, present = insert(t, a)  # cut to 8: two pages
    assert present == 0 and t.total == 8
    b = a[:6] + tuple(("b", i) for i in range(6, 12))  # agrees on 6 elements: one whole page
    t, matched, node = match_prefix(t, b)
    assert matched == 4 and node != 0
    t, present = insert(t, b)  # the split falls on the page boundary
    assert present == 4 and t.total == 16 and all(len(n[2]) % 4 == 0 for n in t.nodes)
    c = (("a", 0), ("x", 1), ("x", 2), ("x", 3))  # the same first element, another first page: another child
    t, present = insert(t, c)
    assert present == 0 and t.total == 20
    t, freed = evict(t, 1)
    assert freed % 4 == 0 and freed > 0
    assert match_prefix(empty_tree(4), a[:3])[1] == 0  # shorter than a page: nothing to match


def test_the_config_and_the_launch_flag() -> None:
    with pytest.raises(InvalidConfig, match="multiple of page_size"):
        SpecConfig(page_size=16, target_kv_pool_size=1000, draft_kv_pool_size=1000)
    with pytest.raises(InvalidConfig, match="chunked_prefill_size"):
        SpecConfig(page_size=64, chunked_prefill_size=16)
    assert SpecConfig(page_size=16).decode_reserve_per_req == 128  # topk 4: ceil_align(3 + 16, 16) * 4
    assert SpecConfig(page_size=16, speculative_eagle_topk=1, speculative_num_draft_tokens=4).decode_reserve_per_req == 16

    def launch(text: str, variant: str = "fixed-threshold") -> Any:
        return parse_launch(launch_tokens(server_args=text, variant=variant), variant)

    got = launch(f"{SEED} --page-size 64 --max-total-tokens 1000")
    assert (got.config.page_size, got.config.target_kv_pool_size) == (64, 960)
    assert any("whole pages of 64" in n for n in got.notes)
    for variant in ("upstream-adaptive", "upstream-v23"):  # the overlap families page too
        got = launch("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
                     "--speculative-adaptive --page-size 16 --max-total-tokens 1000", variant)
        assert (got.config.page_size, got.config.target_kv_pool_size) == (16, 992)


@pytest.mark.parametrize("engine,page", [("sglang-0.5.12", 16), ("sglang-0.5.9", 16), ("sglang-0.5.9", 64)])
def test_check_judges_a_paged_launch(tmp_path: Any, capsys: Any, engine: str, page: int) -> None:
    import json

    from specstate.cli import main

    flags = shlex.split(SEED.replace("--speculative-eagle-topk 4", "--speculative-eagle-topk 1")
                        .replace("--speculative-num-draft-tokens 16", "--speculative-num-draft-tokens 4"))
    code = main(["check", "--engine", engine, "--variant", "fixed-threshold", "--parts", "sweep", "--json",
                 "--failures", str(tmp_path), "--", *flags, "--disable-overlap-schedule", "--page-size", str(page)])
    r = json.loads(capsys.readouterr().out)
    assert code == 0 and r["verdict"] == "pass", r["violation"]
    assert "--page-size" in r["coverage"]["modelled"]
    assert "page_size" not in {a["setting"] for a in r["coverage"]["assumed"]}


@pytest.mark.parametrize("variant,dies", [
    ("fixed-threshold", None), ("upstream-adaptive", None), ("upstream-v23", None),
    # sglang 0.5.9's scheduler raises where even the last request does not fit (0.5.12 aborts it):
    # the model predicts upstream's ValueError on the small pools drawn here (the 0.5.9 oracle agrees)
    ("fixed-threshold@sglang-0.5.9", "ValueError: Out of memory even after retracting all other requests"),
])
@pytest.mark.parametrize("page", [16, 64])
def test_correct_policies_hold_the_invariants_on_paged_workloads(page: int, variant: str, dies: str | None) -> None:
    decodes = 0
    for seed in range(8):
        config, actions = generate_case(seed)
        pool = max(config.target_kv_pool_size // page, 2) * page
        chunk = max(config.chunked_prefill_size // page, 1) * page
        config = config.with_(page_size=page, target_kv_pool_size=pool, draft_kv_pool_size=pool,
                              chunked_prefill_size=chunk)
        r = run_actions(config, variant, actions)
        assert r.ok or (dies is not None and r.first is not None and r.first.invariant == "worker-crash"
                        and r.first.actual.startswith(dies)), f"seed {seed}: {r.first.describe()}"  # type: ignore[union-attr]
        decodes += r.stats["decode"]
    assert decodes > 100


@pytest.mark.parametrize("page,variant,waiting,max_new", [
    # 0.5.12: a page of overhead per request (PrefillAdder): the second request no longer fits 240 slots;
    # its arrival clamp counts the pool too (240 - ceil_page(100) - 16 - 1 = 111)
    (16, "fixed-threshold", (1,), 111),
    # 0.5.9: no overhead, both admitted; max_new_tokens clamped to max_req_len only (239 - 100 - 1)
    (16, "fixed-threshold@sglang-0.5.9", (), 138),
    (1, "fixed-threshold", (), 138),  # the overhead is one token at page size 1: both fit either way
    (1, "fixed-threshold@sglang-0.5.9", (), 138),
])
def test_admission_counts_a_page_per_request_from_0_5_12_on(page: int, variant: str, waiting: tuple[int, ...],
                                                           max_new: int) -> None:
    from specstate.check import Run

    run = Run(SpecConfig(page_size=page, target_kv_pool_size=240, draft_kv_pool_size=240), variant)
    for a in (Arrive(64, 40), Arrive(64, 40), Step()):
        out = run.apply(a)
    assert out.state.waiting == waiting
    clamp = Run(SpecConfig(page_size=page, target_kv_pool_size=240, draft_kv_pool_size=240), variant)
    assert clamp.apply(Arrive(100, 300)).state.reqs[0].max_new_tokens == max_new


def test_the_0_5_9_paged_review_is_cited_and_closed() -> None:
    """Each paged citation read in the 0.5.12 -> 0.5.9 diff (``REVIEWED_PAGED``) and each 0.5.9
    symbol standing for a 0.5.12 one it lacks (``RENAMED_PAGED``) is cited by the 0.5.9 family
    (docs/model-0.5.9.md), so the release-range check counts it reviewed, and none is still open."""
    from pathlib import Path

    from specstate.citations import citations_of
    from specstate.model.sglang_0_5_9.ledger import GONE, RENAMED_PAGED, REVIEWED_PAGED, UNREVIEWED

    cited = {(Path(c.file).name, c.symbol) for c in citations_of("sglang-0.5.9")}
    reviewed = {(Path(f).name, s) for f, s, release, _ in REVIEWED_PAGED if release == "0.5.9"}
    assert len(reviewed) == len(REVIEWED_PAGED) == 19 and reviewed <= cited, sorted(reviewed - cited)
    renamed = {(Path(f).name, s) for f, s, _, _ in RENAMED_PAGED}
    assert {(Path(f).name, s9) for f, _, s9, _ in RENAMED_PAGED} <= cited and renamed <= set(GONE)
    assert not (reviewed | renamed) & {(Path(f).name, s) for f, s in UNREVIEWED}


def test_the_paged_story_and_its_mutations() -> None:
    from tests.mutations import REGISTRY_MUTATIONS

    assert play_scenario("paged-oscillate", "fixed-threshold", 0).ok
    fired = {m.name: {v.invariant for v in play_scenario("paged-oscillate", m, 0).violations}
             for m in REGISTRY_MUTATIONS if m.name.startswith("mutant-paged-")}
    assert "kv-pages-conserved" in fired["mutant-paged-free-rejected-slots"]
    assert "kv-pages-owned-once" in fired["mutant-paged-unaligned-insert"]
    assert "kv-pages-request-slots" in fired["mutant-paged-decode-in-last-page"]


def test_a_draft_past_the_req_to_token_row_at_page_size_16_topk_4() -> None:
    """sglang 0.5.12's ``_draft_preprocess_decode`` at page size > 1 and topk > 1 lays each branch
    out on its own pages from ``seq_len // P * P`` (``assign_draft_cache_locs``, unmasked), past a
    ``req_to_token`` row of ``context_len + 4 + num_draft_tokens`` near the context length (0.5.23's
    ``get_req_to_token_extra_context_len`` widens the row for it): the model says so."""
    cfg = SpecConfig(page_size=16, context_len=256, disable_batch_threshold=None, target_kv_pool_size=4096,
                     draft_kv_pool_size=4096)
    r = run_actions(cfg, "fixed-threshold", [Arrive(245, 8), Step(), Step(), Step()])
    assert r.first is not None and r.first.invariant == "kv-pages-request-slots"
    assert "writes past the row" in r.first.describe()
    ok = run_actions(cfg.with_(page_size=1, target_kv_pool_size=4096), "fixed-threshold", [Arrive(245, 8), Step(), Step()])
    assert ok.ok  # page size 1: the invariants stay quiet, as before


def _v2_state(page: int, committed: int, allocated: int, pool: int = 512) -> Any:
    """A v2 state (0.5.17, static 3 steps: reserve 8) with one running request."""
    from specstate.model.batch import ScheduleBatch
    from specstate.model.sglang_0_5_17.variants import prepare_v2

    cfg = prepare_v2(SpecConfig(page_size=page, target_kv_pool_size=pool, draft_kv_pool_size=pool,
                                speculative_adaptive=False, speculative_eagle_topk=1, speculative_num_draft_tokens=4))
    s = initial_state(cfg)
    from specstate.model.request import Req, ReqStatus

    r = Req(rid=0, prompt_len=committed, max_new_tokens=64, status=ReqStatus.RUNNING, kv_committed_len=committed,
            kv_allocated_len=allocated)
    held = held_slots(allocated, 0, page)
    return s.evolve(reqs=(r,), running=ScheduleBatch(rids=(0,)), kv_available=pool - held)


@pytest.mark.parametrize("page, committed, allocated, grown, taken", [
    (1, 20, 20, 28, 8),  # page size 1: committed + 2 * (steps + 1), token by token
    (16, 20, 20, 32, 0),  # 28 rounded up to 32: inside the page the prefill's tail already opened
    (16, 40, 48, 48, 0),  # 48 already covers committed + 8
    (16, 41, 48, 64, 16),  # 49 -> 64: one new page
    (64, 100, 100, 128, 0),  # ceil_align(108, 64) = 128: the second page is already held
    (64, 121, 128, 192, 64),
])
def test_the_v2_decode_over_allocation_is_whole_pages(page: int, committed: int, allocated: int, grown: int,
                                                       taken: int) -> None:
    """``eagle_prepare_for_decode``: ``nxt = max(cur, ceil_align(committed + reserve, P))`` through
    ``alloc_paged_token_slots_extend``; ``check_decode_mem`` asks for the same pages."""
    from specstate.model.sglang_0_5_17.scheduler import check_decode_mem_v2, eagle_prepare_for_decode
    from specstate.model.tx import Tx
    from specstate.model import as_variant

    ops = as_variant("upstream-adaptive").ops()
    s = _v2_state(page, committed, allocated)
    _, fits = check_decode_mem_v2(ops, s, (0,))
    assert fits
    after = eagle_prepare_for_decode(ops, Tx(s)).state
    assert after.req(0).kv_allocated_len == grown and s.kv_available - after.kv_available == taken


def test_the_v2_row_has_the_paged_headroom() -> None:
    """``get_req_to_token_extra_context_len``: ``4 + max draft tokens``, paged under the overlap worker at
    least ``get_alloc_reserve_per_decode() + page_size - 1`` (sglang PR #26972)."""
    v2 = SpecConfig(speculative_eagle_topk=1, speculative_num_draft_tokens=4, disable_overlap_schedule=False,
                    speculative_adaptive=False)
    assert v2.req_to_token_row_width == 4096 + 8
    assert v2.with_(page_size=16).req_to_token_row_width == 4096 + 8 + 15
    assert v2.with_(page_size=64).req_to_token_row_width == 4096 + 8 + 63
    v1 = v2.with_(disable_overlap_schedule=True, page_size=64)
    assert v1.req_to_token_row_width == v1.req_to_token_width == 4096 + 8  # the v1 worker's row


def test_the_v23_prompt_split_is_in_whole_pages() -> None:
    """``RadixCache._insert_cache(split_prompt=True)``: both keys ``page_aligned``; a prompt key of
    no whole page, or of the same pages as the whole key, splits nothing."""
    from specstate.scenarios import play_scenario

    for variant in ("upstream-adaptive", "upstream-v23"):
        trees: list[Any] = []
        r = play_scenario("paged-adaptive", variant, 0, on_step=lambda o: trees.append(o.state.tree))
        assert r.ok and trees[-1].total == 96 and all(len(n[2]) % 16 == 0 for t in trees for n in t.nodes), variant


@pytest.mark.parametrize("release", ["0.5.12", "0.5.17", "0.5.23"])
def test_the_oracle_fuzzes_page_sizes_of_every_release(release: str) -> None:
    from specstate.cli.oracle import _page_sizes_arg
    from specstate.oracle.strategies import configs_for

    assert _page_sizes_arg("64,16") == (16, 64)
    with pytest.raises(Exception, match="powers of two"):
        _page_sizes_arg("3")
    from hypothesis import given, settings

    @settings(max_examples=20, derandomize=True, database=None)
    @given(configs_for(release, (64,)))
    def whole_pages(config: SpecConfig) -> None:
        assert config.page_size == 64 and config.target_kv_pool_size % 64 == 0 and config.chunked_prefill_size % 64 == 0
        assert config.disable_overlap_schedule == (release == "0.5.12")

    whole_pages()


#: per release: its correct variant, and whether each page-level mutation it shares must be caught
#: by the oracle on the fuzzed workloads (the v1 fallback decode: upstream runs no fallback, no threshold)
_PAGED_ORACLE = {
    "0.5.9": ("fixed-threshold@sglang-0.5.9", {"mutant-paged-admission-token-overhead": True,
                                               "mutant-paged-free-rejected-slots": True,
                                               "mutant-paged-unaligned-insert": True,
                                               "mutant-paged-decode-in-last-page": False}),
    "0.5.12": ("fixed-threshold", {"mutant-paged-admission-token-overhead": True, "mutant-paged-free-rejected-slots": True,
                                   "mutant-paged-unaligned-insert": True, "mutant-paged-decode-in-last-page": False}),
    "0.5.17": ("upstream-adaptive", {"mutant-paged-admission-token-overhead": True,
                                     "mutant-paged-v2-alloc-rounded-down": True,
                                     "mutant-paged-v2-token-decode-alloc": True, "mutant-paged-v2-extra-page": True,
                                     "mutant-paged-v2-unaligned-insert": True}),
    "0.5.23": ("upstream-v23", {"mutant-paged-admission-token-overhead": True, "mutant-paged-v2-alloc-rounded-down": True,
                                "mutant-paged-v2-token-decode-alloc": True, "mutant-paged-v2-extra-page": True,
                                "mutant-paged-v2-unaligned-insert": True}),
}


def _on(m: Any, variant: str) -> Any:
    """Mutation ``m``'s overrides on ``variant`` (the release's own correct variant)."""
    from specstate.model import Variant

    return m if m.base == variant else Variant(f"{m.name}-on-{variant}", m.summary, overrides=dict(m.overrides),
                                               base=variant, config_changes=dict(m.config_changes))


def _v2_paged(pool: int, running: int, page: int = 16, steps: int = 1) -> SpecConfig:
    """A static v2 launch (topk 1) at ``page`` with a pool of ``pool`` slots."""
    return SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
                      disable_batch_threshold=None, max_running_requests=running, target_kv_pool_size=pool,
                      draft_kv_pool_size=pool, page_size=page, chunked_prefill_size=64 if page == 16 else 8192,
                      target_hidden_size=256, draft_hidden_size=256, cuda_graph_max_bs=8,
                      disable_overlap_schedule=False, speculative_adaptive=False)


def _hand_workloads(release: str) -> list[tuple[Any, list[Any]]]:
    """Hand workloads the fuzzed ones may miss (v2): three requests that outgrow a pool together (a
    paged retraction; the decode over-allocation in whole pages), in 8 pages of 16 and in 14 pages of
    64 (the fuzzed stream retracts at 16 only: at 64 a row outgrows its share only with a pool of 14
    pages or more), and a 32-token prompt that with its page of overhead does not fit a 48-token pool
    (``NO_TOKEN`` beside an empty running batch: 0.5.17 sets ``batch_is_full``, 0.5.23 does not)."""
    if release in ("0.5.12", "0.5.9"):
        return []
    two, four = Step(accept=(2, 2, 2)), Step(accept=(4, 4, 4))
    return [(_v2_paged(128, 3), [Arrive(4, 30), two, Arrive(4, 30), two, Arrive(4, 30), two] + [two] * 30),
            (_v2_paged(896, 3, 64, 3), [Arrive(4, 256), four, Arrive(4, 256), four, Arrive(4, 256), four] + [four] * 72),
            (_v2_paged(48, 2), [Arrive(32, 1), Step()])]


@pytest.mark.parametrize("variant, full", [("upstream-adaptive", True), ("upstream-v23", False)])
def test_a_request_that_fits_no_page_beside_an_empty_batch(variant: str, full: bool) -> None:
    """``NO_TOKEN`` with nothing to serve: 0.5.17 sets ``batch_is_full``; 0.5.22 on leave it clear
    (``len(adder.can_run_list) > 0 or not running_batch.is_empty()``). Found by the CPU oracle at
    page size 16 (``extend + max_new + page_size`` = 49 >= the 48-token pool)."""
    from specstate.check import Run

    run = Run(_v2_paged(48, 2), variant)
    run.apply(Arrive(32, 1))
    o = run.apply(Step())
    assert o.state.running.batch_is_full is full and o.state.waiting == (0,)


@pytest.mark.fuzz
@pytest.mark.parametrize("release", sorted(_PAGED_ORACLE))
def test_the_cpu_oracle_agrees_at_page_sizes_16_and_64_and_catches_page_mutations(release: str) -> None:
    """Each release's oracle against its family; the page mutations over that family's variant."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from specstate.fuzz.stream import import_independent_draws
    from specstate.integration.oracle_differential import OracleProcess, judge
    from specstate.oracle.strategies import configs_for, oracle_workloads
    from specstate.oracle.wheels import OracleOffline, unpacked
    from tests.mutations import PAGED_MUTATIONS, REGISTRY_MUTATIONS, _configured

    try:
        unpacked(release)
    except OracleOffline:
        pytest.skip(f"sglang {release}: no wheel in the cache")
    variant, expected = _PAGED_ORACLE[release]
    cases: list[tuple[Any, list[Any]]] = _hand_workloads(release)

    @settings(max_examples=40, derandomize=True, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data: Any) -> None:
        cfg = data.draw(configs_for(release, (16, 64)))
        cases.append((cfg, data.draw(oracle_workloads(cfg))))

    with import_independent_draws():
        draw()
    with OracleProcess(release) as oracle:
        judged = [(c, a, oracle.run(c, a)) for c, a in cases]
    for cfg, acts, run in judged:
        mismatches, violations = judge(run, cfg, acts, variant)
        assert mismatches == [], mismatches[0].describe()
        # the model's only violation: upstream's own exception, predicted (0.5.9's retract_decode ValueError)
        # (the crashed step is not taken, so each later step meets it again)
        assert {v.actual for v in violations} == ({run.error} if run.error else set()), (run.error, violations[:1])
    if release not in ("0.5.12", "0.5.9"):  # the hand workloads retract on upstream, at page sizes 16 and 64
        assert all("retraction" in run.reached for _, _, run in judged[:2])
    mutations = {m.name: m for m in (*PAGED_MUTATIONS, *REGISTRY_MUTATIONS) if m.name in expected}
    # caught: a mismatch with upstream (a model invariant violation other than upstream's own predicted error
    # counts too) on some workload
    def _caught(m: Any) -> bool:
        for cfg, acts, run in judged:
            mism, viol = judge(run, cfg, acts, _configured(_on(m, variant), cfg))
            if mism or {v.actual for v in viol} - ({run.error} if run.error else set()):
                return True
        return False
    caught = {name: _caught(m) for name, m in mutations.items()}
    assert caught == expected
