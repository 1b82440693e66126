"""The CPU oracles run upstream's scheduler with upstream's own invariant checks on, strict, as far
as each release declares them (``specstate/oracle/_core.py::STRICT_CHECKS``, docs/oracle.md "Upstream's
own invariant checks"): 0.5.17 and 0.5.23 with ``SGLANG_INVARIANT_CHECK=2`` (STRICT) and the
page-level checks of sglang PR #27731 (``SGLANG_CHECK_KV_PAGE_INVARIANTS``), every release with the
busy-iteration leak check. A failure of one of those checks is reported as upstream's own finding
(``OracleRun.upstream_check``), never swallowed and never read as a harness error: a page planted in
the free pool while a running request's ``req_to_token`` row still points at it (the accounting
stays balanced, so only the page check can see it) trips ``_check_kv_page_invariants``, and the
same workload without the plant runs clean (the positive control)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specstate.model import Arrive, SpecConfig, Step

ROOT = Path(__file__).resolve().parents[1]
PAGE_CHECKS = {"SGLANG_INVARIANT_CHECK", "SGLANG_CHECK_KV_PAGE_INVARIANTS"}
ALWAYS = {"SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY", "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE"}


def _need(release: str) -> None:
    from specstate.oracle.wheels import OracleOffline, cache_dir, unpacked

    try:
        unpacked(release)
    except OracleOffline:
        pytest.skip(f"sglang {release}: no wheel in {cache_dir() / 'wheels'} and no package registry to fetch it")


def _config(release: str) -> SpecConfig:
    if release in ("0.5.9", "0.5.12"):
        return SpecConfig(speculative_num_steps=2, speculative_eagle_topk=1, speculative_num_draft_tokens=3,
                          disable_batch_threshold=None, max_running_requests=4, target_kv_pool_size=4096,
                          draft_kv_pool_size=4096, chunked_prefill_size=64)
    return SpecConfig(speculative_num_steps=2, speculative_eagle_topk=1, speculative_num_draft_tokens=3,
                      disable_batch_threshold=None, max_running_requests=4, target_kv_pool_size=4096,
                      draft_kv_pool_size=4096, chunked_prefill_size=64, cuda_graph_max_bs=8,
                      disable_overlap_schedule=False, speculative_adaptive_config='{"1": {"candidate_steps": [2]}}')


ACTIONS = [Arrive(10, 30), Arrive(6, 30)] + [Step()] * 6


def test_the_declared_checks_name_their_upstream_switches() -> None:
    """Every entry of ``STRICT_CHECKS`` is a switch some release's ``environ.py`` declares, and the
    STRICT value is ``InvariantCheckLevel.STRICT`` (2) as 0.5.17's ``environ.py`` defines it."""
    from specstate.oracle._core import STRICT_CHECKS
    from specstate.upstream import tree

    _need("0.5.17")
    text17 = (tree("0.5.17") / "sglang/srt/environ.py").read_text()
    for name in STRICT_CHECKS:
        assert f"    {name} = Env" in text17, name
    assert "    STRICT = 2\n" in text17 and STRICT_CHECKS["SGLANG_INVARIANT_CHECK"][0] == "2"


@pytest.mark.parametrize("release", ["0.5.9", "0.5.12", "0.5.17", "0.5.23"])
def test_each_oracle_runs_with_the_checks_its_release_has(release: str, oracle_of) -> None:  # noqa: ANN001
    from specstate.integration.oracle_differential import differential

    _need(release)
    d = differential(release, _config(release), ACTIONS, oracle=oracle_of(release))
    assert d.ok, d.describe()
    on = set(d.oracle.strict_checks)
    assert ALWAYS <= on, on
    if release in ("0.5.9", "0.5.12"):  # no SchedulerInvariantChecker, no page checks, no SGLANG_INVARIANT_CHECK
        assert not on & PAGE_CHECKS, on
    else:
        assert PAGE_CHECKS <= on, on


