"""The model's engine start beside the engine's (``integration/start_prediction.py``), over the
seven start probes the H200 ran on sglang 0.5.17 (``tests/data/gpu/v17/pressure/starts.json``:
three started, two refused with the shared-logits-buffer assertion, two with a server-argument
error): the engine arguments the driver launched them with, read as sglang reads its flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specstate.integration.sglang_0_5_17.engine import ADAPTIVE_CONFIG_PATH, engine_kwargs
from specstate.integration.sglang_0_5_17.pressure17 import adaptive_configs
from specstate.integration.start_prediction import compare_start, predict_start
from specstate.model.sglang_0_5_17.variants import UNCHECKED_START
from specstate.model.variants import Variant

ROWS = json.loads((Path(__file__).parent / "data" / "gpu" / "v17" / "pressure" / "starts.json").read_text())["engines"]


def _kwargs(row: dict[str, Any], folder: Path) -> dict[str, Any]:
    name = row["adaptive_config_file"]
    path = ADAPTIVE_CONFIG_PATH
    if name != "adaptive_config_h200.json":
        path = str(folder / name)
        Path(path).write_text(json.dumps(adaptive_configs()[name[len("adaptive-"):-len(".json")]]))
    given = {k: v for k, v in row["server_args"].items() if v is not None}
    return engine_kwargs({**given, "speculative_adaptive_config": path})


def _engine(row: dict[str, Any]) -> dict[str, Any] | None:
    cls, _, msg = row["error"].partition(":") if not row["started"] else ("", "", "")
    return None if row["started"] else {"cls": cls, "msg": msg.strip()}


@pytest.mark.parametrize("row", ROWS, ids=[r["engine"] for r in ROWS])
def test_the_model_predicts_each_h200_start(row: dict[str, Any], tmp_path: Path) -> None:
    model = predict_start(_kwargs(row, tmp_path), "upstream-adaptive")
    assert model["status"] == ("starts" if row["started"] else "refuses")
    assert model["left_out"] == []  # every argument the driver passes is a 0.5.17 flag
    judged = compare_start(model, _engine(row))
    assert judged["agrees"] is True, judged["line"]
    if not row["started"]:
        assert model["upstream"] == row["error"].split(":", 1)[0]


def test_a_model_that_skips_the_start_checks_disagrees_where_the_engine_refused(tmp_path: Path) -> None:
    unchecked = Variant("mutant-start-unchecked", "the start sizes for the largest candidate, any startup step",
                        overrides=dict(UNCHECKED_START), base="upstream-adaptive")
    verdicts = {r["engine"]: compare_start(predict_start(_kwargs(r, tmp_path), unchecked), _engine(r))["agrees"]
                for r in ROWS}
    assert verdicts["start-above"] is False and verdicts["start-above5"] is False
    assert verdicts["a"] is True and verdicts["b"] is True


def test_a_family_whose_start_is_not_modelled_is_not_judged() -> None:
    model = predict_start({"speculative_num_steps": 3}, "fixed-threshold")
    assert model["status"] == "not modelled"
    assert compare_start(model, None)["agrees"] is None


def test_a_refusal_by_the_models_own_limit_is_never_shown_as_the_engines() -> None:
    """sglang starts with more running requests than the model's bound (4096): the model's refusal is
    its own limit, not sglang's ``ValueError``, and the start is not judged (issue 36, item 6)."""
    model = predict_start({"speculative_algorithm": "EAGLE3", "speculative_adaptive": True,
                           "max_running_requests": 5000}, "upstream-adaptive")
    assert model["status"] == "outside the model" and "the model's own limit" in model["why"]
    assert "upstream" not in model and "ValueError" not in model["why"]
    judged = compare_start(model, None)
    assert judged["agrees"] is None and judged["line"].startswith("not judged: the config is outside the model")
    assert "the engine's own verdict: it started" in judged["line"]


def test_the_same_class_with_other_sizes_is_not_as_modelled(tmp_path: Path) -> None:
    """Class and sizes: the engine's assertion with rows the model did not predict disagrees."""
    row = next(r for r in ROWS if r["engine"] == "start-above")
    model = predict_start(_kwargs(row, tmp_path), "upstream-adaptive")
    assert (model["asked"], model["held"]) == (64, 48)
    engine = {"cls": "AssertionError", "msg": "shared logits buffer holds 40 rows but caller needs 64 (vocab_size=32000)"}
    judged = compare_start(model, engine)
    assert judged["agrees"] is False and "other sizes" in judged["line"] and "held 48" in judged["line"]
    assert compare_start(model, {"cls": "AssertionError"})["agrees"] is True  # no message: the class is all there is
