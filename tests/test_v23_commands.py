"""The 0.5.23 family through the commands as the other families: ``run``, ``explore``,
``graph`` (the graph's threshold and the fuzz steering come from the family object), and a trace
of a 0.5.23 variant replays through ``reproduce``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specstate.cli import main
from specstate.fuzz.trace import Trace, save_trace
from specstate.model import Arrive, Step, get_variant
from specstate.model.families import get_family
from specstate.scenarios_v2 import SMALL_V2


def test_run_explore_and_graph_pass_on_0_5_23(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--engine", "sglang-0.5.23", "--scenario", "oscillate", "--quiet"]) == 0
    assert "PASS  oscillate / upstream-v23" in capsys.readouterr().out
    assert main(["explore", "--engine", "sglang-0.5.23", "--max-bs", "2", "--depth", "5", "--quiet"]) == 0
    assert "no violation" in capsys.readouterr().out
    out = tmp_path / "g.json"
    assert main(["graph", "--engine", "sglang-0.5.23", "--levels", "1,2,5", "--out", str(out), "--quiet"]) == 0
    graph = json.loads(out.read_text())
    assert graph["nodes"] and not any(n.get("failure") for n in graph["nodes"])
    assert graph["links"] and not any(e.get("violations") for e in graph["links"])
    # the same command on a known bug of the base family draws its failure (the check can fail)
    assert main(["graph", "--variant", "v2-single-reserve", "--levels", "1,2,5", "--out", str(out), "--quiet"]) == 0  # drawn, not judged
    assert any(n.get("failure") for n in json.loads(out.read_text())["nodes"])


def test_the_family_object_gives_threshold_and_configs() -> None:
    fam = get_family("sglang-0.5.23")
    cfg = fam.prepare(fam.graph_config or SMALL_V2)
    # the threshold comes with the variant's family (graph/ binds it), not from the config's scheduler loop
    assert get_variant("upstream-v23").engine_family is fam
    assert fam.switch_threshold(cfg) == 5  # steps 3 up to 5 requests, steps 0 from 6
    assert fam.adaptive and not get_family("sglang-0.5.12").adaptive
    assert get_variant("upstream-v23").configure(SMALL_V2).disable_overlap_schedule is False


def test_a_0_5_23_trace_reproduces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = save_trace(Trace(SMALL_V2, "upstream-v23", [Arrive(8, 4), Step(), Step(accept=(2,)), Step()]), tmp_path)
    assert main(["reproduce", str(path)]) == 0
    assert main(["run", "--engine", "sglang-0.5.23", "--variant", "upstream-adaptive", "--quiet"]) == 2
    assert "Expected a variant of --engine sglang-0.5.23" in capsys.readouterr().err
