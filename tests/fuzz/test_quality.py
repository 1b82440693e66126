"""Quality tests: the fuzzer itself (the state machine, not a scripted scenario) finds a
violation of each planted bug's ``expected_invariant``, minimises it and writes its trace."""

from __future__ import annotations

import pytest
from hypothesis import settings

from specstate.check import run_actions
from specstate.fuzz.runner import fuzz_variant, record_failure
from specstate.fuzz.trace import load_trace, replay_trace
from specstate.model import get_variant

pytestmark = pytest.mark.fuzz

BUGS = (
    "naive-threshold",  # the seed: stale spec_info through the TARGET_VERIFY graph -> worker-crash
    "naive-threshold-eager",  # the seed's literal patch: eager attention reads kv_indptr -> worker-crash
    "finish-before-filter",  # abort outside verify truncates topk_p -> spec-info-rows
    "mixed-reuses-spec-loc",  # mixed chunk reuses the verify out_cache_loc -> token-counts
    "kv-leak-spec-tail",  # rejected slots of requests finishing in verify leak -> kv-accounting
    "draft-kv-stale-on-resume",  # no draft-extend while off -> draft-kv-in-step
    "switch-thrash",  # decision counts prefill rows -> stable-switch-decision
    "stale-graph-padding",  # no padding-row reset: a shrinking batch reads stale rows -> graph-padding
    "unfiltered-accept-length",  # patch-added per-row field not filtered -> spec-info-rows
    # the v2 family (sglang 0.5.17), on adaptive configs (``strategies.adaptive_configs``)
    "v2-alloc-follows-active-steps",  # reservation of the active state: a write past the allocation
    "v2-downswitch-unclamped",  # no max(cur, ...): kv_allocated_len shrinks, slots leak
    "v2-single-reserve",  # no double buffer for the overlap lag: a write past the allocation
    "v2-skip-zero-step-draft-extend",  # no draft extend at steps 0 -> draft-kv-in-step
    "v2-commit-after-finish",  # a finished request commits its in-flight result -> kv-accounting
    "v2-chain-buffers-not-rebuilt",  # chain buffers of the startup step count -> worker-crash
    # a user's switch on the v2 worker, static launches (``strategies.static_configs``)
    "v2-static-switch-naive",  # steps 0 at the launch's draft width: the draft-extend graph -> worker-crash
)


@pytest.mark.parametrize("variant", BUGS)
def test_fuzzer_finds_planted_bug(variant: str, specstate_settings: settings, tmp_path) -> None:  # noqa: ANN001
    expected = get_variant(variant).expected_invariant
    assert expected is not None
    report = fuzz_variant(variant, specstate_settings, prefer=expected, only=expected)
    assert report.result is not None, f"the fuzzer found no violation of {variant} (expected {expected})"
    assert expected in report.found, f"{variant}: expected a {expected} violation, the fuzzer found {sorted(report.found)}"
    path = record_failure(report)
    assert path is not None and path.exists()
    trace = load_trace(path)
    replayed = replay_trace(trace)
    assert replayed.first is not None and replayed.first.to_json() == trace.violation
    assert expected in {v.invariant for v in run_actions(trace.config, variant, trace.actions).violations}
    assert len(trace.actions) <= len(report.result.actions)
