"""The vLLM 0.34.0 family's model: the DSD lookup as upstream expands it, the engine start (DSD off
under data parallelism), the variants' verdicts and their minimal traces (docs/vllm.md)."""

from __future__ import annotations

import pytest

from specstate.errors import InvalidConfig, UsageError
from specstate.integration.vllm_0_34_0.check import check_vllm, k_trajectory, run_actions
from specstate.model.vllm_0_34_0.config import VllmEngineConfig, build_dynamic_sd_schedule_lookup
from specstate.model.vllm_0_34_0.engine import UPSTREAM_OPS, start
from specstate.model.vllm_0_34_0.flags import parse_vllm_serve
from specstate.model.vllm_0_34_0.state import VAction
from specstate.model.vllm_0_34_0.variants import VARIANTS, load_variant

ISSUE_LINE = ("vllm serve M --speculative-config '{\"method\": \"eagle3\", \"num_speculative_tokens\": 3, "
              "\"num_speculative_tokens_per_batch_size\": [[1, 4, 3], [5, 4096, 0]]}'")


def test_lookup_carries_the_previous_k_over_a_gap_and_caps_at_k() -> None:
    # upstream's own docstring example: [(1, 16, 3), (32, 128, 2)] maps 17-31 to 3
    dense = build_dynamic_sd_schedule_lookup([[1, 16, 3], [32, 128, 2]], 200, 3)
    assert dense[0] == 0 and dense[1] == dense[16] == 3 and dense[17] == dense[31] == 3
    assert dense[32] == dense[128] == dense[200] == 2
    assert build_dynamic_sd_schedule_lookup([[1, 4, 9]], 4, 3) == (0, 3, 3, 3, 3)


@pytest.mark.parametrize("bad", [[], [[2, 4, 3]], [[1, 4, 3], [3, 8, 1]], [[1, 4, -1]], [[1, 4]]])
def test_an_invalid_schedule_is_refused_as_vllm_refuses_it(bad: list) -> None:
    with pytest.raises(InvalidConfig):
        build_dynamic_sd_schedule_lookup(bad, 8, 3)


def test_the_launch_line_sets_the_config_and_says_what_it_assumed() -> None:
    launch = parse_vllm_serve(ISSUE_LINE + " --max-num-seqs 16 --async-scheduling --port 8000 --foo 1")
    c = launch.config
    assert (c.num_speculative_tokens, c.schedule, c.max_num_seqs, c.async_scheduling) == \
        (3, ((1, 4, 3), (5, 4096, 0)), 16, True)
    assert "--port" in launch.unaffected and "--foo" in launch.not_examined
    assert {a["setting"] for a in launch.assumed} >= {"max_num_batched_tokens", "num_gpu_blocks"}
    assert "max_num_seqs" not in {a["setting"] for a in launch.assumed}


def test_a_bad_schedule_on_the_line_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="must start at 1"):
        parse_vllm_serve("vllm serve M --speculative-config '{\"num_speculative_tokens\": 3, "
                         "\"num_speculative_tokens_per_batch_size\": [[2, 4, 3]]}'")


def test_data_parallelism_turns_dsd_off_at_start() -> None:
    launch = parse_vllm_serve(ISSUE_LINE + " --data-parallel-size 2")
    started = start(launch.config)
    assert started.state.lookup is None and started.config.schedule is None
    assert "_maybe_disable_dynamic_sd_for_data_parallel" in started.notes[0]
    assert start(parse_vllm_serve(ISSUE_LINE).config).state.lookup is not None


def test_as_shipped_fails_with_a_minimal_trace_and_the_correction_passes() -> None:
    launch = parse_vllm_serve(ISSUE_LINE)
    shipped = check_vllm(launch, "dsd-as-shipped", max_examples=20, failures=False)
    assert shipped.verdict == "fail" and shipped.exit_code == 1
    f = shipped.finding
    assert f is not None and f.violation is not None and f.violation.invariant == "vllm_dsd_k_keyed_on_decode_rows"
    assert (f.violation.expected, f.violation.actual) == (3, 0)
    assert len(f.actions) == 2 and sum(len(a.arrive) for a in f.actions) == 5  # 4 decodes + 1 chunked prompt
    corrected = check_vllm(launch, "dsd-corrected", max_examples=20, failures=False)
    assert corrected.verdict == "pass" and corrected.coverage["assumed"]


