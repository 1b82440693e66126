"""``specstate check -- vllm serve ...`` and ``specstate engines`` for the vLLM family, as a user
runs them (the CLI in-process), and the oracle's step comparison on hand-made observations."""

from __future__ import annotations

import json

import pytest

from specstate.cli import main
from specstate.integration.vllm_0_34_0 import oracle

SPEC = ('{"method": "eagle3", "num_speculative_tokens": 3, '
        '"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 4096, 0]]}')


def _check(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["check", "--max-examples", "10", *extra, "--", "vllm", "serve", "M", "--speculative-config", SPEC])
    return code, capsys.readouterr().out


def test_the_issue_launch_fails_as_shipped_with_coverage_and_a_trace(capsys, tmp_path) -> None:  # noqa: ANN001
    code, out = _check(capsys, "--failures", str(tmp_path))
    assert code == 1
    assert "specstate check: vllm-0.34.0 dsd-as-shipped" in out and "coverage: judged: vllm-0.34.0" in out
    assert "assumed max_num_batched_tokens = 8192" in out and "modelled flags: --speculative-config" in out
    assert "verdict: FAIL" in out and "vllm_dsd_k_keyed_on_decode_rows" in out and "minimal trace: 2 steps" in out
    path = next(tmp_path.glob("*.json"))
    trace = json.loads(path.read_text())
    assert trace["finding"]["violation"]["invariant"] == "vllm_dsd_k_keyed_on_decode_rows"
    assert f"reproduce with: specstate reproduce {path}" in out
    from specstate.integration.vllm_0_34_0.check import replay_trace

    again = replay_trace(path)
    assert again is not None and again.key == "vllm_dsd_k_keyed_on_decode_rows" and again.step == 2
    trace["variant"] = "dsd-corrected"
    path.write_text(json.dumps(trace))
    assert replay_trace(path) is None


def test_the_corrected_policy_passes_and_json_carries_the_verdict(capsys) -> None:  # noqa: ANN001
    code, out = _check(capsys, "--variant", "dsd-corrected", "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["verdict"] == "pass" and payload["coverage"]["assumed"] and payload["engine"] == "vllm-0.34.0"


def test_an_unjudged_flag_makes_the_verdict_not_judged(capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "dsd-corrected", "--max-examples", "3", "--", "vllm", "serve", "M",
                 "--speculative-config", SPEC, "--pipeline-parallel-size", "2"])
    out = capsys.readouterr().out
    assert code == 4 and "NOT JUDGED: --pipeline-parallel-size" in out


def test_engine_option_names_vllm_and_other_commands_say_where_it_runs(capsys) -> None:  # noqa: ANN001
    assert main(["check", "--engine", "vllm-0.34.0", "--max-examples", "3", "--variant", "dsd-corrected", "--",
                 "vllm", "serve", "M", "--speculative-config", SPEC]) == 0
    capsys.readouterr()
    assert main(["explore", "--engine", "vllm-0.34.0"]) == 2  # run, fuzz, reproduce: tests/test_vllm_commands.py
    assert "specstate check|run|fuzz -- vllm serve MODEL" in capsys.readouterr().err


def test_engines_lists_vllm(tmp_path) -> None:  # noqa: ANN001
    from specstate.cli.engines import vllm_rows

    (row,) = vllm_rows(tmp_path)  # no source in this cache: listed, its citations not checked
    assert row["family"] == "vllm-0.34.0" and row["default_variant"] == "dsd-as-shipped"
    assert row["releases"] == ["0.34.0"] and row["missing_sources"] == ["0.34.0"] and not row["ok"]


def test_a_difference_is_reported_at_its_step() -> None:
    model = [{"rec": {"scheduled": {"0": 4}}, "reqs": [[4, 0, 0, 0, 1, "R"]], "free": 9}]
    real = {"ok": True, "steps": [{"rec": {"scheduled": {"0": 4}}, "reqs": [[4, 0, 0, 0, 2, "R"]], "free": 8}]}
    m = oracle.compare(3, model, real)
    assert m is not None and (m.workload, m.step, m.model, m.vllm) == (3, 1, [4, 0, 0, 0, 1, "R"], [4, 0, 0, 0, 2, "R"])
    err = oracle.compare(0, model, {"ok": False, "error": "AssertionError: x"})
    assert err is not None and err.field == "error"
    assert oracle.compare(0, model, {"ok": True, "steps": [{**model[0]}]}) is None
