"""The engine start of the 0.5.23 family (``specstate/model/sglang_0_5_23/start.py``): the config
0.5.17 refuses at start (H200-confirmed) starts on 0.5.23, because 0.5.23 sizes the shared logits
buffer for every candidate (``ModelRunner.max_decode_logits_rows``, 0.5.19) and its draft extend
takes one row per request (0.5.20); the server-argument refusals stay; the cross-release table of
``specstate check --engine all`` shows 0.5.17 failing at start and 0.5.23 starting."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from specstate.check import Run
from specstate.citations import citations_of
from specstate.cli import main
from specstate.model import get_variant
from specstate.model.sglang_0_5_23.ledger import REVIEWED_START, UNREVIEWED
from specstate.model.sglang_0_5_23.start import EngineStartRefused23
from specstate.model.sglang_0_5_17 import start as v17_start
from specstate.model.sglang_0_5_17.adaptive import candidate_steps
from specstate.model.sglang_0_5_17.start import EngineStartRefused
from specstate.model.sglang_0_5_17.variants import H200_CONFIG
from specstate.testing import check_engine_start

V17, V23 = "upstream-adaptive", "upstream-v23"
SLOTS = {"1": {"candidate_steps": [2, 3]}, "4": {"candidate_steps": [0]}}
#: the H200-confirmed 0.5.17 refusal (tests/test_v17_pressure.py): startup steps 2, a candidate 3
ABOVE = H200_CONFIG.with_(speculative_num_steps=2, speculative_num_draft_tokens=3,
                          speculative_adaptive_config=json.dumps(SLOTS))
MISSING = H200_CONFIG.with_(speculative_adaptive_config='{"1": {"candidate_steps": [1, 2]}}')


def test_the_config_0_5_17_refuses_at_start_starts_on_0_5_23() -> None:
    with pytest.raises(EngineStartRefused) as e:
        check_engine_start(ABOVE, V17)
    assert (e.value.upstream, e.value.state, e.value.asked, e.value.held) == ("AssertionError", 3, 64, 48)
    start = check_engine_start(ABOVE, V23)
    # 0.5.23: max(capture_bs) x max(max_speculative_num_draft_tokens, every candidate + 1) = 16 x 4
    assert start.logits_rows_held == max(ABOVE.cuda_graph_bs) * (max(candidate_steps(ABOVE.speculative_adaptive_config)) + 1)
    assert (start.startup_steps, start.candidates, start.logits_rows_held) == (2, (0, 2, 3), 64)
    rows = {c.runner: c.logits_rows for c in start.captures}
    assert rows == {"draft_decode@2": 0, "draft_extend@2": 16, "target_verify@2": 48, "draft_extend@0": 16,
                    "target_verify@0": 16, "draft_decode@3": 0, "draft_extend@3": 16, "target_verify@3": 64}
    assert all(r <= start.logits_rows_held for r in rows.values())
    assert Run(ABOVE, V23).config.speculative_num_steps == 2  # every command starts it first


def test_with_0_5_17_sizing_the_0_5_23_start_would_refuse_it() -> None:
    """The verdict comes from the overridden sizing: the 0.5.17 operation in its place refuses."""
    v = get_variant(V23)
    assert v.ops().graph_shared_output is not v17_start.graph_shared_output
    ops = v.ops().replace(graph_shared_output=v17_start.graph_shared_output)
    with pytest.raises(EngineStartRefused23) as e:
        ops.engine_start(ops, v.configure(ABOVE))
    assert (e.value.state, e.value.asked, e.value.held) == (3, 64, 48) and "target_verify@3" in (e.value.buffer or "")
    assert str(e.value).startswith("sglang 0.5.23 refuses this config at engine start")


def test_the_draft_extend_takes_one_row_per_request() -> None:
    """0.5.20: ``get_logits_buffer(vocab_size, rows=self.max_bs)``; 0.5.17 took ``max_bs x width``."""
    rows17 = {c.runner: c.logits_rows for c in check_engine_start(H200_CONFIG, V17).captures}
    start = check_engine_start(H200_CONFIG, V23)
    rows23 = {c.runner: c.logits_rows for c in start.captures}
    assert (rows17["draft_extend@3"], rows17["draft_extend@0"]) == (64, 64)
    assert (rows23["draft_extend@3"], rows23["draft_extend@0"]) == (16, 16)
    assert {k: v for k, v in rows23.items() if "draft_extend" not in k} == \
        {k: v for k, v in rows17.items() if "draft_extend" not in k}
    # the captures are the family's runtime states: steps 0 draft-extends at 1 token per request
    ext0 = next(c for c in start.captures if c.runner == "draft_extend@0")
    ext0_17 = next(c for c in check_engine_start(H200_CONFIG, V17).captures if c.runner == "draft_extend@0")
    assert ext0.buffer_elements < ext0_17.buffer_elements
    assert any(k.startswith("v23.select_index@0") for k, _ in start.pooled)


def test_the_server_argument_refusals_stay_and_name_0_5_23() -> None:
    with pytest.raises(EngineStartRefused23) as e:
        Run(MISSING, V23)
    assert e.value.upstream == "ValueError" and e.value.state is None
    assert e.value.where == "arg_groups/speculative_hook.py::_init_adaptive_speculative_params"
    assert str(e.value).startswith("sglang 0.5.23 refuses") and "is not in the adaptive config candidate_steps" in str(e.value)
    with pytest.raises(EngineStartRefused) as e17:
        Run(MISSING, V17)
    assert not isinstance(e17.value, EngineStartRefused23) and str(e17.value).startswith("sglang 0.5.17 refuses")


def test_the_reviewed_start_citations_are_cited_again_and_not_open() -> None:
    cited = {(Path(c.file).name, c.symbol) for c in citations_of("sglang-0.5.23")}
    reviewed = {(f, s) for f, s, release, _ in REVIEWED_START if release == "0.5.23"}
    assert len(reviewed) == len(REVIEWED_START) == 10
    assert reviewed <= cited, sorted(reviewed - cited)
    assert not reviewed & set(UNREVIEWED)


def test_check_all_shows_0_5_17_failing_at_start_and_0_5_23_starting(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    slots = tmp_path / "adaptive.json"
    slots.write_text(json.dumps(SLOTS))
    flags = (f"--speculative-algorithm EAGLE3 --speculative-adaptive --speculative-adaptive-config {slots} "
             "--speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3 "
             "--cuda-graph-max-bs-decode 16 --max-running-requests 48")
    code = main(["check", "--engine", "all", "--parts", "start,sweep", "--failures", str(tmp_path / "f"), "--",
                 *shlex.split(flags)])
    out = capsys.readouterr().out
    assert code == 1, out
    rows = {cells[0]: cells[1:] for line in out.splitlines()
            if (cells := [c.strip() for c in line.strip().strip("|").split(" | ")])[0].startswith("sglang-")}
    assert rows["sglang-0.5.17"][:5] == ["0.5.17", "upstream-adaptive", "failed", "not run", "FAIL"]
    assert "expected 48, got 64" in rows["sglang-0.5.17"][5] and "GraphSharedOutput.get" in rows["sglang-0.5.17"][5]
    assert rows["sglang-0.5.23"] == ["0.5.23", "upstream-v23", "passed", "passed", "pass", ""]
    # the verdict line groups the families by their verdict: a passing family is never listed as failing
    assert out.splitlines()[-1] == ("verdict: FAIL: FAIL on sglang-0.5.17; refused on sglang-0.5.12, sglang-0.5.9; "
                                    "pass on sglang-0.5.23"), out
