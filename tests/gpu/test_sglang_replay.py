"""GPU replay through the real sglang 0.5.12 EAGLEWorker (needs CUDA and sglang==0.5.12).

Starts the Engine once per test (about 30-100 s), so the workloads are small. Run on the GPU
host from the repository root with the wheelhouse installed (see docs/gpu.md):

    PYTHONPATH=/tmp/site python3 -m pytest -m gpu tests/gpu -q
"""

from __future__ import annotations

import importlib.util
import json

import pytest

pytestmark = pytest.mark.gpu


def _skip_reason() -> str | None:
    if importlib.util.find_spec("sglang") is None:  # first: collecting the suite does not import torch
        return "sglang is not installed (pip install sglang==0.5.12, or the wheelhouse of docs/gpu.md)"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        from importlib.metadata import version

        v = version("sglang")
    except Exception:  # noqa: BLE001
        v = None
    if v is not None and v != "0.5.12":
        return f"sglang {v} installed; these hooks target 0.5.12"
    return None


_REASON = _skip_reason()
skip_no_gpu = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


def _crossing_workload(path: str) -> str:
    waves = []
    for wi, c in enumerate((2, 10, 3, 12, 1)):
        waves.append([{"rid": f"g{wi}r{i}", "prompt_len": 40 + i, "max_new_tokens": 8 + (i % 3) * 8, "abort_after_s": None} for i in range(c)])
    with open(path, "w") as f:
        json.dump({"name": "crossing", "waves": waves}, f)
    return path


@skip_no_gpu
def test_fixed_patch_crosses_threshold_both_ways(tmp_path):
    from specstate.integration import sglang_driver

    wl = _crossing_workload(str(tmp_path / "crossing.json"))
    out = tmp_path / "out"
    rc = sglang_driver.main(["run", "--out", str(out), "--patch", "fixed", "--threshold", "5", "--scenario", wl, "--timeout", "400"])
    with open(out / "summary.json") as f:
        s = json.load(f)
    assert rc == 0, s.get("crashes")
    a = s["workloads"][0]["analysis"]
    assert a["paths"].get("fallback", 0) > 0 and a["paths"].get("spec", 0) > 0
    assert a["switch_off"] >= 1 and a["resume"] >= 1
    assert a["n_check_failures"] == 0, a["check_failures"][:5]


@skip_no_gpu
def test_naive_patch_crashes_at_first_fallback(tmp_path):
    from specstate.integration import sglang_driver

    wl = _crossing_workload(str(tmp_path / "crossing.json"))
    out = tmp_path / "out"
    rc = sglang_driver.main(["run", "--out", str(out), "--patch", "naive", "--naive-path", "graph", "--scenario", wl, "--timeout", "400"])
    with open(out / "summary.json") as f:
        s = json.load(f)
    assert rc == 1
    c = s["crashes"][0]
    assert c["error"]["cls"] == "RuntimeError" and "must match the size of tensor b" in c["error"]["msg"]
