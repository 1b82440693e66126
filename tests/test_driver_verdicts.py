"""The real-engine driver's verdicts, rehearsed on CPU with a fake ``sglang`` Engine
(``integration/verdicts.py``): an engine that dies at start is reported with its cause and
phase, a workload nothing of which reached the scheduler and a wave one request of which was
aborted for out-of-memory fail the run with their reasons (the other requests' results kept),
and a hang is ended at the limit naming the phase."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from specstate.integration import sglang_driver as drv
from specstate.integration.verdicts import outcome, parse_traceback, start_failure, workload_verdict
from specstate.integration.workloads import Request, Workload, dump_workload

FAKE = '''
import asyncio, os, time


class _TM:
    def abort_request(self, rid):
        pass


def capture(bs):  # a frame named like sglang's CUDA-graph capture
    assert bs <= 4, "capture_bs %d exceeds the pool's request slots" % bs


class Engine:
    def __init__(self, **kw):
        mode = kw.get("fake_start") or os.environ.get("FAKE_START", "")
        if mode == "assert":
            capture(8)
        if mode == "assert-logits":  # sglang 0.5.17's own message, with its sizes
            assert False, "shared logits buffer holds 48 rows but caller needs 64 (vocab_size=32000)"
        if mode == "hang":
            time.sleep(600)
        self.loop = asyncio.new_event_loop()
        self.tokenizer_manager = _TM()

    def _one(self, ids, sp, rid):
        if len(ids) + sp["max_new_tokens"] > int(os.environ.get("FAKE_CONTEXT", "100000")):
            raise ValueError("Requested token count exceeds the model's maximum context length")
        if rid == os.environ.get("FAKE_OOM"):
            return {"output_ids": [1], "meta_info": {"finish_reason": {"type": "abort", "message":
                    "Out of memory even after retracting all requests"}}}
        n = sp["max_new_tokens"]
        return {"output_ids": list(range(n)), "meta_info": {"finish_reason": {"type": "length"}}}

    def generate(self, input_ids, sampling_params, rid):
        return self._one(input_ids[0], sampling_params, rid)

    async def async_generate(self, input_ids, sampling_params, rid):
        if rid == os.environ.get("FAKE_HANG"):
            time.sleep(600)
        return self._one(input_ids, sampling_params, rid)

    def flush_cache(self):
        return True

    def shutdown(self):
        pass
'''

#: the ``torch`` the fake engine's host sees: the fake engine needs none
FAKE_TORCH = '''
__version__ = "fake"


class version:
    cuda = None


class cuda:
    @staticmethod
    def is_available():
        return False
'''


def write_fake_sglang(root: Path) -> Path:
    """A fake ``sglang`` (its Engine: ``FAKE``) and the ``torch`` its host sees, under ``root``."""
    d = root / "sglang" / "srt" / "entrypoints"
    d.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("__version__ = 'fake'\n")
    (root / "sglang" / "srt" / "__init__.py").write_text("")
    (d / "__init__.py").write_text("")
    (d / "engine.py").write_text(FAKE)
    # the host asks torch only for its version (``sglang_driver._versions``): importing the real one
    # was 2 of the host's 2.2 CPU s, and under load it ate the hang test's whole ``--timeout 10`` (its
    # limit then) before the hanging workload began (the phase named was then "engine start"); the
    # host now reaches the hanging workload in about 0.5 s, and the hang tests' limits are 5 and 3 s
    (root / "torch").mkdir()
    (root / "torch" / "__init__.py").write_text(FAKE_TORCH)
    return root


@pytest.fixture
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTHONPATH", str(write_fake_sglang(tmp_path / "fakesg")))
    for k in ("FAKE_START", "FAKE_CONTEXT", "FAKE_OOM", "FAKE_HANG"):
        monkeypatch.delenv(k, raising=False)
    return tmp_path


def _workload(tmp: Path, name: str, waves: list[list[Request]], meta: dict | None = None) -> str:
    path = tmp / f"{name}.json"
    dump_workload(Workload(name=name, waves=tuple(tuple(w) for w in waves), meta=meta or {}), str(path))
    return str(path)


def _run(out: Path, *args: str) -> tuple[int, dict]:
    rc = drv.main(["run", "--out", str(out), "--no-record", *args])
    return rc, json.loads((out / "summary.json").read_text())


def test_an_engine_that_dies_at_start_is_the_verdict(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_START", "assert")
    rc, s = _run(fake_sglang / "out", "--scenario", "seed-sweep", "--timeout", "120")
    assert rc == 1 and not s["ok"]
    start = s["start_error"]
    assert start["cls"] == "AssertionError" and "capture_bs 8 exceeds" in start["msg"] and start["phase"] == "graph capture"
    assert any("engine.py" in f and "capture" in f for f in start["sglang_frames"])
    out = capsys.readouterr().out
    assert "ENGINE DID NOT START (phase graph capture): AssertionError: capture_bs 8 exceeds" in out
    assert "[driver] VERDICT: FAILED" in out.splitlines()[-1]


def test_a_hang_at_start_is_ended_at_the_limit_naming_the_phase(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_START", "hang")
    rc, s = _run(fake_sglang / "out", "--scenario", "seed-sweep", "--start-timeout", "3")
    assert rc == 1 and s["host_timed_out"] and s["host_wall_s"] < 60
    assert any("did not start within --start-timeout 3 s (in phase engine start)" in p for p in s["problems"])
    assert "VERDICT: FAILED" in capsys.readouterr().out


def test_a_hang_in_a_workload_is_ended_at_the_timeout_naming_it(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    monkeypatch.setenv("FAKE_HANG", "h1")
    w = _workload(fake_sglang, "hangs", [[Request("h0", 8, 4)], [Request("h1", 8, 4)]])
    rc, s = _run(fake_sglang / "out", "--scenario", "seed-sweep", "--scenario", w, "--timeout", "5")
    assert rc == 1 and s["host_timed_out"] and s["host_wall_s"] < 60
    assert any("exceeded --timeout 5 s (in phase workload hangs)" in p for p in s["problems"]), s["problems"]
    host = json.loads((fake_sglang / "out" / "host_result.json").read_text())
    assert not any(psutil.pid_exists(host["pid"]) and psutil.Process(host["pid"]).status() != psutil.STATUS_ZOMBIE
                   for _ in [0])  # the host's tree is gone


def test_a_workload_refused_before_the_scheduler_fails_the_run(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CONTEXT", "50")
    w = _workload(fake_sglang, "too-long", [[Request("a", 40, 20), Request("b", 45, 30)]])
    rc, s = _run(fake_sglang / "out", "--scenario", w, "--timeout", "120")
    assert rc == 1 and not s["ok"]
    v = s["workloads"][0]["verdict"]
    assert v["counts"] == {"sent": 2, "refused": 2}
    assert v["problems"][0] == "no request of 2 reached the scheduler"
    assert any("Requested token count exceeds" in p for p in v["problems"])


def test_an_out_of_memory_abort_fails_the_run_and_keeps_the_waves_other_results(fake_sglang: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_OOM", "m1")
    w = _workload(fake_sglang, "oom", [[Request("m0", 8, 4), Request("m1", 8, 4), Request("m2", 8, 4)]])
    rc, s = _run(fake_sglang / "out", "--scenario", w, "--timeout", "120")
    assert rc == 1 and not s["ok"]
    v = s["workloads"][0]["verdict"]
    assert v["counts"] == {"sent": 3, "finished": 2, "aborted:out-of-memory": 1}
    assert v["problems"] == ["request m1 aborted:out-of-memory: Out of memory even after retracting all requests"]
    host = json.loads((fake_sglang / "out" / "host_result.json").read_text())
    reqs = host["workloads"][0]["waves"][0]["reqs"]
    assert [r["finish"] for r in reqs] == ["length", "abort", "length"]  # every request's own result


def test_a_workload_may_ask_for_the_out_of_memory_abort(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_OOM", "m1")
    w = _workload(fake_sglang, "oom-asked", [[Request("m0", 8, 4), Request("m1", 8, 4)]], {"expect": ["out-of-memory"]})
    rc, s = _run(fake_sglang / "out", "--scenario", w, "--timeout", "120")
    assert rc == 0 and s["ok"], s["problems"]


@pytest.mark.parametrize("result,request_,kind", [
    ({"finish": "length"}, {}, "finished"),
    ({"finish": "abort", "finish_message": "Out of memory even after retracting"}, {}, "aborted:out-of-memory"),
    ({"finish": "abort"}, {"abort_after_s": 0.1}, "aborted:client"),
    ({"finish": "abort", "finish_message": "x"}, {}, "aborted:scheduler"),
    ({"error": "ValueError: Requested token count exceeds"}, {}, "refused"),
    ({"error": "HTTPException: 500: Out of memory even after retracting"}, {}, "aborted:out-of-memory"),
])
def test_outcome(result: dict, request_: dict, kind: str) -> None:
    assert outcome(request_, result) == kind


def test_a_client_abort_is_asked_for() -> None:
    wl = {"waves": [[{"rid": "a", "abort_after_s": 0.1}]]}
    v = workload_verdict({"waves": [{"i": 0, "reqs": [{"rid": "a", "finish": "abort"}]}]}, wl, admitted=1)
    assert v["ok"] and v["counts"] == {"sent": 1, "aborted:client": 1, "admitted": 1}


def test_the_first_traceback_after_the_start_is_the_cause() -> None:
    log = ('[driver] importing took 1.0 s; starting engine\nTraceback (most recent call last):\n'
           '  File "/x/site-packages/sglang/srt/model_executor/model_runner.py", line 9, in init_memory_pool\n'
           '    raise RuntimeError("Not enough memory")\nRuntimeError: Not enough memory. Please try to increase '
           '--mem-fraction-static.\nTraceback (most recent call last):\n  File "/x/engine.py", line 1, in __init__\n'
           'RuntimeError: Initialization failed. Please see the error messages above.\n')
    tb = parse_traceback(log)
    assert tb is not None and tb["cls"] == "RuntimeError" and tb["msg"].startswith("Not enough memory")
    start = start_failure(log, {"t_import_s": 1.0})
    assert start is not None and start["phase"] == "memory pool"
    assert start["sglang_frames"] == ["sglang/srt/model_executor/model_runner.py:9 init_memory_pool"]
    assert start_failure(log, {"t_import_s": 1.0, "engine_start_s": 3.0}) is None


def _without_waits(write: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """``plan._workload_files`` with every request's arrival delay and abort timer taken out of
    the files it writes: the fake engine answers at once, so those waits (seconds of sleep per engine
    of a plan) would test nothing but the clock; the workloads, their order and the
    requests are the plan's."""
    import dataclasses

    from specstate.integration.workloads import dump_workload, load_workload

    def written(*args: Any, **kw: Any) -> list[str]:
        paths = write(*args, **kw)
        for p in paths:
            wl = load_workload(p)
            waves = tuple(tuple(dataclasses.replace(r, delay_s=0.0, abort_after_s=None) for r in w) for w in wl.waves)
            dump_workload(dataclasses.replace(wl, waves=waves), p)
        return paths

    return written


