"""The shared code asks the releases for what it once imported by name (issue 38): the ``Ops``
table's defaults (``Release.defaults``), the overlap scheduler's initial part
(``Release.overlap_start``), the search's commuting aborts (``Release.overrides``) and the launch's
adaptive config reader (``ReleaseRules.adaptive_reader``)."""

from __future__ import annotations

import pytest

from specstate.errors import InternalError
from specstate.model import SpecConfig, get_variant
from specstate.model.ops import DEFAULT_OPS, DEFAULT_OVERLAP_START, OP_NAMES
from specstate.model.releases import releases
from specstate.model.state import OverlapPart, build_initial_state
from specstate.model.step import initial_state

OVERLAP = SpecConfig().with_(disable_overlap_schedule=False)


def test_each_release_default_is_the_tables_and_given_once() -> None:
    given: dict[str, str] = {}
    for r in releases():
        for name, fn in r.defaults.items():
            assert name in OP_NAMES, (r.name, name)
            assert name not in given, (name, given.get(name), r.name)
            assert getattr(DEFAULT_OPS, name) is fn, (r.name, name)
            given[name] = r.name
    assert given, "no release gives a default operation"
    # the rest are the shared modules' own: none of them lives in a release folder
    shared = [n for n in OP_NAMES if n not in given]
    assert shared and all(".sglang_" not in getattr(DEFAULT_OPS, n).__module__ for n in shared), shared


def test_the_overlap_start_is_given_by_one_release_and_handed_to_the_state() -> None:
    givers = [r.name for r in releases() if r.overlap_start is not None]
    assert len(givers) == 1 and DEFAULT_OVERLAP_START is not None, givers
    s = initial_state(OVERLAP)
    assert isinstance(s.v2, OverlapPart) and s.v2 == DEFAULT_OVERLAP_START(OVERLAP)
    assert initial_state(SpecConfig()).v2 is None
    with pytest.raises(InternalError, match="overlap scheduler"):
        build_initial_state(OVERLAP, None)


def test_the_search_commutes_the_releases_own_aborts_not_a_variants() -> None:
    from specstate.fuzz.search import _release_aborts

    aborts = _release_aborts()
    assert get_variant("upstream-adaptive").ops().abort in aborts
    assert get_variant("finish-before-filter").ops().abort not in aborts


def test_every_adaptive_release_names_its_adaptive_config_reader() -> None:
    from specstate.server_args._tables import RULES

    adaptive = [r for r in RULES.values() if r.adaptive_v2]
    assert adaptive
    for r in adaptive:
        reader = r.adaptive_reader_module()
        assert all(callable(getattr(reader, f)) for f in ("config_from_json", "candidate_steps", "ignored_keys")), r
    with pytest.raises(InternalError, match="adaptive_reader"):
        next(r for r in RULES.values() if not r.adaptive_v2).adaptive_reader_module()
