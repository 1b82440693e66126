"""Upstream's reverted fixes (``SGLANG_DEBUG_REVERT_PR``, ``debug_utils/pr_fix_toggle.py``) against the
table of ``specstate/integration/sglang_0_5_17/reverts17.py`` (docs/variants.md "Upstream's reverted
fixes"): which reverts apply to which wheel (upstream's own ``source_editor.apply_edits`` on the
wheel's source), that a revert which does not apply refuses the real ``Scheduler.__init__`` (the CPU
oracle), that one which applies but changes nothing at page size 1 leaves the oracle agreeing with
the model, and that the GPU plan runs every one of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specstate.integration.sglang_0_5_17.reverts17 import REVERTS, plan, write_all
from specstate.integration.workloads import load_workload
from specstate.model import Arrive, SpecConfig, Step

ROOT = Path(__file__).resolve().parents[1]


def _need(release: str) -> None:
    from specstate.oracle.wheels import OracleOffline, cache_dir, unpacked

    try:
        unpacked(release)
    except OracleOffline:
        pytest.skip(f"sglang {release}: no wheel in {cache_dir() / 'wheels'} and no package registry to fetch it")


def _check(release: str) -> dict[int, tuple[bool, str]]:
    """``reverts17 --check`` under Python's default bytecode handling; it leaves no ``__pycache__``
    in the checked tree (its file loader once did, and every later oracle start refused the tree)."""
    from specstate.oracle.wheels import unpacked

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, "-m", "specstate.integration.sglang_0_5_17.reverts17", "--check", release],
                         env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    assert not list((unpacked(release) / "sglang" / "srt" / "debug_utils").rglob("__pycache__"))
    return {int(k): (v[0], v[1]) for k, v in json.loads(out).items()}


@pytest.mark.parametrize("release", ["0.5.17", "0.5.23"])
def test_each_revert_applies_to_the_wheel_where_the_table_says(release: str) -> None:
    _need(release)
    measured = _check(release)
    assert set(measured) == {r.pr for r in REVERTS}, "the wheel registers other PRs than the table"
    for r in REVERTS:
        applies, why = measured[r.pr]
        assert applies == r.applies[release], (r.pr, release, why)
        if not applies:
            assert "match text not found in source" in why and r.target.split("::")[1].split(" ")[0] in why, why


def _config17() -> SpecConfig:
    return SpecConfig(speculative_num_steps=2, speculative_eagle_topk=1, speculative_num_draft_tokens=3,
                      disable_batch_threshold=None, max_running_requests=4, target_kv_pool_size=4096,
                      draft_kv_pool_size=4096, chunked_prefill_size=16, cuda_graph_max_bs=8, context_len=96,
                      disable_overlap_schedule=False, speculative_adaptive_config='{"1": {"candidate_steps": [2]}}')


ACTIONS = [Arrive(40, 80), Arrive(9, 12), Step(), Step(), Step(accept=(3, 2))] + [Step()] * 40


def test_a_revert_that_does_not_apply_refuses_the_scheduler_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.5.17 with ``SGLANG_DEBUG_REVERT_PR=27338``: upstream's ``Scheduler.__init__`` ->
    ``maybe_revert_pr_fix`` raises ``PatchApplicationError`` before the first iteration."""
    from specstate.integration.oracle_differential import run_oracle

    _need("0.5.17")
    monkeypatch.setenv("SGLANG_DEBUG_REVERT_PR", "27338")
    run = run_oracle("0.5.17", _config17(), ACTIONS)
    assert run.error is not None and run.error.startswith("PatchApplicationError: match text not found in source"), \
        run.error
    assert run.observations == [] and run.upstream_check is None


@pytest.mark.slow  # an oracle process per revert setting (18 s); the refusal test keeps one in the fast tier
def test_the_headroom_revert_changes_nothing_at_page_size_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.5.23 with ``SGLANG_DEBUG_REVERT_PR=26972`` (it applies): the oracle's rows are sized by
    upstream's reverted ``get_req_to_token_extra_context_len``, equal at page size 1 with EAGLE,
    and the scheduler agrees with the model on a workload that runs a request to its context cap."""
    from specstate.integration.oracle_differential import differential

    _need("0.5.23")
    monkeypatch.setenv("SGLANG_DEBUG_REVERT_PR", "26972")
    cfg = _config17()
    d = differential("0.5.23", cfg, ACTIONS)
    assert d.ok and not d.violations, d.describe()
    assert any(o.kind == "decode" for o in d.oracle.observations)


def test_the_gpu_plan_runs_every_revert(tmp_path: Path) -> None:
    written = write_all(str(tmp_path))
    assert all(Path(p).is_file() for p in written)
    lines = (tmp_path / "plan-reverts.txt").read_text().splitlines()
    assert lines == plan(str(tmp_path))
    envs = {}
    for line in lines:
        name, args, env = line.split("|")
        for word in args.split():
            if word.endswith(".json"):
                assert Path(word.split("=")[-1]).is_file(), (name, word)
        words = args.split()
        for scenario in (words[i + 1] for i, w in enumerate(words) if w == "--scenario"):
            load_workload(scenario)  # read as the driver reads it (the GPU run's row-overflow met a refusal here)
        envs[name] = env
    reverted = {int(w.split("=")[1]) for e in envs.values() for w in e.split() if w.startswith("SGLANG_DEBUG_REVERT_PR=")}
    assert reverted == {r.pr for r in REVERTS}
    for r in REVERTS:  # a revert that does not apply to 0.5.17 is a start probe (allowed to be refused)
        name = next(n for n, e in envs.items() if f"SGLANG_DEBUG_REVERT_PR={r.pr}" in e)
        assert name.startswith("start-") or r.applies["0.5.17"], name
    assert "SGLANG_CHECK_KV_PAGE_INVARIANTS=1" in envs["row-overflow"] and envs["row-overflow-unchecked"] == ""
