"""Malformed inputs for every subcommand, as Hypothesis strategies, and the runner that
judges specstate's answer to each.

A case is an argv, the files it needs (bytes, a directory or a FIFO) and the *needle*: the
text the error must contain (the JSON path, the option, the file). ``judge`` runs
``specstate.cli.main`` in-process in a fresh folder and sorts the answer:

- ``clean``: exit 2, one line on stderr, the needle in it, no traceback;
- ``unclear``: exit 2 and one line but the needle missing, or more than one line;
- ``traceback``: an exception escaped ``main``, or stderr holds a traceback;
- ``accepted``: exit 0 / 1 / 3: the bad input was taken as if it were good;
- ``hang``: no answer within ``limit_s``.

``tests/test_bad_input.py`` asserts every case is ``clean``. Run as a script, it counts the
kinds over N cases, for any specstate on ``sys.path``::

    python tests/bad_inputs.py 1000
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

CONFIG = {"speculative_num_steps": 2, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 4,
          "cuda_graph_max_bs": 4, "max_running_requests": 8, "target_kv_pool_size": 64, "draft_kv_pool_size": 64}
ACTIONS = [{"op": "arrive", "prompt_len": 3, "max_new_tokens": 2}, {"op": "step", "accept": [1], "eos": []},
           {"op": "arrive", "prompt_len": 2, "max_new_tokens": 2, "prefix_of": 0, "shared_len": 1},
           {"op": "abort", "rid": 0}, {"op": "step", "accept": [], "eos": [1]}]
TRACE = {"format": 1, "specstate_version": "0.1.0", "variant": "naive-threshold", "seed": 1, "scenario": None,
         "config": CONFIG, "violation": None, "notes": {}, "actions": ACTIONS}
BAD = "__BAD__"  # stands for a raw JSON text in the dumped file (so 1e400 and 10**30 stay literal)

INT_FIELDS = ["speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "cuda_graph_max_bs",
              "max_running_requests", "target_kv_pool_size", "chunked_prefill_size", "target_hidden_size",
              "draft_hidden_size", "num_aux_hidden_states", "context_len", "max_prefill_tokens", "page_size"]
BAD_INTS = ['"3"', "2.7", "true", "1e400", "[]", "{}", "-1", "1" + "0" * 30, '"7"', "false", "null", "1e9"]
BAD_FLOATS = ['"1"', "true", "1e400", "-1", "[]", "null"]
BAD_BOOLS = ["1", '"true"', "null", "0", "[]"]
ACTION_FIELDS = {0: ["prompt_len", "max_new_tokens"], 2: ["prefix_of", "shared_len"], 3: ["rid"], 1: ["accept", "eos"]}
BAD_LISTS = ['"1234"', "3", "{}", '["1"]', "[2.5]", "[true]", "[-1]", "[1e400]", "null"]
BAD_VARIANTS = [":", ".rel:Obj", "a/b:C", "x y", "", "pkg.:X", ":Obj", "mod:", "a..b:C", "tests.user_variants.broken"]
VARIANT_MODULES = ["tests.user_variants.raises_on_import:X", "tests.user_variants.exits_on_import:X",
                   "tests.user_variants.broken:WrongTypeConfig", "tests.user_variants.broken:UnknownConfig",
                   "tests.user_variants.broken:ConfigNotADict", "tests.user_variants.broken:OverridesNothing",
                   "tests.user_variants.broken:NotAClass", "tests.user_variants.broken:Missing",
                   "tests.user_variants.nosuchmodule:X", "nope-variant", ":", ".x:Y", "os:sep"]
TRACE_COMMANDS = [["reproduce", "{f}"], ["minimize", "{f}"], ["graph", "--trace", "{f}", "--out", "g.dot"],
                  ["replay", "--engine", "model", "{f}"], ["reproduce", "{f}", "--json"]]
REC_COMMANDS = [["conform", "{f}"], ["graph", "--from-recording", "{f}", "--out", "g.json"]]


@dataclass
class Case:
    argv: list[str]
    files: dict[str, Any] = field(default_factory=dict)  #: name -> bytes | "DIR" | "FIFO"
    needle: str = ""
    what: str = ""

    def __repr__(self) -> str:  # what Hypothesis prints for a falsifying example
        return f"Case({self.what}: specstate {' '.join(self.argv)}; needle {self.needle!r})"


def _dump(trace: dict[str, Any], raw: str | None = None) -> bytes:
    text = json.dumps(trace, indent=1)
    if raw is not None:
        text = text.replace(json.dumps(BAD), raw)
    return text.encode()


def _deep(n: int) -> dict[str, Any]:
    return {**TRACE, "notes": {"x": BAD}}


@st.composite
def trace_files(draw: st.DrawFn) -> tuple[bytes | str, str, str]:
    """(file content, needle, what) of one malformed trace."""
    kind = draw(st.sampled_from(["config-int", "config-float", "config-bool", "config-unknown", "action-field",
                                 "action-list", "action-not-object", "action-op", "missing-key", "missing-action-key",
                                 "violation", "variant", "seed", "eos-ahead", "abort-ahead", "prefix-ahead", "format",
                                 "truncated", "not-utf8", "empty", "deep", "top-list", "unknown-key", "too-many",
                                 "cross-field"]))
    t = json.loads(json.dumps(TRACE))
    if kind == "config-int":
        f, v = draw(st.sampled_from(INT_FIELDS)), draw(st.sampled_from(BAD_INTS))
        if f == "page_size" and v in ("1e9",):
            v = "2000"  # past the bound (1e9 is read as a float; 2 is a page size now)
        t["config"][f] = BAD
        if f == "target_kv_pool_size":
            t["config"]["draft_kv_pool_size"] = BAD
        return _dump(t, v), f"config.{f}", kind
    if kind == "config-float":
        t["config"]["schedule_conservativeness"] = BAD
        return _dump(t, draw(st.sampled_from(BAD_FLOATS))), "config.schedule_conservativeness", kind
    if kind == "config-bool":
        f = draw(st.sampled_from(["enable_mixed_chunk", "disable_radix_cache", "strict_filter_check"]))
        t["config"][f] = BAD
        return _dump(t, draw(st.sampled_from(BAD_BOOLS))), f"config.{f}", kind
    if kind == "config-unknown":
        t["config"]["hidden"] = 4
        return _dump(t), "config.hidden", kind
    if kind == "action-field":
        i = draw(st.sampled_from([0, 2, 3]))
        f = draw(st.sampled_from(ACTION_FIELDS[i]))
        t["actions"][i][f] = BAD
        v = draw(st.sampled_from([x for x in BAD_INTS if not (f == "prefix_of" and x == "null")]))
        return _dump(t, v), f"actions[{i}].{f}", kind
    if kind == "action-list":
        f = draw(st.sampled_from(["accept", "eos"]))
        t["actions"][1][f] = BAD
        return _dump(t, draw(st.sampled_from(BAD_LISTS))), f"actions[1].{f}", kind
    if kind == "action-not-object":
        i = draw(st.integers(0, 4))
        t["actions"][i] = BAD
        return _dump(t, draw(st.sampled_from(["3", '"step"', "[]", "null", "true"]))), f"actions[{i}]", kind
    if kind == "action-op":
        i = draw(st.integers(0, 4))
        t["actions"][i]["op"] = draw(st.sampled_from(["jump", "", "Arrive", 3, None]))
        return _dump(t), f"actions[{i}]", kind
    if kind == "missing-key":
        k = draw(st.sampled_from(["format", "variant", "config", "actions"]))
        del t[k]
        return _dump(t), k, kind
    if kind == "missing-action-key":
        i, k = draw(st.sampled_from([(0, "prompt_len"), (0, "max_new_tokens"), (3, "rid"), (2, "op")]))
        del t["actions"][i][k]
        return _dump(t), f"actions[{i}]", kind
    if kind == "violation":
        t["violation"] = BAD
        return _dump(t, draw(st.sampled_from(['"boom"', "3", "[]", '{"step": 1}', '{"invariant": "x"}']))), "violation", kind
    if kind == "variant":
        t["variant"] = draw(st.sampled_from(BAD_VARIANTS + [3, None, "x" * 300]))
        return _dump(t), "variant", kind
    if kind == "seed":
        t["seed"] = BAD
        return _dump(t, draw(st.sampled_from(['"7"', "-1", "2.5", '"../../x"', "true", "1" + "0" * 25]))), "seed", kind
    if kind == "eos-ahead":
        t["actions"][4]["eos"] = [draw(st.sampled_from([2, 5, 99]))]
        return _dump(t), "actions[4].eos", kind
    if kind == "abort-ahead":
        t["actions"][3]["rid"] = draw(st.sampled_from([2, 7, 1000]))
        return _dump(t), "actions[3].rid", kind
    if kind == "prefix-ahead":
        t["actions"][2]["prefix_of"], t["actions"][2]["shared_len"] = draw(st.sampled_from([(1, 1), (5, 1), (0, 3), (0, 0)]))
        return _dump(t), "actions[2]", kind
    if kind == "format":
        t["format"] = draw(st.sampled_from([2, 0, "1", None, 1.0]))
        return _dump(t), "format", kind
    if kind == "truncated":
        data = _dump(t)
        return data[: draw(st.integers(1, len(data) - 2))], "{f}", kind
    if kind == "not-utf8":
        data = _dump(t)
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + b"\xff\xfe" + data[at:], "{f}", kind
    if kind == "empty":
        return draw(st.sampled_from([b"", b"   ", b"\n"])), "{f}", kind
    if kind == "deep":
        n = draw(st.integers(300, 3000))
        return _dump(_deep(n), "[" * n + "]" * n), "{f}", kind
    if kind == "top-list":
        return draw(st.sampled_from([b"[]", b"3", b'"trace"', b"null", b"[{}]"])), "{f}", kind
    if kind == "unknown-key":
        t[draw(st.sampled_from(["Variant", "action", "extra"]))] = 1
        return _dump(t), "", kind
    if kind == "too-many":
        t["config"]["cuda_graph_bs_override"] = list(range(1, 400))
        return _dump(t), "config.cuda_graph_bs_override", kind
    t["config"]["speculative_eagle_topk"] = 1  # cross-field: topk 1 needs num_steps + 1 draft tokens
    return _dump(t), "speculative_num_draft_tokens", kind


HEADER = {"ev": "header", "schema": "specstate-sglang-rec/2", "topk": 2, "speculative_num_steps": 2,
          "speculative_num_draft_tokens": 4, "kv_size": 64, "server_args": {"cuda_graph_max_bs": 4}}
RECORDS = [HEADER, {"ev": "arrive", "rid": "a", "prompt_len": 3, "max_new_tokens": 2, "t": 0.0},
           {"ev": "fbg", "iter": 1, "bs": 1, "rids": ["a"], "mode_in": "EXTEND", "path": "extend", "events": []}]


HEADER17 = {"ev": "header", "schema": "specstate-sglang17-rec/1", "server_args": {"speculative_num_steps": 3},
            "kv_size": 64, "adaptive_config_text": '{"1": {"candidate_steps": [3]}}'}
#: (kind, how the records are changed, the needle): a recording whose records are each well-formed
#: but that cannot be judged as a whole (issue 25: each was "conforms", exit 0)
INCONSISTENT: list[tuple[str, Any, str]] = [
    ("schema-unknown", lambda r: r[0].update(schema="specstate-sglang-rec/9"), "newer than this specstate"),
    ("schema-older", lambda r: r[0].update(schema="specstate-sglang17-rec/0"), "older recorder"),
    ("schema-foreign", lambda r: r[0].update(schema="someone-else/2"), "expected a schema from"),
    ("schema-missing", lambda r: r[0].pop("schema"), "expected a schema from"),
    ("sglang-of-another-schema", lambda r: r[0].update(sglang="0.5.17"), "names sglang 0.5.17"),
    ("two-headers", lambda r: r.insert(2, dict(r[0])), "second header"),
    ("header-last", lambda r: r.append(r.pop(0)), "header record (ev: header) first"),
    ("post-before-forward", lambda r: r.insert(2, {"ev": "post", "iter": 1, "rids": ["a"]}), "post with no forward"),
    ("iter-backwards", lambda r: r.append({"ev": "abort", "rid": "a", "iter": 0}), "iter 0 comes after iter 1"),
    ("topk-contradicts", lambda r: r[0]["server_args"].update(speculative_eagle_topk=4), "topk is 2 but"),
    ("draft-contradicts", lambda r: r[0]["server_args"].update(speculative_num_draft_tokens=16),
     "speculative_num_draft_tokens is 4 but"),
    ("empty-capture", lambda r: r[0].update(graph_runners={"target": {"capture_bs": []}}), "capture_bs"),
    ("million-rids", lambda r: r[2].update(rids=["a"] * 1_000_000), "rids"),
]
INCONSISTENT17: list[tuple[str, Any, str]] = [
    ("adaptive-not-json", lambda r: r[0].update(adaptive_config_text="{nope"), "adaptive_config_text"),
    ("adaptive-not-object", lambda r: r[0].update(adaptive_config_text="[3]"), "adaptive_config_text"),
    ("adaptive-bad-steps", lambda r: r[0].update(adaptive_config_text='{"1": {"candidate_steps": ["3"]}}'),
     "adaptive_config_text"),
    ("adaptive-no-bs-key", lambda r: r[0].update(adaptive_config_text='{"note": "x"}'), "at least one batch-size key"),
    ("empty-capture17", lambda r: r[0]["server_args"].update(cuda_graph_bs_decode=[]), "cuda_graph_bs_decode"),
    ("loop-backwards", lambda r: r.append({"ev": "loop", "loop": 1}), "loop 1 comes after loop 2"),
    ("fbg-before-its-loop", lambda r: r.insert(1, {"ev": "fbg", "loop": 2, "rids": []}), "before that loop's loop line"),
]
RECORDS17 = [HEADER17, {"ev": "arrive", "rid": "a", "prompt_len": 3, "max_new_tokens": 2},
             {"ev": "loop", "loop": 2}, {"ev": "fbg", "loop": 2, "rids": ["a"], "path": "extend"}]


def _lines(records: list[Any]) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n").encode()


@st.composite
def recording_files(draw: st.DrawFn) -> tuple[bytes, str, str, str]:
    """(content, needle, what, suffix) of one malformed recording."""
    kind = draw(st.sampled_from(["gz-truncated", "gz-corrupt", "no-header", "empty", "bad-json-line", "not-object",
                                 "header-type", "record-type", "unknown-rid", "not-utf8", "header-missing-field",
                                 "inconsistent", "inconsistent", "inconsistent17"]))
    recs = json.loads(json.dumps(RECORDS))
    if kind in ("inconsistent", "inconsistent17"):
        table, recs = (INCONSISTENT, recs) if kind == "inconsistent" else (INCONSISTENT17, json.loads(json.dumps(RECORDS17)))
        what, change, needle = draw(st.sampled_from(table))
        change(recs)
        return _lines(recs), needle, f"{kind}/{what}", ".jsonl"
    if kind == "gz-truncated":
        data = gzip.compress(_lines(recs))
        return data[: draw(st.integers(10, len(data) - 4))], "truncated", kind, ".jsonl.gz"
    if kind == "gz-corrupt":
        data = bytearray(gzip.compress(_lines(recs)))
        data[draw(st.integers(0, 2))] ^= 0xFF  # the magic number or the method
        return bytes(data), "gzip", kind, ".jsonl.gz"
    if kind == "no-header":
        return _lines(recs[1:]), "header", kind, ".jsonl"
    if kind == "empty":
        return b"", "header", kind, ".jsonl"
    if kind == "bad-json-line":
        recs[draw(st.integers(1, 2))] = draw(st.sampled_from(["{", "{'ev': 1}", "nope", "[" * 2000]))
        return _lines(recs), "line", kind, ".jsonl"
    if kind == "not-object":
        recs[1] = draw(st.sampled_from(["3", "[]", '"arrive"', "null"]))
        return _lines(recs), "line 2", kind, ".jsonl"
    if kind == "header-type":
        f = draw(st.sampled_from(["topk", "speculative_num_steps", "speculative_num_draft_tokens", "kv_size"]))
        recs[0][f] = draw(st.sampled_from(["3", 2.5, True, -1, None if f != "kv_size" else "x", [], 1 << 40]))
        return _lines(recs), f, kind, ".jsonl"
    if kind == "header-missing-field":
        del recs[0][draw(st.sampled_from(["topk", "speculative_num_steps", "speculative_num_draft_tokens"]))]
        return _lines(recs), "line 1", kind, ".jsonl"
    if kind == "record-type":
        i, f, v = draw(st.sampled_from([(1, "prompt_len", "3"), (1, "prompt_len", 0), (1, "rid", 7), (2, "bs", "1"),
                                        (2, "rids", "a"), (2, "events", [3]), (1, "max_new_tokens", 2.5),
                                        (2, "result", {"accept_lens": ["2"]})]))
        recs[i][f] = v
        return _lines(recs), f, kind, ".jsonl"
    if kind == "unknown-rid":
        recs[2]["rids"] = ["ghost"]
        return _lines(recs), "fit together", kind, ".jsonl"
    data = _lines(recs)
    return data[:40] + b"\xc3\x28" + data[40:], "UTF-8", kind, ".jsonl"


ARG_CASES: list[tuple[list[str], str]] = [
    (["explore", "--max-bs", v], "--max-bs") for v in ("-1", "0", "9", "x", "2.5", "")
] + [(["explore", "--depth", v], "--depth") for v in ("0", "-3", "41", "1e3")] + [
    (["explore", "--max-states", "0"], "--max-states"), (["explore", "--max-arrivals", "17"], "--max-arrivals"),
    (["fuzz", "--max-examples", "0"], "--max-examples"), (["fuzz", "--max-examples", "-5"], "--max-examples"),
    (["fuzz", "--max-examples", "x"], "--max-examples"), (["fuzz", "--seed", "-1"], "--seed"),
    (["fuzz", "--seed", str(1 << 64)], "--seed"), (["fuzz", "--profile", "fast"], "--profile"),
    (["run", "--seed", "x"], "--seed"), (["run", "--seed", "-3"], "--seed"), (["run", "--scenario", "nope"], "nope"),
    (["reproduce", "--seed", "3"], "expected TRACE.json"), (["reproduce", "--seed", "z", "--variant", "x"], "--seed"),
    (["graph", "--out", "g.txt"], "--out"), (["graph", "--out", "g"], "--out"), (["graph", "--out", "adir"], "--out"),
    (["graph", "--out", "g.dot", "--levels", "a,b"], "--levels"), (["graph", "--out", "g.dot", "--levels", "0"], "--levels"),
    (["graph", "--out", "g.dot", "--runs", "0"], "--runs"), (["graph"], "--out"),
    (["minimize", "t.json", "--bfs-depth", "13"], "--bfs-depth"), (["minimize"], "trace"),
    (["replay", "--engine", "sglang", "w.json"], "w.json"), (["replay", "--engine", "sglang", "--engine-arg", "x"], "--engine-arg"),
    (["replay", "--threshold", "-2"], "--threshold"), (["replay", "--engine", "model"], "TRACE.json"),
    (["replay", "--engine", "gpu"], "--engine"), (["conform", "--threshold", "-5", "r.jsonl"], "--threshold"),
    (["conform"], "recordings"), (["conform", "missing.jsonl"], "missing.jsonl"), (["reproduce", "missing.json"], "missing.json"),
    (["bogus"], "bogus"), ([], "command"),
    # issue 25: new flags, and options that contradict each other or their file (t.json is naive-threshold's)
    (["replay", "--timeout", "-1"], "--timeout"), (["replay", "--start-timeout", "x"], "--start-timeout"),
    (["reproduce", "t.json", "--seed", "3"], "--seed 3 would be ignored"),
    (["reproduce", "t.json", "--scenario", "oscillate"], "--scenario oscillate would be ignored"),
    (["reproduce", "t.json", "--variant", "fixed-threshold"], "Expected --variant naive-threshold"),
    (["reproduce", "t.json", "--engine", "sglang-0.5.17"], "Expected --engine sglang-0.5.12"),
    (["graph", "--trace", "t.json", "--raw", "--out", "g.json"], "--trace without --raw"),
    (["graph", "--trace", "missing.json", "--raw", "--out", "g.json"], "--trace without --raw"),
    (["graph", "--trace", "t.json", "--variant", "upstream-adaptive", "--out", "g.json"], "sglang-0.5.17 family"),
    (["prove", "--failures", "", "--max-bs", "2"], "--failures"),
    (["conform", "r.jsonl", "--variant", "upstream-adaptive"], "Expected a variant of sglang-0.5.12"),
] + [([cmd, "--failures", "afile"] + extra, "--failures")
     for cmd, extra in (("run", []), ("fuzz", []), ("explore", []), ("minimize", ["t.json"]))]
VARIANT_COMMANDS = [["run"], ["fuzz", "--max-examples", "2"], ["explore"], ["graph", "--out", "g.dot"],
                    ["reproduce", "--seed", "1"], ["conform", "r.jsonl"]]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    family = draw(st.sampled_from(["trace", "trace", "trace", "recording", "args", "variant", "workload", "passing"]))
    if family == "trace":
        content, needle, what = draw(trace_files())
        cmd = draw(st.sampled_from(TRACE_COMMANDS))
        name = draw(st.sampled_from(["t.json", "my trace.json"]))
        if what == "unknown-key":
            needle = ""
        files: dict[str, Any] = {name: content}
        return Case([a.replace("{f}", name) for a in cmd], files, needle.replace("{f}", name) or name, f"trace/{what}")
    if family == "recording":
        content, needle, what, suffix = draw(recording_files())
        name = "r" + suffix
        cmd = draw(st.sampled_from(REC_COMMANDS))
        return Case([a.replace("{f}", name) for a in cmd], {name: content, "t.json": _dump(TRACE)}, needle,
                    f"recording/{what}")
    if family == "args":
        argv, needle = draw(st.sampled_from(ARG_CASES))
        return Case(list(argv), {"afile": b"x", "adir": "DIR", "t.json": _dump(TRACE), "r.jsonl": _lines(RECORDS),
                                 "w.json": b'{"waves": [[{"rid": "a", "prompt_len": "3", "max_new_tokens": 2}]]}'},
                    needle, "args")
    if family == "variant":
        spec = draw(st.sampled_from(VARIANT_MODULES))
        cmd = draw(st.sampled_from(VARIANT_COMMANDS))
        needle = spec.split(":")[0] if spec not in (":", ".x:Y") else "--variant"
        return Case(cmd + ["--variant", spec], {"r.jsonl": _lines(RECORDS)}, needle, "variant")
    if family == "workload":
        bad = draw(st.sampled_from([('"3"', "prompt_len"), ("0", "prompt_len"), ("2.5", "max_new_tokens"),
                                    ("true", "max_new_tokens"), ("-1", "max_new_tokens")]))
        field_ = bad[1]
        req = {"rid": "a", "prompt_len": 3, "max_new_tokens": 2}
        req[field_] = BAD
        data = json.dumps({"waves": [[req]]}).replace(json.dumps(BAD), bad[0]).encode()
        return Case(["replay", "--engine", "sglang", "w.json"], {"w.json": data}, f"waves[0][0].{field_}", "workload")
    t = json.loads(json.dumps(TRACE))
    t["variant"] = "fixed-threshold"
    return Case(["minimize", "t.json"], {"t.json": _dump(t)}, "failing trace", "minimize-passing")


class _Timeout(BaseException):
    pass


@dataclass
class Verdict:
    kind: str
    code: int | None
    stderr: str
    seconds: float


def _write(folder: str, files: dict[str, Any]) -> None:
    for name, content in files.items():
        path = os.path.join(folder, name)
        if content == "DIR":
            os.mkdir(path)
        elif content == "FIFO":
            os.mkfifo(path)
        else:
            with open(path, "wb") as f:
                f.write(content)


def warm_up() -> None:
    """Import what the commands import (torch above all) before any time limit runs."""
    import importlib

    for m in ("torch", "specstate.cli", "specstate.check", "specstate.fuzz.runner", "specstate.fuzz.minimize",
              "specstate.cli.fuzz", "specstate.cli.graph", "specstate.cli.replay", "specstate.integration.conform",
              "specstate.testing"):
        try:
            importlib.import_module(m)
        except ImportError:
            pass


def judge(case: Case, limit_s: float = 10.0) -> Verdict:
    """Run ``case`` in-process in a fresh folder and sort the answer (module doc)."""
    from specstate.cli import main

    warm_up()

    here, out, err = os.getcwd(), io.StringIO(), io.StringIO()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        _write(d, case.files)
        os.chdir(d)
        old = signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(_Timeout()))
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        t0, code, kind = time.perf_counter(), None, ""
        sys.path.insert(0, root)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(case.argv + ["--quiet"] * (case.argv[:1] in (["run"], ["fuzz"], ["minimize"], ["reproduce"])))
        except _Timeout:
            kind = "hang"
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
        except BaseException as e:  # noqa: BLE001  (what escapes main is the finding)
            kind, err = "traceback", io.StringIO(f"{type(e).__name__}: {e}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            sys.path.remove(root)
            os.chdir(here)
        seconds = time.perf_counter() - t0
    text = err.getvalue()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not kind:
        if "Traceback" in text:
            kind = "traceback"
        elif code in (0, 1, 3):
            kind = "accepted"
        elif code == 2 and len(lines) == 1 and case.needle in lines[0]:
            kind = "clean"
        else:
            kind = "unclear"
    return Verdict(kind, code, text, seconds)


# -- the Python API (``specstate.testing``): (what, call, needle), each a class the issue-25 survey
# found accepted or a traceback; ``judge_api`` sorts the answer as ``judge`` does
def _api_cases() -> list[tuple[str, Any, str]]:
    from specstate.testing import check, check_engine_start, check_recording, explore, fuzz, run_scenario

    rec = "r.jsonl"  # written by judge_api: RECORDS, a valid 0.5.12 recording
    fl = "--model-path m --speculative-algorithm EAGLE"
    nan, inf = float("nan"), float("inf")
    return [
        ("check flags an int", lambda: check(123), "Expected None, a str or a list of str but got flags=123"),
        ("check flags a list of ints", lambda: check([1, 2]), "flags=[1, 2] (list)"),
        ("check flags a dict", lambda: check({"a": 1}), "flags={'a': 1} (dict)"),
        ("check flags none", lambda: check(None), "Expected the launch to check"),
        ("check flags empty", lambda: check(""), "Expected the launch to check"),
        ("check budget a str", lambda: check(fl, budget_s="x"), "budget_s='x' (str)"),
        ("check budget negative", lambda: check(fl, budget_s=-1), "Expected seconds (int or float) in [1, 86400] but got budget_s=-1"),
        ("check budget zero", lambda: check(fl, budget_s=0), "budget_s=0"),
        ("check budget a bool", lambda: check(fl, budget_s=True), "budget_s=True (bool)"),
        ("check budget nan", lambda: check(fl, budget_s=nan), "budget_s=nan"),
        ("check budget inf", lambda: check(fl, budget_s=inf), "budget_s=inf"),
        ("check budget over a day", lambda: check(fl, budget_s=86401), "budget_s=86401"),
        ("check seed a str", lambda: check(fl, seed="abc"), "seed='abc' (str)"),
        ("check seed negative", lambda: check(fl, seed=-1), "Expected int in [0, 9223372036854775807] but got seed=-1"),
        ("check seed over 63 bits", lambda: check(fl, seed=2**70), "seed=1180591620717411303424"),
        ("check seed a float", lambda: check(fl, seed=1.5), "seed=1.5"),
        ("check seed a bool", lambda: check(fl, seed=False), "seed=False (bool)"),
        ("check parts None", lambda: check(fl, parts=None), "Expected parts a non-empty list from start, sweep, fuzz, prove but got parts=None"),
        ("check parts a str", lambda: check(fl, parts="start"), "parts='start' (str)"),
        ("check parts empty", lambda: check(fl, parts=()), "parts=()"),
        ("check parts unknown", lambda: check(fl, parts=("start", "nope")), "parts=('start', 'nope')"),
        ("check failures empty", lambda: check(fl, failures=""), "failures=''"),
        ("check failures an int", lambda: check(fl, failures=3), "failures=3"),
        ("check quiet a str", lambda: check(fl, quiet="no"), "quiet='no'"),
        ("check engine unknown", lambda: check(fl, engine="vllm"), "engine='vllm'"),
        ("check engine unmodelled release", lambda: check(fl, engine="0.5.20"), "engine='0.5.20'"),
        ("check engine 4300 digits", lambda: check(fl, engine="0.5." + "9" * 4300), "Expected engine from"),
        ("check engine an int", lambda: check(fl, engine=12), "engine=12"),
        ("check variant an int", lambda: check(fl, variant=3), "variant=3"),
        ("check variant of another engine", lambda: check(fl, engine="0.5.17", variant="fixed-threshold"),
         "Expected a variant of --engine sglang-0.5.17"),
        ("check config_file an int", lambda: check(config_file=3), "config_file=3"),
        ("check config_file missing", lambda: check(config_file="nope.toml"), "nope.toml: no such server flags file"),
        ("check config_file a folder", lambda: check(config_file="."), "got a directory"),
        ("check_engine_start a v1 variant", lambda: check_engine_start(_v2_config(), "fixed-threshold"),
         "Expected a variant of a family with an engine start"),
        ("check_engine_start config None", lambda: check_engine_start(None), "config=None"),
        ("check_engine_start config an int", lambda: check_engine_start(3), "config=3"),
        ("check_engine_start a folder", lambda: check_engine_start("."), "got a directory"),
        ("check_engine_start /dev/zero", lambda: check_engine_start("/dev/zero"), "not a regular file"),
        ("check_engine_start a FIFO", lambda: check_engine_start(_fifo()), "not a regular file"),
        ("check_engine_start bad UTF-8", lambda: check_engine_start(_file("c.json", b"\xff\xfe{}")), "expected a UTF-8"),
        ("check_engine_start deep nesting", lambda: check_engine_start(_file("d.json", b"[" * 5000)), "nests deeper"),
        ("check_engine_start not an object", lambda: check_engine_start(_file("l.json", b"[1]")), "expected a JSON object"),
        ("check_engine_start variant unknown", lambda: check_engine_start(_v2_config(), "nope"), "Expected a variant"),
        ("max_examples zero", lambda: fuzz("fixed-threshold", max_examples=0), "Expected None or int in [1, 10000000] but got max_examples=0"),
        ("max_examples negative", lambda: fuzz("fixed-threshold", max_examples=-5), "max_examples=-5"),
        ("max_examples a str", lambda: fuzz("fixed-threshold", max_examples="5"), "max_examples='5' (str)"),
        ("max_examples a float", lambda: fuzz("fixed-threshold", max_examples=2.5), "max_examples=2.5"),
        ("max_examples a bool", lambda: fuzz("fixed-threshold", max_examples=True), "max_examples=True (bool)"),
        ("seed a str", lambda: fuzz("fixed-threshold", seed="abc"), "seed='abc'"),
        ("seed negative", lambda: fuzz("fixed-threshold", seed=-1), "seed=-1"),
        ("seed over 64 bits", lambda: fuzz("fixed-threshold", seed=2**70), "seed=1180591620717411303424"),
        ("seed a float", lambda: fuzz("fixed-threshold", seed=1.5), "seed=1.5"),
        ("profile unknown", lambda: fuzz("fixed-threshold", profile="fast"), "profile one of dev, ci, deep"),
        ("check_witnesses a str", lambda: fuzz("fixed-threshold", check_witnesses="no"), "check_witnesses='no'"),
        ("failures empty", lambda: fuzz("fixed-threshold", failures=""), "failures=''"),
        ("failures an int", lambda: explore("fixed-threshold", failures=123), "failures=123"),
        ("scenario seed a str", lambda: run_scenario("fixed-threshold", seed="x"), "seed='x'"),
        ("scenario variant None", lambda: run_scenario(None), "variant=None"),
        ("scenario unknown", lambda: run_scenario("fixed-threshold", "nope"), "Expected a scenario"),
        ("scenario variant unknown", lambda: run_scenario("nope-variant"), "Expected a variant"),
        ("explore max_live zero", lambda: explore("fixed-threshold", max_live=0), "Expected int in [1, 8] but got max_live=0"),
        ("explore max_live negative", lambda: explore("fixed-threshold", max_live=-1), "max_live=-1"),
        ("explore depth zero", lambda: explore("fixed-threshold", depth=0), "depth=0"),
        ("explore depth negative", lambda: explore("fixed-threshold", depth=-1), "depth=-1"),
        ("explore depth a str", lambda: explore("fixed-threshold", depth="8"), "depth='8' (str)"),
        ("explore max_states zero", lambda: explore("fixed-threshold", max_states=0), "max_states=0"),
        ("explore jobs negative", lambda: explore("fixed-threshold", jobs=-1), "jobs=-1"),
        ("explore reduce a str", lambda: explore("fixed-threshold", reduce="yes"), "Expected bool but got reduce='yes'"),
        ("recording path None", lambda: check_recording(None), "path=None"),
        ("recording threshold negative", lambda: check_recording(rec, threshold=-3), "threshold=-3"),
        ("recording expect_crash a str", lambda: check_recording(rec, expect_crash="yes"), "expect_crash='yes'"),
        ("recording with a v2 variant", lambda: check_recording(rec, "upstream-adaptive"), "Expected a variant of sglang-0.5.12"),
    ]


def _v2_config() -> Any:
    from specstate.model import SpecConfig

    return SpecConfig(speculative_eagle_topk=1, speculative_num_draft_tokens=4, disable_overlap_schedule=False)


def _file(name: str, data: bytes) -> str:
    Path(name).write_bytes(data)
    return name


def _fifo() -> str:
    os.mkfifo("fifo.json")
    return "fifo.json"


def judge_api(call: Any, needle: str, limit_s: float = 10.0) -> Verdict:
    """``call()`` in a fresh folder holding ``r.jsonl``: ``clean`` if it raises specstate's own
    error holding ``needle`` on one line, ``accepted`` if it returns, ``traceback`` otherwise."""
    from specstate.errors import InternalError, SpecStateError

    here = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        _write(d, {"r.jsonl": _lines(RECORDS)})
        os.chdir(d)
        t0 = time.perf_counter()
        try:
            call()
            kind, text = "accepted", ""
        except InternalError as e:
            kind, text = "traceback", f"{type(e).__name__}: {e}"
        except SpecStateError as e:
            text = str(e)
            kind = "clean" if needle in text and "\n" not in text else "unclear"
        except BaseException as e:  # noqa: BLE001  (what escapes is the finding)
            kind, text = "traceback", f"{type(e).__name__}: {e}"
        finally:
            os.chdir(here)
        seconds = time.perf_counter() - t0
    return Verdict(kind, None, text, seconds)


if __name__ == "__main__":  # the counts: python tests/bad_inputs.py N
    from collections import Counter

    from hypothesis import HealthCheck, given, settings

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}

    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def tally(case: Case) -> None:
        v = judge(case, limit_s=5.0)
        counts[v.kind] += 1
        examples.setdefault(f"{v.kind} {case.what}", f"{case!r} -> {v.code}: {v.stderr.strip()[-200:]}")
        if sum(counts.values()) % 50 == 0:
            print(f"... {sum(counts.values())}: " + ", ".join(f"{k} {c}" for k, c in sorted(counts.items())),
                  file=sys.__stdout__, flush=True)

    warm_up()
    tally()
    for what, call, needle in _api_cases():
        v = judge_api(call, needle)
        counts[v.kind] += 1
        examples.setdefault(f"{v.kind} api/{what}", v.stderr[-200:])
    print(f"tried {sum(counts.values())}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for k, ex in sorted(examples.items()):
        if not k.startswith("clean"):
            print(" ", k, "::", ex)
