"""Paged KV (``--page-size`` P > 1, issue 39) in the shared core: the allocator's page arithmetic
(``alloc_extend`` / ``alloc_decode``, the last partial page), the paged verify's free of whole empty
pages only, the page-aligned radix tree, the launch flag, the KV page invariants, and page size 1
left exactly as it was. The CPU oracle at page sizes 16 and 64 is the ``fuzz``-marked test at the end."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from specstate.check import run_actions
from specstate.errors import InvalidConfig, UsageError
from specstate.fuzz.generate import generate_case
from specstate.model import Arrive, SpecConfig, Step
from specstate.model.kv import OutOfSlots, alloc_decode_slots, alloc_extend_slots, alloc_slots, held_slots, new_pages
from specstate.model.ops_table import default_ops
from specstate.model.radix import empty_tree, evict, insert, match_prefix
from specstate.model.state import initial_state
from specstate.scenarios import play_scenario
from specstate.server_args import launch_tokens, parse_launch

SEED = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 --max-running-requests 48 "
        "--speculative-disable-batch-threshold 5")


def _state(page: int, pool: int = 256) -> Any:
    import specstate.model.ops  # noqa: F401  (the operations' catalog: default_ops)

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
    with pytest.raises(InvalidConfig, match="overlap scheduler"):
        SpecConfig(page_size=16, disable_overlap_schedule=False)
    assert SpecConfig(page_size=16).decode_reserve_per_req == 128  # topk 4: ceil_align(3 + 16, 16) * 4
    assert SpecConfig(page_size=16, speculative_eagle_topk=1, speculative_num_draft_tokens=4).decode_reserve_per_req == 16

    def launch(text: str, variant: str = "fixed-threshold") -> Any:
        return parse_launch(launch_tokens(server_args=text, variant=variant), variant)

    got = launch(f"{SEED} --page-size 64 --max-total-tokens 1000")
    assert (got.config.page_size, got.config.target_kv_pool_size) == (64, 960)
    assert any("whole pages of 64" in n for n in got.notes)
    with pytest.raises(UsageError, match="--page-size 16: not modelled by the sglang-0.5.17 family"):
        launch("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
               "--speculative-adaptive --page-size 16", "upstream-adaptive")


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
    ("fixed-threshold", None),
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


def test_the_oracle_fuzzes_page_sizes_on_0_5_12_only() -> None:
    from specstate.cli.oracle import _page_sizes_arg
    from specstate.oracle.strategies import configs_for

    assert _page_sizes_arg("64,16") == (16, 64)
    with pytest.raises(Exception, match="powers of two"):
        _page_sizes_arg("3")
    with pytest.raises(UsageError, match="--page-size 1 for sglang 0.5.17"):
        configs_for("0.5.17", (16,))
    from hypothesis import given, settings

    @settings(max_examples=20, derandomize=True, database=None)
    @given(configs_for("0.5.12", (64,)))
    def whole_pages(config: SpecConfig) -> None:
        assert config.page_size == 64 and config.target_kv_pool_size % 64 == 0 and config.chunked_prefill_size % 64 == 0

    whole_pages()


@pytest.mark.fuzz
@pytest.mark.parametrize("release,variant", [("0.5.12", "fixed-threshold"), ("0.5.9", "fixed-threshold@sglang-0.5.9")])
def test_the_cpu_oracle_agrees_at_page_sizes_16_and_64_and_catches_page_mutations(release: str, variant: str) -> None:
    """Each release's oracle against its family; the page mutations over that family's variant."""
    from dataclasses import replace

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from specstate.fuzz.stream import import_independent_draws
    from specstate.oracle.differential import OracleProcess, judge
    from specstate.oracle.strategies import oracle_configs_paged, oracle_workloads
    from specstate.oracle.wheels import OracleOffline, unpacked
    from tests.mutations import PAGED_MUTATIONS, REGISTRY_MUTATIONS, _configured

    try:
        unpacked(release)
    except OracleOffline:
        pytest.skip(f"sglang {release}: no wheel in the cache")
    cases: list[tuple[Any, list[Any]]] = []

    @settings(max_examples=40, derandomize=True, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data: Any) -> None:
        cfg = data.draw(oracle_configs_paged((16, 64)))
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
    caught = {m.name: any(judge(run, cfg, acts, _configured(replace(m, base=variant), cfg))[0]
                          for cfg, acts, run in judged)
              for m in (*PAGED_MUTATIONS, *REGISTRY_MUTATIONS) if m.name.startswith("mutant-paged-")}
    # the decode-in-last-page mutation changes the fallback decode, which upstream (no threshold) never runs
    assert caught == {"mutant-paged-admission-token-overhead": True, "mutant-paged-free-rejected-slots": True,
                      "mutant-paged-unaligned-insert": True, "mutant-paged-decode-in-last-page": False}