_PLANT = r'''
import json, sys
from specstate.oracle import child
from specstate.integration.oracle_differential import oracle_config
from specstate.model import SpecConfig, action_to_json
from specstate.schema import action_from_data

release, out_path, request = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
plant = False  # the first workload clean (the control), the second planted: each on a fresh Scheduler
child._private_files()
adapter = child._load(release)
adapter._once()  # the release's per-process steps (0.5.23's hub logger) before upstream's scheduler imports
from sglang.srt.managers.scheduler import Scheduler

original = Scheduler.process_batch_result
planted = []


def process_batch_result(self, batch, result, *args, **kwargs):
    out = original(self, batch, result, *args, **kwargs)
    if plant and not planted and batch.forward_mode.is_decode():
        # a page the allocator holds as free, written into a running request's row: a use after
        # free; the counts (available, evictable, protected, uncached) are unchanged
        req = batch.reqs[0]
        page = int(self.token_to_kv_pool_allocator.free_pages[0])
        row = req.kv.req_pool_idx if hasattr(req.kv, "req_pool_idx") else req.req_pool_idx  # 0.5.23: on req.kv
        self.req_to_token_pool.req_to_token[row, 0] = page
        planted.append(page)
    return out


Scheduler.process_batch_result = process_batch_result
from specstate.oracle._core import enabled_strict_checks
from sglang.srt.utils.invariants import resolve_level
answers = []
for plant in (False, True):
    answer = child._run(adapter, release, request)
    answer["planted"] = list(planted)
    answer["level"] = int(resolve_level())
    answer.pop("observations", None)
    answers.append(answer)
open(out_path, "w").write(json.dumps(answers))
'''


def _planted_runs(release: str, tmp_path: Path) -> list[dict[str, object]]:
    """The workload clean, then with the use after free planted, in one oracle process (its
    imports, about 7 CPU s, paid once; each workload on a fresh upstream ``Scheduler``)."""
    from specstate.model import action_to_json
    from specstate.integration.oracle_differential import oracle_config

    request = {"config": oracle_config(_config(release)), "actions": [action_to_json(a) for a in ACTIONS]}
    out = tmp_path / "answers.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    proc = subprocess.run([sys.executable, "-c", _PLANT, release, str(out), json.dumps(request)],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and out.is_file(), proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("release", [pytest.param("0.5.17", marks=pytest.mark.slow), "0.5.23"])  # one process each
def test_a_planted_use_after_free_trips_upstreams_page_check(release: str, tmp_path: Path) -> None:
    from specstate.integration.oracle_differential import Differential, OracleRun

    _need(release)
    clean, hit = _planted_runs(release, tmp_path)  # clean: the positive control, the checks ran and held
    assert clean.get("error") is None and clean["planted"] == [], clean
    assert clean["level"] == 2 and PAGE_CHECKS <= set(clean["strict_checks"]), clean  # type: ignore[call-overload]
    assert hit["planted"], "the workload reached no decode to plant in"
    assert hit.get("upstream_check") == \
        "managers/scheduler_components/invariant_checker.py::SchedulerInvariantChecker._check_kv_page_invariants", hit
    assert "use-after-free" in str(hit["error"]) and str(hit["planted"][0]) in str(hit["error"]), hit  # type: ignore[index]
    run = OracleRun([], str(hit["error"]), upstream_check=str(hit["upstream_check"]))
    text = Differential(release, run, [], []).describe()
    assert f"sglang {release}'s own invariant check failed" in text and "_check_kv_page_invariants" in text, text
    assert not Differential(release, run, [], []).ok


# -- the req_to_token row at the context length (found by the page-level check) ----------------------------

def _row_config(steps: int) -> SpecConfig:
    """EAGLE topk 1, ``steps`` steps, context length 64: one request runs to its output cap
    (``max_req_len - prompt - 1`` = 52 tokens after a 10-token prompt)."""
    return SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
                      disable_batch_threshold=None, max_running_requests=2, target_kv_pool_size=4096,
                      draft_kv_pool_size=4096, chunked_prefill_size=8192, cuda_graph_max_bs=8,
                      disable_overlap_schedule=False, context_len=64,
                      speculative_adaptive_config='{"1": {"candidate_steps": [%d]}}' % steps)


ROW_ACTIONS = [Arrive(10, 200)] + [Step()] * 70


def _model_violations(variant: str, steps: int) -> list:  # type: ignore[type-arg]
    from specstate.integration.catalog import adapter_modelling

    return list(adapter_modelling(variant).observe(_row_config(steps), ROW_ACTIONS, variant)[1])


@pytest.mark.parametrize("variant,steps,step,width,allocated", [("upstream-adaptive", 9, 53, 78, 79),
                                                              ("upstream-v23", 12, 50, 81, 82)])
