"""The seed's own numbers (issue 35): ``seed-patch`` on the seed's benchmark predicts ``160 vs 2`` on
sglang 0.5.9 and 0.5.12's ``AttributeError``, names where the 2 rows came from, and the corrected
patch passes the same story on both releases.

The story (``seed-benchmark``): one 64-token prompt repeated by every request; at C=10 request 8
arrives alone and is prefilled (2 extend tokens: the cached prompt's bigram keys), becoming the
running batch; requests 9-17 are prefilled next and merged into it, so the decode batch of 10
carries ``input_ids`` of 2 and ``out_cache_loc = None``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from specstate.check import Run
from specstate.invariants._always import graph_input_rows
from specstate.model import get_variant, variant_names
from specstate.model.batch import Provenance, ScheduleBatch
from specstate.model.records import ForwardRecord
from specstate.scenarios import get_scenario

CRASH_STEP = 70  #: the C=10 decode (request 8 prefilled at step 59, requests 9-17 at step 69)
PREFILL_STEP = 59


def _play(variant: str, page: int = 1) -> Run:
    """The seed's benchmark under ``variant``; at ``page`` > 1 with paged KV (issue 39: the pools
    and the chunk are whole pages already)."""
    sc = get_scenario("seed-benchmark")
    run = Run(sc.config.with_(page_size=page), variant)
    try:
        sc.play(run, random.Random(0))
    except Exception:  # StopRun at the first violation
        pass
    return run


def _crash(variant: str, page: int = 1):  # noqa: ANN202
    r = _play(variant, page).result()
    assert not r.ok and r.first.invariant == "worker-crash", r.first and r.first.describe()
    assert r.first.step == CRASH_STEP
    return r


@pytest.mark.parametrize("variant,page,rows", [
    ("seed-patch@sglang-0.5.9", 1, 2), ("seed-patch-alloc@sglang-0.5.9", 1, 2), ("seed-patch-alloc", 1, 2),
    # paged KV (issue 39): the same crash at the same step; the cached prompt's prefill re-extends its
    # last partial page (the radix cache matches whole pages only), so the stale ids are a page
    ("seed-patch@sglang-0.5.9", 16, 16), ("seed-patch@sglang-0.5.9", 64, 64), ("seed-patch-alloc", 16, 16),
])
def test_the_seed_patch_raises_160_vs_2(variant: str, page: int, rows: int) -> None:
    r = _crash(variant, page)
    assert (f"The size of tensor a (160) must match the size of tensor b ({rows}) at non-singleton dimension 0"
            in r.first.actual)
    assert "(10)" not in r.first.actual  # not naive-threshold's 160 vs 10


def test_sglang_0_5_9_raises_in_its_sequential_copy() -> None:
    r = _crash("seed-patch@sglang-0.5.9")
    assert r.first.field == "model_executor/input_buffers.py::GraphInputBuffers.populate_from_forward_batch"
    assert r.first.shapes["field"] == "input_ids" and r.first.shapes["source"] == [2]
    assert r.first.shapes["buffer"] == [160]


def test_sglang_0_5_12_reads_the_none_out_cache_loc_first() -> None:
    r = _crash("seed-patch")
    assert r.first.actual == "AttributeError: 'NoneType' object has no attribute 'dtype'"
    assert r.first.shapes["none"] == ["out_cache_loc"] and r.first.shapes["input_ids"] == [2]


@pytest.mark.parametrize("variant", ["naive-threshold", "naive-threshold@sglang-0.5.9"])
def test_naive_threshold_still_gives_160_vs_10(variant: str) -> None:
    """The project's reconstruction rebuilds input_ids (the H200's 160 vs 10)."""
    assert "tensor a (160) must match the size of tensor b (10)" in _crash(variant).first.actual


@pytest.mark.parametrize("variant", ["seed-patch", "seed-patch@sglang-0.5.9"])
def test_the_report_names_where_the_2_rows_came_from(variant: str) -> None:
    r = _play(variant).result()
    rows = {v.field: v for v in r.violations if v.invariant == "graph-input-rows"}
    v = rows["seed_patch_decode.input_ids"]
    assert (v.step, v.rid, v.expected, v.actual) == (CRASH_STEP, 8, "(160,) (raw_bs 10)", (2,))
    assert ("set by ScheduleBatch.prepare_for_extend at step 59 (2 rows, request 8); kept by "
            "EagleDraftInput.prepare_for_extend at step 59, Scheduler.get_next_batch_to_run at step 69, "
            "ScheduleBatch.merge_batch at step 70, ScheduleBatch.prepare_for_decode at step 70") in v.detail
    loc = rows["seed_patch_decode.out_cache_loc"]
    assert loc.actual is None and "set by ScheduleBatch.merge_batch at step 70" in loc.detail


def test_the_crashed_forward_carries_the_batch_as_handed() -> None:
    """For the worker oracle: the forward record holds the shapes the real batch holds."""
    seen: list[ForwardRecord] = []
    sc = get_scenario("seed-benchmark")
    again = Run(sc.config, "seed-patch", on_step=lambda o: seen.extend(o.forwards))
    try:
        sc.play(again, random.Random(0))
    except Exception:
        pass
    f = seen[-1]
    assert (f.phase, f.batch_size, f.input_ids, f.out_cache_loc, f.positions) == ("seed_patch_decode", 10, (2,), None, (10,))
    assert f.rids == tuple(range(8, 18)) and f.spec_info == "EagleDraftInput"
    p = f.input_ids_from
    assert (p.op, p.step, p.rids, p.rows) == ("schedule_batch.py::ScheduleBatch.prepare_for_extend", PREFILL_STEP, (8,), 2)
    assert ("schedule_batch.py::ScheduleBatch.merge_batch", CRASH_STEP) in p.kept
    assert dict(f.graph_slices) == {"input_ids": 160, "out_cache_loc": 160, "positions": 160}


@pytest.mark.parametrize("variant", sorted(n for n in variant_names() if get_variant(n).correct
                                           and get_variant(n).family_name in ("sglang-0.5.12", "sglang-0.5.9")))
@pytest.mark.parametrize("page", [1, 16])
def test_correct_variants_pass_the_seed_benchmark(variant: str, page: int) -> None:
    r = _play(variant, page).result()
    assert r.ok, r.first.describe()  # type: ignore[union-attr]


def test_provenance_is_no_part_of_equality() -> None:
    a = ScheduleBatch(rids=(1,), input_ids=(2,))
    b = a.evolve(input_ids_from=Provenance("x.py::f", 3, (1,), 2))
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)


@dataclass
class _State:
    step_index: int


@dataclass
class _Outcome:
    forwards: tuple
    state: _State


def _forward(**kw: object) -> ForwardRecord:
    from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker

    base = dict(phase="p", worker=Worker.TARGET, forward_mode=ForwardMode.DECODE, rids=(0, 1), batch_size=2,
                input_ids=(32,), positions=(32,), out_cache_loc=(32,), extend_lens=None, spec_info=None,
                num_tokens_per_req=None, capture_hidden_mode=CaptureHiddenMode.FULL, graph=None,
                graph_slices=(("input_ids", 32), ("out_cache_loc", 32), ("positions", 32)))
    base.update(kw)
    return ForwardRecord(**base)  # type: ignore[arg-type]


def test_graph_input_rows_passes_exact_sources_and_catches_a_silent_broadcast() -> None:
    assert list(graph_input_rows(_Outcome((_forward(),), _State(4)))) == []  # type: ignore[arg-type]
    bad = list(graph_input_rows(_Outcome((_forward(input_ids=(1,)),), _State(4))))  # type: ignore[arg-type]
    assert [(v.field, v.actual, v.step) for v in bad] == [("p.input_ids", (1,), 4)]
    assert "broadcast from 1 row" in bad[0].detail


def test_the_engines_list_0_5_9_and_the_core_stays_0_5_12() -> None:
    from specstate._engine_option import engines
    from specstate.model.families import get_family

    assert "sglang-0.5.9" in engines()
    assert get_variant("fixed-threshold").family_name == "sglang-0.5.12"
    assert get_family("sglang-0.5.9").base == "sglang-0.5.12"
    assert get_variant("seed-patch@sglang-0.5.9").family_name == "sglang-0.5.9"


def test_engine_option_picks_the_releases_own_version() -> None:
    import argparse

    from specstate._engine_option import resolve_variant

    args = argparse.Namespace(engine="sglang-0.5.9", variant="seed-patch")
    assert resolve_variant(args, None) == "seed-patch@sglang-0.5.9"
    args = argparse.Namespace(engine="sglang-0.5.9", variant=None)
    assert resolve_variant(args, None) == "fixed-threshold@sglang-0.5.9"


@pytest.mark.parametrize("variant,message", [
    ("seed-patch-alloc", "The size of tensor a (160) must match the size of tensor b (4)"),
    ("seed-patch-alloc@sglang-0.5.9", "The size of tensor a (160) must match the size of tensor b (4)"),
    ("seed-patch", "AttributeError: 'NoneType' object has no attribute 'dtype'"),
])
def test_two_first_arrivals_carry_4_ids(variant: str, message: str) -> None:
    """The GPU workload's split (2 requests first): each cached request extends 2 tokens (upstream's
    ``RadixCache`` with ``is_eagle=True`` matches 62 of a 64-token prompt's 63 candidate tokens), so
    the running batch carries 4 ids: the model predicts ``160 vs 4`` there, not ``160 vs 2``."""
    sc = get_scenario("seed-benchmark-split2")
    run = Run(sc.config, variant)
    try:
        sc.play(run, random.Random(0))
    except Exception:
        pass
    r = run.result()
    assert r.first is not None and r.first.step == CRASH_STEP and message in r.first.actual


def test_the_failure_trace_of_a_release_variant_reproduces(tmp_path, capsys) -> None:  # noqa: ANN001
    from specstate.cli import main

    assert main(["run", "--variant", "seed-patch", "--engine", "sglang-0.5.9", "--failures", str(tmp_path),
                 "--quiet"]) == 1
    [trace] = tmp_path.glob("*.json")
    capsys.readouterr()
    assert main(["reproduce", str(trace)]) == 1
    out = capsys.readouterr().out
    assert "seed-patch@sglang-0.5.9" in out and "tensor b (2)" in out and "request 8" in out


def test_a_speculative_decode_leaves_the_draft_extends_ids_which_a_merge_keeps() -> None:
    """The second route to a 2-row ``input_ids`` (every-rank.md §1): a decode that accepted 2 tokens
    in all leaves ``batch.input_ids`` of 2 (``prepare_extend_after_decode``), and a prefill merged in
    keeps them."""
    from specstate.model import Arrive, Step
    from specstate.scenarios import SMALL

    run = Run(SMALL, "fixed-threshold")
    for a in (Arrive(8, 20), Step(), Step(accept=(2,))):
        run.apply(a)
    running = run.state.running
    p = running.input_ids_from
    assert running.input_ids == (2,) and (p.op, p.step, p.rids) == (
        "eagle_info.py::EagleDraftExtendInput.prepare_extend_after_decode", 3, (0,))
    for a in (Arrive(8, 20), Step(), Step(accept=(1, 1))):
        run.apply(a)
    assert run.result().ok
    f = run.state.running.input_ids_from  # after step 6's decode: its own draft extend again
    assert f.step == 6 and f.rids == (0, 1)

