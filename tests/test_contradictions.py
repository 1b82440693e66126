"""Options that contradict each other or the file they name are one clear error (exit 2), and
the library keeps the command line's trust boundaries: permission before importing a trace's
variant module, a file read once, file text printed with control characters escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specstate.check import run_actions
from specstate.errors import UsageError
from specstate.fuzz.reproduce import EXIT_VIOLATION, reproduce_file
from specstate.fuzz.trace import Trace, load_trace, replay_trace, save_trace
from specstate.model import Arrive, Step
from tests.bad_inputs import Case, judge
from tests.test_fuzz_unit import CRASH, SMALL

USER = "tests.user_variants.mine:SmallThreshold"


@pytest.fixture
def v1_trace(tmp_path: Path) -> Path:
    result = run_actions(SMALL, "naive-threshold", CRASH)
    return save_trace(Trace(SMALL, "naive-threshold", result.actions, result.first.to_json()), tmp_path, name="t.json")


def _text(path: Path) -> bytes:
    return path.read_bytes()


@pytest.mark.parametrize("argv,needle", [
    (["reproduce", "t.json", "--engine", "sglang-0.5.17"], "Expected --engine sglang-0.5.12"),
    (["reproduce", "t.json", "--variant", "fixed-threshold"], "Expected --variant naive-threshold"),
    (["reproduce", "t.json", "--seed", "3"], "--seed 3 would be ignored"),
    (["reproduce", "t.json", "--scenario", "oscillate"], "--scenario oscillate would be ignored"),
    (["graph", "--trace", "t.json", "--variant", "upstream-adaptive", "--out", "g.json"], "Expected a --trace of the sglang-0.5.17"),
    (["graph", "--trace", "missing.json", "--raw", "--out", "g.json"], "Expected --trace without --raw"),
    (["graph", "--trace", "t.json", "--raw", "--out", "g.json"], "Expected --trace without --raw"),
    (["graph", "--from-recording", "../../tests/data/gpu/v17/g003.jsonl.gz", "--out", "g.json"], "Expected a variant of sglang-0.5.17"),
    (["conform", "../../tests/data/gpu/v17/g003.jsonl.gz", "--variant", "fixed-threshold"], "Expected a variant of sglang-0.5.17"),
    (["conform", "../../tests/data/gpu/deferred4/seed-sweep.jsonl.gz", "--variant", "upstream-adaptive"],
     "Expected a variant of sglang-0.5.12"),
    (["run", "--engine", "sglang-0.5.17", "--variant", "tests.user_variants.broken:V1BaseClaimsV2"],
     "to be its base's but got family='sglang-0.5.17'"),
    (["prove", "--failures", "", "--max-bs", "2"], "Expected --failures to be a folder but got ''"),
    (["graph", "--out", "/proc/nope/g.json", "--levels", "1,2"], "Expected --out in a writable folder"),
])
def test_contradictory_options_are_one_line(v1_trace: Path, argv: list[str], needle: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    root = Path(__file__).resolve().parents[1]
    argv = [a.replace("../../tests/", str(root / "tests") + "/") for a in argv]
    v = judge(Case(argv, {"t.json": _text(v1_trace)}, needle))
    assert v.kind == "clean", (v.code, v.stderr)
    assert os.getcwd()  # judge ran in its own folder and came back


def test_the_matching_options_still_reproduce(v1_trace: Path) -> None:
    for extra in ([], ["--variant", "naive-threshold"], ["--engine", "sglang-0.5.12"]):
        v = judge(Case(["reproduce", "t.json", *extra], {"t.json": _text(v1_trace)}))
        assert v.code == EXIT_VIOLATION, v.stderr


def _user_trace(tmp_path: Path) -> Path:
    result = run_actions(SMALL, USER, [Arrive(2, 2), Step()])
    return save_trace(Trace(SMALL, USER, result.actions, None), tmp_path, name="u.json")


def test_the_library_asks_before_importing_a_traces_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    path = _user_trace(tmp_path)
    monkeypatch.delenv("SPECSTATE_ALLOW_VARIANT_IMPORT", raising=False)
    monkeypatch.delitem(sys.modules, USER.partition(":")[0])  # as in a fresh process
    for call in (lambda: reproduce_file(path), lambda: replay_trace(load_trace(path))):
        with pytest.raises(UsageError, match="allow_variant_import=True"):
            call()
        assert USER.partition(":")[0] not in sys.modules  # nothing was imported
    assert reproduce_file(path, allow_variant_import=True).exit_code == 0
    assert replay_trace(load_trace(path), allow_variant_import=True).ok


def test_reproduce_reads_the_trace_once(v1_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes checked are the bytes replayed: a file swapped after the check is never read."""
    import specstate.schema as schema

    reads: list[str] = []
    real = schema.read_text

    def counting(path: object, **kw: object) -> str:
        reads.append(str(path))
        return real(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(schema, "read_text", counting)
    v = judge(Case(["reproduce", "t.json", "--allow-variant-import"], {"t.json": _text(v1_trace)}))
    assert v.code == EXIT_VIOLATION and reads == ["t.json"], (reads, v.stderr)


def test_file_text_is_printed_with_control_characters_escaped(v1_trace: Path) -> None:
    data = json.loads(v1_trace.read_text())
    data["violation"]["invariant"] = "worker-crash\x1b]0;pwned\x07\x1b[2J\x9b31m"
    v1_trace.write_text(json.dumps(data))
    rep = reproduce_file(v1_trace)
    assert "\x1b" not in rep.report and "\x07" not in rep.report and "\x9b" not in rep.report
    assert "worker-crash\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m" in rep.report
