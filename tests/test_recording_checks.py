"""Recordings checked before they are judged (``specstate/schema/_recording_checks.py``): every
class of recording that ``conform`` once called "conforms" without being able to judge it is
refused in one line, and a gzip bomb of blank lines stops fast."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

from specstate.errors import RecordingFormatError
from specstate.integration.conform import load as load_recording
from tests.bad_inputs import INCONSISTENT, INCONSISTENT17, RECORDS, RECORDS17, Case, _lines, judge

ROWS = [(w, c, n, RECORDS) for w, c, n in INCONSISTENT] + [(w, c, n, RECORDS17) for w, c, n in INCONSISTENT17]


@pytest.mark.parametrize("change,needle,base", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
@pytest.mark.parametrize("command", [["conform", "r.jsonl"], ["graph", "--from-recording", "r.jsonl", "--out", "g.json"]],
                         ids=["conform", "graph"])
def test_a_recording_that_cannot_be_judged_is_refused(change, needle: str, base: list, command: list[str]) -> None:  # noqa: ANN001
    recs = json.loads(json.dumps(base))
    change(recs)
    v = judge(Case(command, {"r.jsonl": _lines(recs)}, needle))
    assert v.kind == "clean", v.stderr


@pytest.mark.parametrize("base", [RECORDS, RECORDS17], ids=["0.5.12", "0.5.17"])
def test_the_unchanged_records_load(tmp_path: Path, base: list) -> None:
    """The tables' base recordings are valid, so each refusal above is its row's change."""
    (tmp_path / "r.jsonl").write_bytes(_lines(base))
    rec = load_recording(tmp_path / "r.jsonl")
    assert rec.header["schema"] == base[0]["schema"] and len(rec) == len(base)
    assert rec.family == ("sglang-0.5.17" if base is RECORDS17 else "sglang-0.5.12")


def test_a_gzip_bomb_of_blank_lines_stops_fast(tmp_path: Path) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(_lines(RECORDS))
        for _ in range(120):
            f.write(b"\n" * (1 << 20))  # 120 MiB of blank lines
    t0 = time.perf_counter()
    rec = load_recording(path)
    assert time.perf_counter() - t0 < 10.0 and len(rec) == len(RECORDS)


def test_a_recording_past_the_record_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import specstate.schema._files as files

    monkeypatch.setattr(files, "MAX_RECORDS", 2)
    (tmp_path / "r.jsonl").write_bytes(_lines(RECORDS))
    with pytest.raises(RecordingFormatError, match="2 records"):
        load_recording(tmp_path / "r.jsonl")


def test_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    data = _lines(RECORDS[:1]) + b"\n" * 3 + b"{nope\n"
    (tmp_path / "r.jsonl").write_bytes(data)
    with pytest.raises(RecordingFormatError, match="line 5"):
        load_recording(tmp_path / "r.jsonl")


def test_file_text_in_a_refusal_is_escaped(tmp_path: Path) -> None:
    recs = json.loads(json.dumps(RECORDS))
    recs[0]["schema"] = "x\x1b]0;pwned\x07/2"
    (tmp_path / "r.jsonl").write_bytes(_lines(recs))
    with pytest.raises(RecordingFormatError) as e:
        load_recording(tmp_path / "r.jsonl")
    assert "\x1b" not in str(e.value) and "\x07" not in str(e.value) and "pwned" in str(e.value)


def test_a_v17_retract_line_carries_the_next_loop_and_nothing_else_may_run_ahead(tmp_path: Path) -> None:
    from specstate.errors import RecordingFormatError
    from specstate.integration.catalog import adapter_for
    from specstate.schema._recording_checks import RecordOrder

    def feed(records: list[dict]) -> None:
        order = RecordOrder(tmp_path / "r.jsonl", adapter_for("sglang-0.5.17"))
        for n, r in enumerate(records, 2):
            order.see(n, r)

    # the recorder's order: retract inside get_next_batch_to_run (next loop's number), then the
    # re-queue at the current loop, then that next loop's line
    feed([{"ev": "loop", "loop": 35}, {"ev": "retract", "loop": 36}, {"ev": "requeue", "loop": 35},
          {"ev": "loop", "loop": 36}])
    with pytest.raises(RecordingFormatError, match="a retract of loop 37 after loop 35"):
        feed([{"ev": "loop", "loop": 35}, {"ev": "retract", "loop": 37}])
    with pytest.raises(RecordingFormatError, match="loop 35 comes after loop 36"):
        feed([{"ev": "loop", "loop": 36}, {"ev": "requeue", "loop": 35}])


@pytest.mark.parametrize("depth", [65, 2000, 100_000])
def test_a_line_that_nests_too_deeply_is_refused_whatever_the_stack(tmp_path: Path, depth: int) -> None:
    """The full suite once saw ``conform`` on a 2,000-deep line print a ``RecursionError`` traceback
    before its clean error: in-process, under pytest and Hypothesis, the stack left ``json.loads``
    too little room. The line is now refused before it is parsed, so a tight recursion limit
    changes nothing."""
    import sys

    from specstate.errors import RecordingFormatError
    from specstate.schema._recording import MAX_NESTING, nesting_depth

    header = json.dumps({"ev": "header", "schema": "specstate-sglang-rec/2", "topk": 2, "speculative_num_steps": 2,
                         "speculative_num_draft_tokens": 4, "kv_size": 64, "server_args": {"cuda_graph_max_bs": 4}})
    path = tmp_path / "r.jsonl"
    path.write_text(header + "\n" + "[" * depth + "\n")
    assert nesting_depth("[" * depth) == depth > MAX_NESTING
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(120 + len(__import__("inspect").stack(0)))
    try:
        with pytest.raises(RecordingFormatError, match="line 2: expected a record but it nests too deeply"):
            load_recording(path)
    finally:
        sys.setrecursionlimit(limit)


def test_strings_and_shallow_lines_are_not_counted_as_nesting() -> None:
    from specstate.schema._recording import nesting_depth

    assert nesting_depth(json.dumps({"rid": "[[[[{{{{" * 20, "a": [[1], [2]]})) == 3
    assert nesting_depth(json.dumps({"ids": [[i] for i in range(500)]})) == 3
    assert nesting_depth(json.dumps({"q": 'say \\"[[["'})) == 1


# -- an adaptive config with keys sglang ignores (issue 36 item 6) ----------------------------

IGNORED = '{"comment": "tuned on H200", "ema_alpha": 0.3, "1": {"candidate_steps": [3], "owner": "x"}}'


def test_ignored_keys_are_the_ones_sglang_reads_past() -> None:
    from specstate.model.sglang_0_5_17.adaptive import config_from_json, ignored_keys

    assert ignored_keys(IGNORED) == ("comment", "1.owner")  # ema_alpha is read: every slot's default
    assert ignored_keys('{"candidate_steps": [9], "1": {"candidate_steps": [3]}}') == ("candidate_steps",)
    assert ignored_keys(None) == ()  # the release's default config
    assert dict(config_from_json(IGNORED))[1]["ema_alpha"] == 0.3


def test_conform_accepts_and_lists_an_ignored_key(tmp_path: Path) -> None:
    from specstate.integration.sglang_0_5_17.conformance import check_recording

    recs = json.loads(json.dumps(RECORDS17))
    recs[0]["adaptive_config_text"] = IGNORED
    (tmp_path / "r.jsonl").write_bytes(_lines(recs))
    assert load_recording(tmp_path / "r.jsonl").family == "sglang-0.5.17"  # was refused: "entry 'comment'"
    rep = check_recording(tmp_path / "r.jsonl")
    assert rep["adaptive_config_ignored"] == ["comment", "1.owner"]


def test_check_accepts_and_notes_an_ignored_key(tmp_path: Path) -> None:
    from specstate.server_args import parse_launch

    (tmp_path / "a.json").write_text(IGNORED)
    launch = parse_launch(["--speculative-algorithm", "EAGLE3", "--speculative-adaptive",
                           "--speculative-adaptive-config", str(tmp_path / "a.json")], "upstream-adaptive")
    assert any("ignores comment, 1.owner" in n for n in launch.notes)
