"""Conformance can fail: every deliberate model mutation (``tests/mutations.py``) is caught by
replaying the H200 recordings against it, while the unmutated model passes the same ones."""

from __future__ import annotations

import pytest

from tests.mutations import FIRST, MUTATIONS, catch, recordings


def test_there_is_a_mutation_per_operation_family() -> None:
    families = {m.summary.split("]")[0].strip("[") for m in MUTATIONS}
    assert len(MUTATIONS) >= 15
    assert {"KV", "draft KV", "filter identity", "merge identity", "finish", "admission", "retraction", "chunking",
            "prefix match", "graph choice", "padding", "token counts", "seq_lens_sum"} <= families


@pytest.mark.slow  # 15 CPU s: the fast tier's conformance rows show the unmutated model conforms (test_conformance.py)
def test_the_unmutated_model_survives_the_recordings_the_mutants_die_on() -> None:
    from specstate.model import get_variant

    assert catch(get_variant("fixed-threshold"), [r for r in FIRST if r in recordings()]).recording is None


@pytest.mark.parametrize("mutant", MUTATIONS, ids=lambda m: m.name)
def test_conformance_catches(mutant) -> None:  # noqa: ANN001
    c = catch(mutant)
    assert c.recording is not None, f"{mutant.name} ({mutant.summary}) survived every recording"
