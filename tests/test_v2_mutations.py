"""The v2 family's mutations (``tests/mutations.py``: skip the pending chunked abort, insert on that
abort, an unchecked engine start, the EMA fed the newest launch's batch size, and the conformance's
old retraction pairing) are each caught by a saved 0.5.17 recording or the H200's start configs."""

from __future__ import annotations

import pytest

from tests.mutations import V2_MUTATIONS, V2_SHIFT, v2_catch


@pytest.mark.parametrize("mutant", list(V2_MUTATIONS) + [V2_SHIFT], ids=lambda m: m if isinstance(m, str) else m.name)
def test_a_saved_recording_catches_the_v2_mutation(mutant) -> None:  # noqa: ANN001
    c = v2_catch(mutant)
    assert c.recording is not None, f"{c.mutation} survived every recording"


def test_every_new_v2_path_has_a_mutation() -> None:
    families = {m.summary.split("]")[0].strip("[") for m in V2_MUTATIONS}
    assert families == {"abort", "start", "provenance"}