def test_a_plan_runs_three_engines_in_one_call(fake_sglang: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from specstate.integration import plan as plan_module
    from specstate.integration.plan import main as plan_main

    monkeypatch.setattr(plan_module, "_workload_files", _without_waits(plan_module._workload_files))
    _workload(fake_sglang, "last", [[Request("z0", 8, 4)]])
    plan = {"budget_s": 600, "min_engine_s": 30, "engines": [
        {"name": "small-pool", "engine_args": {"max_total_tokens": 2048},
         "workloads": ["last.json", {"random": 2, "seed": 3}, "seed-sweep"], "timeout_s": 120},
        {"name": "dies", "engine_args": {"fake_start": "assert"}, "workloads": ["seed-sweep"], "timeout_s": 120},
        # upstream's default adaptive config reaches 7 steps: started at 7 (the logits buffer fits every
        # candidate); at the driver's 3 the model refuses it, as the engine would (start_prediction.py)
        {"name": "v2-defaults", "engine": "sglang-0.5.17", "adaptive_config": None,
         "engine_args": {"speculative_num_steps": 7, "speculative_num_draft_tokens": 8},
         "workloads": [{"random": 1, "seed": 1}], "timeout_s": 120}]}
    (fake_sglang / "plan.json").write_text(json.dumps(plan))
    rc = plan_main([str(fake_sglang / "plan.json"), str(fake_sglang / "out")])
    s = json.loads((fake_sglang / "out" / "plan-summary.json").read_text())
    assert rc == 1 and [r["name"] for r in s["engines"]] == ["small-pool", "dies", "v2-defaults"]
    assert [r["ok"] for r in s["engines"]] == [True, False, True], s
    assert s["engines"][1]["start_error"]["cls"] == "AssertionError"
    first = json.loads((fake_sglang / "out" / "small-pool" / "summary.json").read_text())
    assert [w["name"] for w in first["workloads"]] == ["last", "random-3-0", "random-3-1", "seed-sweep"]  # the plan's order
    cfg = json.loads((fake_sglang / "out" / "v2-defaults" / "host_config.json").read_text())
    assert cfg["engine"] == "sglang-0.5.17" and cfg["engine_overrides"]["speculative_adaptive_config"] is None
    assert "[plan] VERDICT: FAILED (2 of 3 engines passed)" in capsys.readouterr().out


@pytest.mark.parametrize("plan,needle", [
    ({"engines": []}, "budget_s"),
    ({"budget_s": 600, "engines": []}, "engines"),
    ({"budget_s": 600, "engines": [{"name": "a", "workloads": []}]}, "workloads"),
    ({"budget_s": 600, "engines": [{"name": "a", "workloads": ["seed-sweep"], "bogus": 1}]}, "bogus"),
    ({"budget_s": 600, "engines": [{"name": "a", "workloads": ["seed-sweep"]}, {"name": "a", "workloads": ["seed-sweep"]}]},
     "distinct names"),
])
def test_a_bad_plan_is_one_line(tmp_path: Path, plan: dict, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    from specstate.integration.plan import main as plan_main

    (tmp_path / "plan.json").write_text(json.dumps(plan))
    assert plan_main([str(tmp_path / "plan.json"), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err


# -- the model's start beside the engine's (integration/start_prediction.py) -------------------

def _v17(out: Path, tmp: Path, adaptive: dict, *args: str) -> tuple[int, dict]:
    path = tmp / "adaptive.json"
    path.write_text(json.dumps(adaptive))
    return _run(out, "--engine", "sglang-0.5.17", "--patch", "none", "--scenario", "seed-sweep", "--timeout", "120",
                "--engine-arg", f"speculative_adaptive_config={path}", *args)


#: steps 2 at start, 2 and 3 up to batch size 3: the graph-shared logits buffer is sized for 2
#: steps (48 rows at 16 graphs) and the 3-step verify needs 64 (the H200 refused it so)
ABOVE = {"1": {"candidate_steps": [2, 3]}, "4": {"candidate_steps": [0]}}
SMALL = ["--engine-arg", "speculative_num_steps=2", "--engine-arg", "speculative_num_draft_tokens=3"]


def test_a_start_the_model_predicted_is_said_so(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_START", "assert-logits")
    rc, s = _v17(fake_sglang / "out", fake_sglang, ABOVE, *SMALL)
    assert rc == 1 and s["start_model"]["agrees"] is True
    assert s["start_model"]["model"]["status"] == "refuses" and s["start_model"]["model"]["upstream"] == "AssertionError"
    assert "holds 48 rows but caller needs 64" in s["start_model"]["line"]
    assert not any("disagrees" in p for p in s["problems"])
    assert "START AS MODELLED: the model predicted it" in capsys.readouterr().out


def test_the_same_class_with_other_sizes_is_not_as_modelled(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The engine's ``AssertionError`` is about another thing (a capture beyond the pool's slots), not
    the 64 / 48 logits rows the model predicts: the class agrees, the sizes do not (issue 36, item 6)."""
    monkeypatch.setenv("FAKE_START", "assert")
    rc, s = _v17(fake_sglang / "out", fake_sglang, ABOVE, *SMALL)
    assert rc == 1 and s["start_model"]["agrees"] is False
    assert "other sizes" in s["start_model"]["line"] and "asked 64, held 48" in s["start_model"]["line"]
    assert "START NOT AS MODELLED" in capsys.readouterr().out


def test_a_start_the_model_got_wrong_fails_the_run(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, s = _v17(fake_sglang / "out", fake_sglang, ABOVE, *SMALL)  # the fake engine starts it
    assert rc == 1 and not s["ok"] and s.get("start_error") is None
    assert s["start_model"]["agrees"] is False
    assert any("the model's engine start disagrees" in p and "the engine started" in p for p in s["problems"])
    assert "START NOT AS MODELLED" in capsys.readouterr().out


def test_a_start_both_agree_on_passes(fake_sglang: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, s = _v17(fake_sglang / "out", fake_sglang, {"1": {"candidate_steps": [3]}, "6": {"candidate_steps": [0]}})
    assert rc == 0 and s["ok"], s["problems"]
    assert s["start_model"]["agrees"] is True and s["start_model"]["model"]["status"] == "starts"
    assert "START AS MODELLED: the model predicted it: it starts this config too" in capsys.readouterr().out


def test_a_refusal_of_another_class_is_not_a_prediction(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model refuses at server-argument time (a ``ValueError`` there); the fake engine dies of
    an ``AssertionError`` in capture: both refuse, for different reasons."""
    monkeypatch.setenv("FAKE_START", "assert")
    rc, s = _v17(fake_sglang / "out", fake_sglang, {"1": {"candidate_steps": [1, 2]}})  # steps 3 not a candidate
    assert s["start_model"]["model"]["status"] == "refuses" and s["start_model"]["model"]["upstream"] == "ValueError"
    assert s["start_model"]["agrees"] is False and "but with ValueError (the engine: AssertionError)" in s["start_model"]["line"]


def test_a_patched_v1_run_is_not_judged(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_START", "assert")
    rc, s = _run(fake_sglang / "out", "--scenario", "seed-sweep", "--timeout", "120")
    assert "start_model" not in s


def test_a_start_ended_by_the_start_timeout_is_not_judged(fake_sglang: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """An engine the driver ended before its start finished neither started nor refused: the
    model's start is not judged against it (on the H200, ``replay --start-timeout 30`` on a
    config both start was reported ``START NOT AS MODELLED ... refused it (None)``), and the
    run fails once, for the limit, with its phase."""
    monkeypatch.setenv("FAKE_START", "hang")
    rc, s = _v17(fake_sglang / "out", fake_sglang, {"1": {"candidate_steps": [3]}, "6": {"candidate_steps": [0]}},
                 "--start-timeout", "3")
    assert rc == 1 and s["host_timed_out"]
    assert s["start_model"]["agrees"] is None and s["start_model"]["line"].startswith("not judged")
    assert s["start_error"]["msg"] == "ended by the driver: the engine did not start within --start-timeout 3 s"
    assert s["problems"] == ["the engine did not start within --start-timeout 3 s (in phase engine start)"]
    out = capsys.readouterr().out
    assert "START NOT JUDGED: not judged: the engine did not finish starting" in out
    assert "ENGINE DID NOT START (phase engine start): ended by the driver" in out and "None:" not in out
