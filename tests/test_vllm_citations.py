"""Every citation in the vLLM family's files (``specstate/model/vllm_0_34_0/``, its folder of the same
name in ``specstate/integration/`` and its ``CITED_OUTSIDE``) names a file and symbol of vLLM 0.34.0's source; the family's files are its
own, not the SGLang core's (``citations.py::_files``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specstate.citations import _files, check_vllm_citations, vllm_files
from specstate.model.releases import core_family
from specstate.upstream import cache_dir

SOURCE = cache_dir() / "vllm-0.34.0" / "vllm"


@pytest.mark.skipif(not SOURCE.is_dir(), reason="vllm 0.34.0 not unpacked (docs/vllm.md, 'The CPU oracle')")
def test_every_vllm_citation_exists_in_vllm_0_34_0() -> None:
    n, failures = check_vllm_citations(SOURCE)
    assert n >= 40 and failures == []


def test_a_wrong_citation_is_caught(tmp_path: Path) -> None:
    src = tmp_path / "vllm" / "v1" / "core" / "sched"
    src.mkdir(parents=True)
    (src / "scheduler.py").write_text("class Scheduler:\n    def __init__(self):\n        self.running = []\n"
                                      "    def schedule(self):\n        pass\n")
    _, failures = check_vllm_citations(tmp_path / "vllm")
    assert "v1/request.py::Request.num_computed_tokens: no such file in vLLM" in failures
    assert "v1/core/sched/scheduler.py::Scheduler.update_from_output: no such symbol" in failures
    assert not any(f.startswith(("v1/core/sched/scheduler.py::Scheduler.schedule:",
                                 "v1/core/sched/scheduler.py::Scheduler.running:")) for f in failures)


def test_the_vllm_files_are_not_the_sglang_cores() -> None:
    mine = set(vllm_files())
    assert any(p.name == "engine.py" for p in mine)
    assert {"invariants.py", "check.py", "oracle.py"} <= {p.name for p in mine if "integration" in p.parts}
    assert not mine & set(_files(Path(__file__).resolve().parents[1], core_family()))
