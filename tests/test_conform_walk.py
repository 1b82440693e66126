"""One route from a recording to a comparison (issue 38): ``integration/walk.py`` walks every
release's recordings, and a release folder brings only its ``walk.Conformance``.

Rows are releases (the catalog's adapters), not files: a new release with recordings adds its
row to ``SMALL`` (one short stored recording of it) and nothing else."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from specstate.integration import catalog, conform, walk
from specstate.integration.adapter import ReleaseAdapter
from specstate.integration.backend import Observation
from specstate.model import Arrive, Step, get_variant

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "gpu"

#: one short stored recording of each release with a recorder (its default variant conforms)
SMALL = (DATA / "fixed" / "timing-c30-on0.jsonl.gz", DATA / "v17" / "random-0-1.jsonl.gz")


def test_a_small_recording_stands_for_every_release_with_a_recorder() -> None:
    assert sorted(conform.load(p).family for p in SMALL) == sorted(a.family for a in catalog.ADAPTERS)


@pytest.mark.parametrize("adapter", catalog.ADAPTERS, ids=lambda a: a.family)
def test_every_release_brings_a_conformance_to_the_one_route(adapter: ReleaseAdapter) -> None:
    c = adapter.conformance()
    assert isinstance(c, walk.Conformance)
    assert issubclass(c.model, walk.ModelBackend) and c.model is not walk.ModelBackend


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.parent.name)
def test_conform_graph_and_the_walk_read_one_replay(path: Path) -> None:
    """``conform`` (``adapter.check``) and ``graph --from-recording`` (``adapter.workload``) go through
    ``walk``: the same replay, the same actions, and the report counts the replay's logged steps."""
    records = conform.load(path)
    adapter = catalog.adapter_of(records)
    c = adapter.conformance()
    config, replay, real = walk.read(path, records, 5, c)
    _, actions, what = adapter.workload(path, 5, records)
    assert actions == list(replay.actions) and what == replay.describe()
    report = conform.check_recording(path, None, 5)
    assert report["mismatch_count"] == 0 and report["iterations"] == len(real) > 0
    assert report["requests"] == len(replay.rid_index)


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.parent.name)
def test_the_release_s_observer_is_what_the_walk_compares(path: Path) -> None:
    """A release's model-side observer is the only source of the model's observations: one that
    reports another batch makes the same recording mismatch at every logged step."""
    records = conform.load(path)
    c = catalog.adapter_of(records).conformance()

    class Wrong(c.model):
        def observation(self, o: object, replay: object) -> Observation:
            return replace(super().observation(o, replay), rids=(-1,))

    w = walk.walk(path, records, conform.check_pairing(path, records, None), 5, replace(c, model=Wrong))
    assert [m.field for m in w.mismatches].count("rids") == len(w.real) > 0


@pytest.mark.parametrize("adapter", catalog.ADAPTERS, ids=lambda a: a.family)
def test_the_oracle_s_differential_walks_the_same_model_side(adapter: ReleaseAdapter) -> None:
    """``ReleaseAdapter.observe`` (the oracle's differential) is ``walk.observe_actions``: the model
    stepped once per action, every batch step observed, every invariant checked."""
    from specstate.model import SpecConfig

    variant = get_variant(adapter.default_variant)
    config = SpecConfig(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)
    actions = [Arrive(8, 4), Step(), Step(), Step(), Arrive(5, 2), Step(), Step(), Step(), Step()]
    observed, violations = adapter.observe(config, actions, variant)
    again, _ = walk.observe_actions(adapter.conformance(), config, actions, variant)
    assert observed == again and violations == []
    assert 0 < len(observed) <= sum(isinstance(a, Step) for a in actions)
    assert {o.kind for o in observed} >= {"prefill", "decode"}


def test_the_step_loop_is_written_once() -> None:
    """No release folder steps the model itself or checks invariants on its own: the walk does
    (``walk.ModelBackend.observe``)."""
    owners = []
    for path in sorted((ROOT / "specstate" / "integration").glob("sglang_*/conformance.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in ("specstate.check", "specstate.model.step",
                                                                     "specstate.invariants"):
                owners.append(f"{path.parent.name}: from {node.module} import ...")
            if isinstance(node, ast.Name) and node.id in ("checked_step", "check_outcome", "initial_state"):
                owners.append(f"{path.parent.name}: {node.id}")
    assert len(list((ROOT / "specstate" / "integration").glob("sglang_*/conformance.py"))) >= 2
    assert owners == []
