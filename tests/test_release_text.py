"""Messages that name a release are built from the release objects (issue 38: the shared code names
no release): the missing-sglang line names the shared core's release, which the ``gpu`` extra pins;
the v1 family's refusals of a spec-v2 launch name the refusing family and the oldest family that
models adaptive speculation (``ReleaseRules.adaptive_v2``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from specstate._deps import missing_dependency
from specstate.errors import UsageError
from specstate.model.releases import core_family, get_release
from specstate.server_args import launch_tokens, parse_launch

ROOT = Path(__file__).resolve().parents[1]
LINE = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4 --cuda-graph-max-bs 16")


def test_the_missing_sglang_line_names_the_gpu_extras_release() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    (pin,) = [p for p in extra if p.startswith("sglang==")]
    release = get_release(core_family()).version
    assert pin == f"sglang=={release}"
    found = missing_dependency(ModuleNotFoundError("No module named 'sglang'", name="sglang.srt"), "replay")
    assert found is not None and found.package == f"sglang {release}" and pin in found.install
    assert missing_dependency(ModuleNotFoundError("x", name="not_a_known_package")) is None


def _refusal(line: str) -> str:
    with pytest.raises(UsageError) as e:
        parse_launch(launch_tokens(server_args=line, variant="fixed-threshold"), "fixed-threshold")
    return str(e.value)


def test_the_v1_familys_refusals_name_the_families_asked_of_the_rules() -> None:
    adaptive = _refusal(LINE + " --disable-overlap-schedule --speculative-adaptive")
    assert re.search(r"not modelled by the sglang-0\.5\.12 family .* the sglang-0\.5\.17 family models adaptive", adaptive)
    overlap = _refusal(LINE)
    assert "sglang 0.5.12 then runs spec v2" in overlap and "the sglang-0.5.12 family does not model" in overlap
    assert overlap.endswith("add --disable-overlap-schedule, or --engine sglang-0.5.17"), overlap
