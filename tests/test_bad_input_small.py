"""The smaller refusals of issue 37, each on the command line: a trace replayed on another
family's oracle, options that do nothing in a combination, ``--cuda-graph-bs`` errors naming the
flag as given, a long ``--cuda-graph-bs`` list parsed in linear time, and refused calls that
leave no empty failures folder behind."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from specstate.cli import main

V1 = ["--model-path", "m", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
      "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (code, err)
    assert all(n in err for n in needles), err
    return err


def _trace(folder: Path, variant: str) -> Path:
    from specstate.fuzz.trace import Trace, save_trace
    from specstate.model import Arrive, Step, as_variant

    cfg = as_variant(variant).configure(__import__("specstate.model", fromlist=["SpecConfig"]).SpecConfig(
        speculative_eagle_topk=1, speculative_num_draft_tokens=4, disable_overlap_schedule=variant == "fixed-threshold"))
    return save_trace(Trace(config=cfg, variant=variant, actions=[Arrive(4, 2), Step()]), folder, "t")


@pytest.mark.parametrize("engine,variant,family", [("0.5.12", "upstream-adaptive", "sglang-0.5.17"),
                                                   ("0.5.17", "fixed-threshold", "sglang-0.5.12"),
                                                   ("0.5.23", "upstream-adaptive", "sglang-0.5.17")])
def test_oracle_trace_of_another_family_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str], engine: str, variant: str,
                                                   family: str) -> None:
    monkeypatch.chdir(tmp_path)
    path = _trace(tmp_path, variant)
    _refused(capsys, ["oracle", "--engine", engine, "--trace", str(path)], f"a trace of {family}",
             f"--engine {engine}")


@pytest.mark.parametrize("extra", [["--examples", "5"], ["--random"], ["--examples", "5", "--random"]])
def test_oracle_options_that_do_nothing_with_a_trace_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 extra: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    path = _trace(tmp_path, "fixed-threshold")
    _refused(capsys, ["oracle", "--engine", "0.5.12", "--trace", str(path), *extra], "not with --trace", extra[0])


@pytest.mark.parametrize("engine,flag,extra", [("sglang-0.5.12", "--cuda-graph-bs", ["--disable-overlap-schedule"]),
                                               ("sglang-0.5.17", "--cuda-graph-bs", ["--speculative-adaptive"]),
                                               ("sglang-0.5.17", "--cuda-graph-bs-decode", ["--speculative-adaptive"]),
                                               ("sglang-0.5.23", "--cuda-graph-bs-decode", ["--speculative-adaptive"])])
@pytest.mark.parametrize("sizes", [["0"], ["-1"], ["1", "100000"]])
def test_cuda_graph_bs_errors_name_the_flag_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str], engine: str, flag: str,
                                                  extra: list[str], sizes: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    err = _refused(capsys, ["check", "--engine", engine, "--parts", "start", "--", *V1, *extra, flag, *sizes],
                   f"{flag} {' '.join(sizes)}: expected batch sizes in [1, 1024]")
    assert "--cuda-graph-max-bs" not in err


def test_a_long_cuda_graph_bs_list_is_parsed_in_linear_time() -> None:
    from specstate.server_args._parse import parse_tokens

    tokens = ["--cuda-graph-bs"] + [str(i % 1000 + 1) for i in range(300_000)]
    t0 = time.perf_counter()
    assert len(parse_tokens(tokens, "0.5.12").values["cuda_graph_bs"]) == 300_000
    assert time.perf_counter() - t0 < 5.0  # quadratic: minutes


@pytest.mark.parametrize("argv", [["check", "--", "--bogus"], ["fuzz", "--variant", "nope"],
                                  ["run", "--variant", "nope"], ["prove", "--variant", "nope"],
                                  ["check", "--parts", "start", "--", "--model-path", "m"], ["minimize", "nope.json"],
                                  ["fuzz", "--", "--bogus"], ["explore", "--", "--bogus"],
                                  ["fuzz", "--failures", "a/b/c", "--variant", "nope"]])
def test_a_refused_call_leaves_no_failures_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPECSTATE_FAILURE_DIR", raising=False)
    assert main(argv) == 2
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_a_failures_folder_that_existed_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    assert main(["fuzz", "--failures", "mine", "--variant", "nope"]) == 2
    assert (tmp_path / "mine").is_dir()


BIG = "9" * 4400


@pytest.mark.parametrize("argv", [["run", "--engine", f"0.5.{BIG}"], ["engines", "--release", f"0.5.{BIG}"],
                                  ["engines", "--release", BIG], ["oracle", "--engine", f"0.5.{BIG}"],
                                  ["check", "--engine", f"0.{BIG}.1", "--", "--model-path", "m"],
                                  ["fuzz", "--engine", "0.5." + "1." * 3000 + "1"]])
def test_a_release_of_4400_digits_is_one_short_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and len(err) < 400 and "internal error" not in err, err


@pytest.mark.parametrize("extra,named", [(["--parts", "start", "--seed", "3"], "--seed"),
                                         (["--parts", "start,sweep", "--budget", "5"], "--budget"),
                                         (["--parts", "prove", "--max-examples", "3"], "--max-examples"),
                                         (["--parts", "sweep", "--seed", "0", "--budget", "2"], "--budget, --seed")])
def test_check_fuzz_options_without_the_fuzz_part_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str], extra: list[str],
                                                              named: str) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(capsys, ["check", *extra, "--", *V1, "--disable-overlap-schedule"], f"{named}: the fuzz part's options",
             "runs no fuzz")
    assert list(tmp_path.iterdir()) == []
