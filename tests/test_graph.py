"""``specstate graph``: the abstract graph read back as DOT / SVG / JSON text."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from specstate.cli import main
from specstate.fuzz.trace import Trace, save_trace
from specstate.graph import abstract_state, exploration_graph, to_dot
from specstate.graph.abstraction import AbstractState
from specstate.graph.render import RED, steps_label
from specstate.model import Arrive, Step, initial_state
from specstate.scenarios import SEED_CONFIG

SEED_CRASH = [Arrive(60, 32) for _ in range(10)] + [Step(), Step()]  # C = 10, bs 10 > threshold 5
HAS_DOT = shutil.which("dot") is not None


def _dot(tmp_path: Path, *args: str) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "g.dot"
    assert main(["graph", *args, "--out", str(out)]) == 0
    return out.read_text()


@pytest.fixture(scope="module")
def default_dot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``graph --variant V --out g.dot`` (the default abstract graph, about 2 CPU s each) for the
    naive and the fixed patch, once for the module: the tests that read the default graph read
    these; ``test_dot_and_json_are_byte_identical_across_runs`` compares a fresh run with them."""
    folder = tmp_path_factory.mktemp("default-dot")
    return {v: _dot(folder / v, "--variant", v) for v in ("naive-threshold", "fixed-threshold")}


def _edges(dot: str) -> list[str]:
    return [line for line in dot.splitlines() if " -> " in line and "invis" not in line]


def test_naive_has_a_red_worker_crash_edge_at_the_first_fallback_and_fixed_has_none(default_dot: dict[str, str]) -> None:
    naive, fixed = default_dot["naive-threshold"], default_dot["fixed-threshold"]
    red = [e for e in _edges(naive) if f'color="{RED}"' in e]
    assert any("decode-fallback" in e and "worker-crash: RuntimeError 160 vs 10" in e
               and e.startswith('  "> T|empty|-|draft input|EXTEND|eager"') for e in red), red
    assert '"FAIL|mode-consistency|worker-crash" [label="FAILS\\nmode-consistency\\nworker-crash"' in naive
    assert RED not in fixed.split("subgraph cluster_legend")[0] and "FAIL|" not in fixed


def test_node_and_edge_labels_name_the_abstract_state_and_operation(default_dot: dict[str, str]) -> None:
    dot = default_dot["fixed-threshold"]
    assert 'label="bs empty · queue empty\\nspec - · none\\nno forward yet"' in dot and 'peripheries="2"' in dot
    assert "spec on · draft input\\nTARGET_VERIFY graph:TARGET_VERIFY" in dot
    assert "spec off · none\\nDECODE" in dot  # the fixed fallback: a plain decode, spec_info cleared
    for op in ("arrive", "prefill", "decode-spec", "decode-fallback", "cross-up", "cross-down", "idle"):
        assert re.search(rf'label="{op} x\d+"', dot), op
    assert "legend" in dot and "dashed: allowed by the model" in dot


def test_trace_path_is_bold_and_numbered_in_step_order(tmp_path: Path) -> None:
    trace = save_trace(Trace(SEED_CONFIG, "naive-threshold", SEED_CRASH), tmp_path, name="seed.json")
    dot = _dot(tmp_path, "--variant", "naive-threshold", "--trace", str(trace))
    bold = [e for e in _edges(dot) if "bold" in e]
    labels = sorted(re.search(r'label="(#[^\\"]*)', e).group(1) for e in bold)  # type: ignore[union-attr]
    assert labels == ["#1", "#11", "#12", "#2-#10"]  # first arrival, 9 more (queue self-loop), prefill, crash
    crash = next(e for e in bold if "#12" in e)
    assert f'color="{RED}"' in crash and "decode-fallback" in crash and "160 vs 10" in crash
    assert steps_label([1, 2, 3, 7, 9, 10]) == "#1-#3, #7, #9-#10"


def test_fuzz_input_draws_untaken_allowed_edges_dashed(tmp_path: Path) -> None:
    dot = _dot(tmp_path, "--variant", "fixed-threshold", "--from-fuzz", "--runs", "2")
    dashed = [e for e in _edges(dot) if "dashed" in e]
    assert dashed and all("(untaken)" in e for e in dashed)
    assert any("dashed" not in e and re.search(r" x\d+", e) for e in _edges(dot))


def test_recording_input_replays_through_conformance(tmp_path: Path) -> None:
    rec = Path("tests/data/gpu/naive-graph/seed-sweep.jsonl.gz")
    if not rec.exists():
        pytest.skip(f"no recording at {rec}")
    dot = _dot(tmp_path, "--variant", "naive-threshold", "--from-recording", str(rec))
    assert "recording seed-sweep.jsonl.gz" in dot
    assert any("worker-crash: RuntimeError 160 vs 10" in e and "dashed" not in e for e in _edges(dot))


def test_from_recording_reads_an_overlap_release_recording_too(tmp_path: Path) -> None:
    """A 0.5.17 recording, read by its release's adapter (``workload``), under its family's variant."""
    out = tmp_path / "v17.json"
    assert main(["graph", "--variant", "upstream-adaptive", "--from-recording", "tests/data/gpu/v17/g000.jsonl.gz",
                 "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert any(link.get("taken") for link in data["links"]) and "recorded loops" in json.dumps(data)


def test_dot_and_json_are_byte_identical_across_runs(tmp_path: Path, default_dot: dict[str, str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert main(["graph", "--variant", "naive-threshold", "--out", str(out)]) == 0
    assert a.read_bytes() == b.read_bytes()
    data = json.loads(a.read_text())
    assert data["multigraph"] and any(link["violations"] for link in data["links"])
    assert _dot(tmp_path, "--variant", "naive-threshold") == default_dot["naive-threshold"]  # two runs


def test_without_dot_it_writes_dot_and_json_and_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no `dot` on PATH
    out = tmp_path / "g.svg"
    assert main(["graph", "--variant", "naive-threshold", "--out", str(out)]) == 2  # a missing program with its install command, as a missing package (docs/check.md exit codes)
    assert not out.exists() and (tmp_path / "g.dot").exists() and (tmp_path / "g.json").exists()
    err = capsys.readouterr().err
    assert "apt-get install graphviz" in err and f"dot -Tsvg {tmp_path / 'g.dot'} -o {out}" in err
    assert not list(tmp_path.glob(".*.tmp"))  # atomic: no temporaries left


@pytest.mark.skipif(not HAS_DOT, reason="graphviz's dot is not installed")
def test_svg_carries_labels_colours_and_legend(tmp_path: Path) -> None:
    # speed is measured by `python -m benchmarks` (docs/performance.md), not asserted here
    out = tmp_path / "g.svg"
    assert main(["graph", "--variant", "naive-threshold", "--out", str(out)]) == 0
    svg = out.read_text()
    assert "160 vs 10" in svg and f'stroke="{RED}"' in svg and "legend" in svg


def test_bad_extension_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["graph", "--out", str(tmp_path / "g.txt")]) == 2


def test_abstraction_is_replaceable() -> None:
    def coarse(state, last):  # type: ignore[no-untyped-def]
        full = abstract_state(state, last)
        return AbstractState(full.batch, "-", full.spec, "-", "-", "-")

    g = exploration_graph(SEED_CONFIG, "fixed-threshold", abstraction=coarse)
    assert len(g.nodes) < len(exploration_graph(SEED_CONFIG, "fixed-threshold").nodes)
    assert abstract_state(initial_state(SEED_CONFIG), None).key == "empty|empty|-|none|-|-"
    assert "FAIL" not in to_dot(g)
