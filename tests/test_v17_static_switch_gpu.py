"""The seed's switch written against sglang 0.5.17's ``EAGLEWorkerV2`` (its naive form, ``--patch
v2-switch-naive --threshold 5``, on a static launch), on the real engine, judged again on CPU
(``tests/data/gpu/v17/static-switch``, recorded by ``V17_PLAN=static17 bash
specstate/integration/gpu_run_v17.sh``; the plan and predictions: ``sglang_0_5_17/static17.py``,
docs/gpu.md).

The engine crashed at the seed sweep's wave of 10 with ``RuntimeError: The size of tensor a (10)
must match the size of tensor b (40)``, raised in ``EAGLEDraftExtendCudaGraphRunner.execute`` under
``_draft_extend_for_decode``: the model's ``v2-static-switch-naive`` predicts that class, those sizes,
that function, at that iteration, with every iteration before it conforming. The corrected form
(``v2-switch``) ran in a later call and conforms (``tests/test_v17_gpu_paged_and_switch.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

from specstate.integration.sglang_0_5_17.conformance import check_recording

DATA = Path(__file__).parent / "data" / "gpu" / "v17" / "static-switch"
NAIVE = DATA / "switch-naive__seed-sweep.jsonl.gz"


def test_the_naive_switch_crashed_on_the_gpu_as_the_model_predicts() -> None:
    rep = check_recording(NAIVE)
    assert (rep["variant"], rep["threshold"]) == ("v2-static-switch-naive", 5)  # read from the header
    assert rep["mismatch_count"] == 0, rep["mismatches"]
    v = rep["crash_verdict"]
    assert v["verdict"] == "as-predicted", v
    assert tuple(v["real"][0:1]) == ("RuntimeError",) and sorted(v["real"][1]) == [10, 40]
    assert v["model_where"].endswith("EAGLEDraftExtendCudaGraphRunner.execute")


def test_the_traceback_names_the_function_the_model_raises_in() -> None:
    crash = json.loads((DATA / "switch-naive__crash.jsonl").read_text().splitlines()[0])
    tail = "\n".join(crash["error"]["tb_tail"])
    assert "_draft_extend_for_decode" in tail and crash["bs"] == 10 and crash["steps_before"] == 3


def test_the_corrected_form_does_not_predict_this_crash() -> None:
    """The control: judged as the corrected switch, the same recording's crash is not predicted."""
    rep = check_recording(NAIVE, "v2-static-switch")
    assert rep["crash_verdict"]["verdict"] != "as-predicted", rep["crash_verdict"]
