"""The smaller refusals of issue 37, each on the command line: a trace replayed on another
family's oracle, options that do nothing in a combination, ``--cuda-graph-bs`` errors naming the
flag as given, a long ``--cuda-graph-bs`` list parsed in linear time, and refused calls that
leave no empty failures folder behind."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

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


# -- options that would do nothing in a combination, beyond oracle and check (docs/trust.md) ------

@pytest.mark.parametrize("argv,needles", [
    # graph: each source's options given with another source
    (["graph", "--out", "g.dot", "--max-bs", "2"], ["--max-bs", "--raw"]),
    (["graph", "--out", "g.dot", "--depth", "4", "--max-states", "9"], ["--depth, --max-states", "drop them"]),
    (["graph", "--out", "g.dot", "--max-arrivals", "3"], ["--max-arrivals"]),
    (["graph", "--out", "g.dot", "--no-reduce"], ["--reduce / --no-reduce"]),
    (["graph", "--out", "g.dot", "--reduce"], ["--reduce / --no-reduce"]),
    (["graph", "--out", "g.dot", "--raw", "--levels", "1,2"], ["--levels", "--raw explores"]),
    (["graph", "--out", "g.dot", "--runs", "20"], ["--runs", "no --from-fuzz"]),  # the default's value, given
    (["graph", "--out", "g.dot", "--threshold", "5"], ["--threshold", "no --from-recording"]),
    # --timings adds times to the JSON result only
    (["run", "--timings"], ["--timings", "no --json"]),
    (["fuzz", "--timings", "--max-examples", "1"], ["--timings", "no --json"]),
    (["explore", "--timings"], ["--timings", "no --json"]),
    (["prove", "--timings"], ["--timings", "no --json"]),
    (["reproduce", "--timings", "--seed", "0", "--variant", "fixed-threshold"], ["--timings", "no --json"]),
    (["check", "--timings", "--parts", "start", "--", *V1], ["--timings", "no --json"]),
    # fuzz on a launch: the profile only counts the cases
    (["fuzz", "--profile", "deep", "--max-examples", "3", "--", *V1, "--disable-overlap-schedule"],
     ["--profile", "--max-examples gives it"]),
    # prove: --jobs runs the capture lists one per process
    (["prove", "--jobs", "2", "--capture-lists", "config"], ["--jobs 2", "names one"]),
    (["prove", "--jobs", "2", "--capture-lists", "one,one"], ["--jobs 2", "names one"]),
    # engines: --fuzz's options without --fuzz
    (["engines", "--seed", "1"], ["--seed", "no --fuzz"]),
    (["engines", "--max-examples", "5", "--seed", "1"], ["--max-examples, --seed", "drop them"]),
    (["engines", "--release", "0.5.20", "--seed", "1"], ["--seed", "no --fuzz"]),
    # worker-oracle: the fuzzer's options with --trace; oracle --dp: no JSON result
    (["worker-oracle", "--engine", "0.5.12", "--trace", "t.json", "--examples", "500"], ["--examples", "not with --trace"]),
    (["worker-oracle", "--engine", "0.5.12", "--trace", "t.json", "--random"], ["--random", "not with --trace"]),
    (["oracle", "--engine", "0.5.12", "--dp", "2", "--json"], ["--json", "not with --dp"]),
    (["oracle", "--engine", "0.5.12", "--dp", "2", "--timings"], ["--timings", "not with --dp"]),
])
def test_options_that_do_nothing_in_a_combination_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str], argv: list[str],
                                                              needles: list[str]) -> None:
    """One usage line, exit 2, before any work (nothing written, no oracle started)."""
    import subprocess

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("started a process"))
    _refused(capsys, argv, *needles)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["graph", "--out", "g.json", "--levels", "1,2", "--jobs", "1"],
    ["graph", "--out", "g.json", "--raw", "--max-bs", "1", "--depth", "2", "--no-reduce", "--jobs", "1"],
    ["engines", "--release", "0.5.12"],
    ["run", "--json", "--timings", "--quiet"],
    ["fuzz", "--profile", "dev", "--quiet", "--", *V1, "--disable-overlap-schedule", "--max-running-requests", "2"],
    ["fuzz", "--max-examples", "3", "--quiet", "--", *V1, "--disable-overlap-schedule"],
])
def test_the_same_options_where_they_are_used_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    asked: list[int] = []
    if "--profile" in argv:  # the launch's fuzz is asked the profile's cases (dev: 120, 7.8 CPU s); it runs 3
        from specstate.launch_check import _parts

        real = _parts.fuzz_part

        def three_cases(*a: Any, max_examples: int, **k: Any) -> Any:
            asked.append(max_examples)
            return real(*a, max_examples=3, **k)

        monkeypatch.setattr(_parts, "fuzz_part", three_cases)
    assert main(argv) == 0, capsys.readouterr().err
    if "--profile" in argv:
        from specstate.fuzz.profiles import profile_settings

        assert asked == [profile_settings(argv[argv.index("--profile") + 1]).max_examples]


def test_given_tells_an_option_given_from_its_default() -> None:
    from specstate.cli import build_parser
    from specstate.cli._unused import given, remember_words

    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices["graph"]  # type: ignore[union-attr]
    for words, want in ((["--out", "g.dot"], {"out"}), (["--out=g.dot", "--runs", "20", "--no-reduce"],
                                                        {"out", "runs", "reduce"}),
                        (["--out", "g.dot", "--depth=8", "--debug"], {"out", "depth", "debug"})):
        args = parser.parse_args(["graph", *words])
        remember_words(args, sub, words)
        assert given(args) == want, words
        assert args.runs == 20 and args.reduce in (True, False)  # the defaults, untouched
    assert sub.get_default("runs") == 20


GPU = Path(__file__).resolve().parent / "data" / "gpu"


@pytest.mark.parametrize("threshold", ["5", "-1"])
def test_conform_threshold_on_a_recording_that_carries_its_own_config_is_refused(
        capsys: pytest.CaptureFixture[str], threshold: str) -> None:
    _refused(capsys, ["conform", str(GPU / "v17" / "g000.jsonl.gz"), "--threshold", threshold],
             "--threshold", "sglang-0.5.17", "its own adaptive config")


def test_conform_threshold_where_it_is_used_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conform", str(GPU / "v17" / "g000.jsonl.gz")]) == 0
    assert main(["conform", str(GPU / "deferred4" / "seed-sweep.jsonl.gz"), "--threshold", "5"]) == 0
    assert "--threshold" not in capsys.readouterr().err


def test_check_recordings_replay_command_is_one_conform_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    """The API prints ``--threshold`` only for a recording that takes one."""
    import shlex

    from specstate.testing import check_recording

    for path, has in ((GPU / "v17" / "g000.jsonl.gz", False), (GPU / "deferred4" / "seed-sweep.jsonl.gz", True)):
        r = check_recording(path)
        assert r.repro_command is not None and ("--threshold" in r.repro_command) == has, r.repro_command
        assert main(shlex.split(r.repro_command)[1:]) == (0 if r.ok else 1)
    assert "error" not in capsys.readouterr().err
