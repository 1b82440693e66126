"""The v2 family's engine start (``specstate/model/sglang_0_5_17/start.py``): what it builds, where it refuses
(each refusal names the runtime state, the buffer, the sizes asked and held and upstream's
``file::symbol``), that every command of the family runs it first, that its operations are
replaceable, and the user's entry point (``specstate.testing.check_engine_start``, a config file).
The H200's own verdicts on seven configs are in ``tests/test_v17_pressure.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specstate.model import Arrive, Step, get_variant
from specstate.model.sglang_0_5_17.start import EngineStartRefused
from specstate.model.sglang_0_5_17.variants import H200_CONFIG
from specstate.testing import check_engine_start
from specstate.testing._start import main

#: a candidate (3) above the startup step count (2): the target-verify capture of steps 3 asks
#: 16 x 4 = 64 rows of a logits buffer sized 16 x 3 = 48 at start
ABOVE = H200_CONFIG.with_(speculative_num_steps=2, speculative_num_draft_tokens=3,
                          speculative_adaptive_config='{"1": {"candidate_steps": [2, 3]}, "4": {"candidate_steps": [0]}}')
MISSING = H200_CONFIG.with_(speculative_adaptive_config='{"1": {"candidate_steps": [1, 2]}}')


def test_the_h200_config_starts_with_two_runtime_states() -> None:
    start = check_engine_start(H200_CONFIG)
    assert (start.startup_steps, start.candidates, start.logits_rows_held) == (3, (0, 3), 64)
    assert [(c.state, c.runner) for c in start.captures] == [
        (3, "draft_decode@3"), (3, "draft_extend@3"), (3, "target_verify@3"), (0, "draft_extend@0"), (0, "target_verify@0")]
    rows = {c.runner: c.logits_rows for c in start.captures}
    assert rows == {"draft_decode@3": 0, "draft_extend@3": 64, "target_verify@3": 64, "draft_extend@0": 64,
                    "target_verify@0": 16}  # draft extend keeps the startup width 4 at steps 0
    # 35 static input buffers over the five runners, 16 allocations: shared by name and size
    # (``share_input_buffer``): e.g. every runner's ``seq_lens`` (16 rows) is one buffer, while
    # ``out_cache_loc`` has three (draft decode 16 x 3, verify 16 x 4, verify at steps 0 16 x 1)
    assert len(start.pooled) == 16 and dict(start.pooled)["v2.seq_lens#16x()"] == 16
    assert [k for k, _ in start.pooled if k.startswith("v2.out_cache_loc")] == [
        "v2.out_cache_loc#16x()", "v2.out_cache_loc#48x()", "v2.out_cache_loc#64x()"]
    assert "shared logits buffer 64 rows" in start.describe()


def test_a_candidate_above_the_startup_steps_is_refused_at_its_capture() -> None:
    with pytest.raises(EngineStartRefused) as e:
        check_engine_start(ABOVE)
    r = e.value
    assert (r.upstream, r.state, r.asked, r.held) == ("AssertionError", 3, 64, 48)
    assert r.where == "graph_shared_output.py::GraphSharedOutput.get_logits_buffer" and "target_verify@3" in r.buffer
    assert "building the runtime state steps=3" in str(r) and "holds 48 rows but caller needs 64" in str(r)
    assert isinstance(r, ValueError)  # an InvalidConfig: one line and exit 2 on the CLI


@pytest.mark.parametrize("config,where", [
    (MISSING, "arg_groups/speculative_hook.py::_init_adaptive_speculative_params"),
    (H200_CONFIG.with_(speculative_adaptive_config='{"x": {"candidate_steps": [3]}}'),
     "adaptive_spec_params.py::_load_adaptive_config"),
])
def test_server_arguments_upstream_refuses(config, where: str) -> None:  # noqa: ANN001
    with pytest.raises(EngineStartRefused) as e:
        check_engine_start(config)
    assert e.value.upstream == "ValueError" and e.value.where == where and e.value.state is None


def test_every_command_of_the_family_starts_the_engine_first() -> None:
    from specstate.check import Run
    from specstate.fuzz.explore import explore
    from specstate.integration.sglang_0_5_17.conformance import ModelBackend, Recording17
    from specstate.prove._prove import _Executor, ListVerdict

    with pytest.raises(EngineStartRefused):
        Run(ABOVE, "upstream-adaptive")  # run, fuzz, reproduce (run_actions / replay_trace build a Run)
    with pytest.raises(EngineStartRefused):
        explore(ABOVE, "upstream-adaptive", max_depth=2)
    with pytest.raises(EngineStartRefused):
        _Executor(ABOVE, "upstream-adaptive", ListVerdict.__new__(ListVerdict))  # prove
    with pytest.raises(EngineStartRefused):
        ModelBackend(ABOVE).observe(Recording17({}, [Arrive(8, 4), Step()], {}, []))  # conform
    assert Run(H200_CONFIG, "upstream-adaptive").config.speculative_num_steps == 3


def test_the_start_operations_are_replaceable() -> None:
    """A variant that sizes the shared logits buffer for the largest candidate starts ABOVE
    (``v2-chain-buffers-not-rebuilt`` does: 0.5.17 refuses every config that could show it)."""
    v = get_variant("v2-chain-buffers-not-rebuilt")
    start = v.ops().engine_start(v.ops(), v.configure(ABOVE))
    assert start.logits_rows_held == 64 and {c.state for c in start.captures} == {0, 2, 3}
    assert v.configure(MISSING).speculative_num_steps == 3


def test_the_start_alone_from_a_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok, bad = tmp_path / "ok.json", tmp_path / "bad.json"
    ok.write_text(json.dumps(H200_CONFIG.to_json()))
    bad.write_text(json.dumps(ABOVE.to_json()))
    assert check_engine_start(ok).logits_rows_held == 64
    assert main([str(ok)]) == 0 and "engine start: steps 3, candidates [0, 3]" in capsys.readouterr().out
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "AssertionError at graph_shared_output.py::GraphSharedOutput.get_logits_buffer" in err


# -- the running-request cap a small KV pool leaves (issue 36 item 6) -------------------------

def test_a_small_pool_caps_the_running_requests_and_the_capture_lists() -> None:
    # KVCacheConfigurator.resolve_max_num_reqs: min(48, 20 // 2) = 10 requests; every capture list
    # is clamped to 10 (get_batch_sizes_to_capture adds the cap), the logits buffer 10 x 4 rows
    small = H200_CONFIG.with_(target_kv_pool_size=20, draft_kv_pool_size=20)
    start = check_engine_start(small)
    assert start.logits_rows_held == 40 and {max(c.capture_bs) for c in start.captures} == {10}
    assert check_engine_start(H200_CONFIG.with_(target_kv_pool_size=96, draft_kv_pool_size=96)).logits_rows_held == 64


def test_a_small_pool_refuses_with_the_sizes_sglang_reports() -> None:
    # the same refusal class as a large pool (ABOVE: 64 vs 48), with the capped sizes: 8 x 4 vs 8 x 3
    with pytest.raises(EngineStartRefused) as e:
        check_engine_start(ABOVE.with_(target_kv_pool_size=16, draft_kv_pool_size=16))
    assert (e.value.upstream, e.value.state, e.value.asked, e.value.held) == ("AssertionError", 3, 32, 24)


def test_a_pool_of_one_token_leaves_no_request() -> None:
    with pytest.raises(EngineStartRefused) as e:
        check_engine_start(H200_CONFIG.with_(target_kv_pool_size=1, draft_kv_pool_size=1))
    assert e.value.upstream == "AssertionError" and "max_num_reqs 0" in str(e.value)


def test_a_launch_with_a_small_pool_runs_the_whole_model_on_the_cap() -> None:
    from specstate.server_args import parse_launch

    launch = parse_launch(["--speculative-algorithm", "EAGLE3", "--speculative-adaptive", "--max-total-tokens", "40",
                           "--cuda-graph-max-bs", "16"], "upstream-adaptive")
    assert launch.config.max_running_requests == 20 and max(launch.config.cuda_graph_bs) == 16
    assert any("--max-running-requests 48 -> 20" in n for n in launch.notes)
    big = parse_launch(["--speculative-algorithm", "EAGLE3", "--speculative-adaptive"], "upstream-adaptive")
    assert big.config.max_running_requests == 48  # the model's 65536-slot pool caps nothing