def test_the_chunk_moves_k_as_shipped_and_not_when_corrected() -> None:
    config = VllmEngineConfig(max_num_batched_tokens=32, schedule=((1, 1, 3), (2, 4096, 0)))
    acts = (VAction(((4, 20),), (3,)), VAction((), (3,)), VAction(((100, 2),), (3,))) + (VAction((), (3,)),) * 3
    shipped = k_trajectory(start(config), UPSTREAM_OPS, acts)
    corrected = k_trajectory(start(config), VARIANTS["dsd-corrected"].ops, acts)
    assert shipped[:2] == [3, 3] and 0 in shipped[2:5]
    assert corrected[:5] == [3, 3, 3, 3, 3]


def test_stale_columns_raise_torchs_own_error() -> None:
    launch = parse_vllm_serve("vllm serve M --speculative-config '{\"method\": \"eagle3\", \"num_speculative_tokens\": "
                              "6, \"num_speculative_tokens_per_batch_size\": [[1, 2, 6], [3, 4096, 4]]}'")
    r = check_vllm(launch, "stale-columns-47014", max_examples=5, failures=False)
    assert r.finding is not None and r.finding.error is not None
    assert "The size of tensor a (5) must match the size of tensor b (7)" in r.finding.error


def test_prompt_rows_on_the_verify_graph_and_the_unguarded_capture_fail() -> None:
    launch = parse_vllm_serve(ISSUE_LINE)
    r = check_vllm(launch, "prompt-rows-verify-graph-49918", max_examples=20, failures=False)
    assert r.finding is not None and r.finding.key == "vllm_decode_graph_rows"
    r = check_vllm(launch, "capture-width-48494", max_examples=5, failures=False)
    assert r.finding_part == "start" and "make_dummy" in (r.finding.error or "")
    assert [p["status"] for p in r.parts] == ["failed", "not run"]


def test_a_users_policy_loads_by_module_and_object(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    (tmp_path / "mypolicy.py").write_text(
        "class Always3:\n    name = 'always-3'\n    overrides = {'choose_k': lambda state, config, sched, samples: 3}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    v = load_variant("mypolicy:Always3")
    assert v.name == "always-3"
    r = check_vllm(parse_vllm_serve(ISSUE_LINE), v, max_examples=5, failures=False)
    assert r.finding is not None and r.finding.key == "vllm_dsd_k_keyed_on_decode_rows"


def test_a_run_is_deterministic_per_seed() -> None:
    launch = parse_vllm_serve(ISSUE_LINE)
    a = check_vllm(launch, "dsd-corrected", seed=5, max_examples=10, failures=False)
    b = check_vllm(launch, "dsd-corrected", seed=5, max_examples=10, failures=False)
    assert a.coverage["reached"] == b.coverage["reached"] and a.coverage["reached"]
    assert run_actions(start(launch.config), UPSTREAM_OPS, ())[1] is None


def test_decode_graph_shapes_capture_the_first_size_above_the_limit_at_the_limit() -> None:
    from specstate.model.vllm_0_34_0.graphs import decode_capture_shapes

    shapes = decode_capture_shapes((1, 2, 4, 8, 16), {4: 5, 1: 16}, 512)
    assert [s for s in shapes if s[1] == 4] == [(1, 4), (2, 4), (4, 4), (5, 4)]
    assert [s for s in shapes if s[1] == 1] == [(1, 1), (2, 1), (4, 1), (8, 1), (16, 1)]
    assert decode_capture_shapes((1, 2, 4), {4: 8}, 8) == [(1, 4), (2, 4)]  # 8 tokens hold 2 rows of 4
