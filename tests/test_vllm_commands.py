"""``run``, ``fuzz`` and ``reproduce`` on the vLLM family, and the one-line refusal of the commands
that model SGLang only (``specstate/cli/vllm.py``, ``_engine_option.refuse_vllm``): as a user runs
them (the CLI in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specstate.cli import main

SPEC = ('{"method": "eagle3", "num_speculative_tokens": 3, '
        '"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 4096, 0]]}')
LINE = ["--", "vllm", "serve", "M", "--speculative-config", SPEC]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code, out, _ = _run(capsys, "run", "--engine", "vllm-0.34.0", "--failures", str(tmp_path))
    assert code == 1
    return next(tmp_path.glob("*.json"))


def test_run_is_the_sweep_with_coverage_and_a_reproduction(capsys, tmp_path) -> None:  # noqa: ANN001
    code, out, _ = _run(capsys, "run", "--engine", "vllm-0.34.0", "--failures", str(tmp_path), *LINE)
    assert code == 1
    assert "scenario sweep" in out and "sweep  FAILED [vllm_dsd_k_keyed_on_decode_rows]" in out
    assert "coverage: judged: vllm-0.34.0 dsd-as-shipped: start, sweep" in out and "fuzz" not in out.split("coverage")[0]
    path = next(tmp_path.glob("*.json"))
    assert f"reproduce with: specstate reproduce {path}" in out
    code, out, _ = _run(capsys, "run", "--variant", "dsd-corrected", *LINE)  # the variant's name selects vLLM
    assert code == 0 and "verdict: PASS" in out


def test_run_without_a_line_judges_the_default_launch_and_says_so(capsys) -> None:  # noqa: ANN001
    code, out, _ = _run(capsys, "run", "--engine", "vllm-0.34.0", "--variant", "dsd-corrected", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["verdict"] == "pass" and payload["engine"] == "vllm-0.34.0"
    assert payload["coverage"]["assumed"][0]["setting"] == "launch"


def test_run_not_judged_and_usage(capsys) -> None:  # noqa: ANN001
    code, out, _ = _run(capsys, "run", "--variant", "dsd-corrected", "--", "vllm", "serve", "M",
                        "--speculative-config", SPEC, "--pipeline-parallel-size", "2")
    assert code == 4 and "NOT JUDGED" in out
    for argv, says in ((["--seed", "3"], "--seed"), (["--scenario", "seed-sweep"], "--scenario seed-sweep"),
                       (["--server-args", "--x 1"], "--server-args")):
        code, _, err = _run(capsys, "run", "--engine", "vllm-0.34.0", *argv)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_fuzz_finds_a_known_bug_and_passes_the_corrected_policy(capsys, tmp_path) -> None:  # noqa: ANN001
    code, out, _ = _run(capsys, "fuzz", "--engine", "vllm-0.34.0", "--variant", "prompt-rows-verify-graph-49918",
                        "--max-examples", "20", "--failures", str(tmp_path), *LINE)
    assert code == 1 and "fuzz   FAILED [vllm_decode_graph_rows]" in out and "coverage: judged" in out
    code, out, _ = _run(capsys, "fuzz", "--variant", "dsd-corrected", "--max-examples", "15", "--seed", "4")
    assert code == 0 and "15 workloads (seed 4)" in out and "paths reached:" in out


def test_reproduce_takes_a_vllm_trace(capsys, tmp_path) -> None:  # noqa: ANN001
    path = _trace(tmp_path, capsys)
    code, out, _ = _run(capsys, "reproduce", str(path))
    assert code == 1 and "the recorded finding again: vllm_dsd_k_keyed_on_decode_rows at step 2" in out
    assert "coverage: judged: vllm-0.34.0 dsd-as-shipped: trace" in out
    code, out, _ = _run(capsys, "reproduce", str(path), "--variant", "dsd-corrected")
    assert code == 0 and "does not reproduce" in out
    data = json.loads(path.read_text())
    data["finding"]["step"] = 1  # recorded elsewhere: the replay's finding differs
    path.write_text(json.dumps(data))
    code, out, _ = _run(capsys, "reproduce", str(path))
    assert code == 3 and "DIFFERENT from the recorded" in out
    code, _, err = _run(capsys, "reproduce", str(path), "--seed", "1")
    assert code == 2 and "--seed" in err


def test_the_old_module_entry_still_replays(capsys, tmp_path) -> None:  # noqa: ANN001
    from specstate.integration.vllm_0_34_0.check import main as module_main

    path = _trace(tmp_path, capsys)
    assert module_main([str(path)]) == 1
    assert "reproduced: [vllm_dsd_k_keyed_on_decode_rows]" in capsys.readouterr().out


@pytest.mark.parametrize("argv, what", [
    (["explore", "--engine", "vllm-0.34.0"], "explore: not modelled for vLLM"),
    (["explore", *LINE], "explore: not modelled for vLLM"),
    (["explore", "--variant", "dsd-corrected"], "explore: not modelled for vLLM"),
    (["prove", "--engine", "vllm-0.34.0"], "prove: not modelled for vLLM"),
    (["prove", *LINE], "prove: not modelled for vLLM"),
    (["graph", "--engine", "vllm-0.34.0", "--out", "g.dot"], "graph: not modelled for vLLM"),
    (["graph", "--out", "g.dot", *LINE], "graph: not modelled for vLLM"),
])
def test_explore_prove_graph_refuse_in_one_line(capsys, argv, what) -> None:  # noqa: ANN001
    code, _, err = _run(capsys, *argv)
    assert code == 2 and what in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_graph_and_minimize_refuse_a_vllm_trace(capsys, tmp_path) -> None:  # noqa: ANN001
    path = _trace(tmp_path, capsys)
    for argv, what in ((["graph", "--trace", str(path), "--out", str(tmp_path / "g.dot")], "graph:"),
                       (["minimize", str(path)], "minimize:")):
        code, _, err = _run(capsys, *argv)
        assert code == 2 and f"{what} not modelled for vLLM" in err and len(err.strip().splitlines()) == 1