def test_the_model_sees_the_over_allocation_outgrow_the_row(variant: str, steps: int, step: int, width: int,
                                                            allocated: int) -> None:
    """The v2 over-allocation (``committed + 2 * (steps + 1)``) near the context length against a row
    of ``64 + 4 + (steps + 1)``: the model's kv-accounting flags the step upstream's own page check
    fails at (``test_upstreams_page_check_fails_where_the_model_flags_the_row``)."""
    first = _model_violations(variant, steps)[0]
    assert (first.invariant, first.field, first.step, first.rid) == \
        ("kv-accounting", "req_to_token_pool.req_to_token[row]", step, 0), first.describe()
    assert (first.expected, first.actual) == (f"<= {width} (row width: context_len + headroom)", allocated)


@pytest.mark.parametrize("variant", ["upstream-adaptive", "upstream-v23"])
def test_seven_steps_fit_the_row(variant: str) -> None:
    """The positive control: at 7 steps the over-allocation reaches at most the row's end."""
    assert _model_violations(variant, 7) == []


@pytest.mark.parametrize("release,steps", [("0.5.17", 9), ("0.5.23", 12)])
def test_upstreams_page_check_fails_where_the_model_flags_the_row(release: str, steps: int,
                                                                 oracle_of) -> None:  # noqa: ANN001
    """The same workload on upstream's scheduler with ``SGLANG_CHECK_KV_PAGE_INVARIANTS``: its
    ``committed <= allocated <= row_width`` assertion fails in the iteration the model flags (the
    model's step counts the arrival: iteration ``step - 1``), after the same observations."""
    from specstate.integration.oracle_differential import differential

    _need(release)
    d = differential(release, _row_config(steps), ROW_ACTIONS, oracle=oracle_of(release))
    assert d.oracle.upstream_check is not None and d.oracle.upstream_check.endswith(
        "SchedulerInvariantChecker._check_kv_page_invariants.<locals>._add_owner"), d.describe()
    first = d.violations[0]
    assert first.field == "req_to_token_pool.req_to_token[row]" and first.step - 1 == len(d.oracle.observations) + 1
    before = [m for m in d.mismatches if m.field != "iterations"]  # upstream stopped there; the model ran on
    assert not before, before[0].describe()  # every iteration before it agrees


def test_the_row_write_port_addresses_req_to_token_as_the_triton_kernel_does() -> None:
    """``_core.assign_req_to_token_pool``: within a row as before; past the row's width into the
    next row (the kernel's ``req_to_token + row * pool_len + pos``); past the whole tensor dropped
    (the kernel's out-of-bounds store)."""
    import torch

    from specstate.oracle._core import assign_req_to_token_pool

    t = torch.zeros(3, 5, dtype=torch.int64)
    assign_req_to_token_pool(torch.tensor([0, 2]), t, torch.tensor([3, 4]), torch.tensor([6, 6]),
                             torch.tensor([7, 8, 9, 10, 11]), 2)
    assert t.tolist() == [[0, 0, 0, 7, 8], [9, 0, 0, 0, 0], [0, 0, 0, 0, 10]]


@pytest.mark.parametrize("release", ["0.5.17", "0.5.23"])
def test_eight_steps_leak_one_slot_past_the_row_on_0_5_17_only(release: str, oracle_of) -> None:  # noqa: ANN001
    """docs/oracle.md, "Upstream's own invariant checks", finding 3: at 8 steps and context length
    64 the last decode of the request (its output capped by the context) allocates slot 78 of a
    77-wide row, and the request finishes in that iteration. ``mem_cache/common.py::
    _release_overallocated_kv_indices`` frees ``req_to_token[row][committed:allocated]``, a slice that
    stops at the row's end, so the slot the kernel wrote into the next row is never freed: upstream's
    busy leak check fails (one slot neither free nor in the tree), with the Triton-faithful port as
    with the old one. 0.5.22+ skips that decode (``enable_skip_finishing_decode``): 0.5.23 runs clean."""
    from specstate.integration.oracle_differential import differential

    _need(release)
    d = differential(release, _row_config(8), ROW_ACTIONS, oracle=oracle_of(release))
    if release == "0.5.23":
        assert d.oracle.error is None and d.ok, d.describe()
        return
    assert d.oracle.upstream_check is not None and d.oracle.upstream_check.endswith(
        "SchedulerInvariantChecker.self_check_during_busy"), d.describe()
    assert "total=4096, available=4035, evictable=60" in (d.oracle.error or ""), d.oracle.error
