"""The meta-test of the invariant registry (``tests/invariant_registry.py``): every named
invariant, in every generation, has a violating case in the suite (a mutation of
``tests/mutations.py``, a known-bug variant or a user's variant of ``tests/user_variants``) whose
first bad step violates it while the corrected base passes the same story, and a positive
control (a correct release's run where its subject is present, changes, and it holds); or, where
it cannot fire, a tested claim that its subject never appears. A new invariant fails here until
it has all of that."""

from __future__ import annotations

import functools
from typing import Hashable

import pytest

from specstate.invariants import all_invariants
from specstate.invariants._core import _INVARIANTS, invariant
from specstate.model import as_variant
from specstate.scenarios import play_scenario
from tests.invariant_registry import COVERAGE, GENERATIONS, SUBJECTS, Case, Covered, Story, Vacuous
from tests.mutations import MUTATIONS, REGISTRY_MUTATIONS, V2_MUTATIONS

FAMILIES = {"v1": {"sglang-0.5.12"}, "v2": {"sglang-0.5.17", "sglang-0.5.23"}}


def missing_entries() -> list[str]:
    """What the registry lacks for the invariants registered now."""
    out = [f"{i.name}: no subject in SUBJECTS" for i in all_invariants() if i.name not in SUBJECTS]
    out += [f"{i.name} ({g}): no entry in COVERAGE (a violating case and a positive control, or Vacuous)"
            for i in all_invariants() for g in GENERATIONS if (i.name, g) not in COVERAGE]
    out += [f"{i.name}: no Covered entry in any generation (a vacuous invariant)" for i in all_invariants()
            if not any(isinstance(COVERAGE.get((i.name, g)), Covered) for g in GENERATIONS)]
    return out


def test_every_invariant_is_registered_with_cases() -> None:
    assert missing_entries() == [], "add to tests/invariant_registry.py:\n" + "\n".join(missing_entries())


def test_the_registry_names_only_registered_invariants() -> None:
    names = {i.name for i in all_invariants()}
    assert set(SUBJECTS) <= names and {n for n, _ in COVERAGE} <= names and {g for _, g in COVERAGE} <= set(GENERATIONS)


def test_a_new_invariant_without_cases_fails_the_meta_test() -> None:
    @invariant("registry-probe", "nowhere")
    def probe(o):  # noqa: ANN001, ANN202
        return iter(())

    try:
        assert any(m.startswith("registry-probe") for m in missing_entries())
    finally:
        del _INVARIANTS["registry-probe"]


def _params(kind: type) -> list[tuple[str, str, object]]:
    return [(n, g, e) for (n, g), e in COVERAGE.items() if isinstance(e, kind)]


VIOLATING = [pytest.param(n, g, c, id=f"{n}-{g}-{i}") for n, g, e in _params(Covered)
             for i, c in enumerate(e.violating)]  # type: ignore[attr-defined]
CONTROLS = [pytest.param(n, g, s, v, id=f"{n}-{g}-{s.scenario}-{v}") for n, g, e in _params(Covered)
            for s in e.controls for v in GENERATIONS[g]]  # type: ignore[attr-defined]
VACUOUS = [pytest.param(n, g, e, v, id=f"{n}-{g}-{v}") for n, g, e in _params(Vacuous) for v in GENERATIONS[g]]


def _in_the_suite(v: object) -> bool:
    """A mutation of tests/mutations.py, a known bug, or a user's variant of tests/user_variants."""
    if isinstance(v, str) and v.startswith("tests.user_variants."):
        return True
    var = as_variant(v)  # type: ignore[arg-type]
    mutants = {m.name for m in MUTATIONS + V2_MUTATIONS + REGISTRY_MUTATIONS}
    return var.name in mutants or (var.expected_invariant is not None and not var.correct)


@pytest.mark.parametrize("name,generation,case", VIOLATING)
def test_the_violating_case_fires(name: str, generation: str, case: Case) -> None:
    var = as_variant(case.variant)  # type: ignore[arg-type]
    assert _in_the_suite(case.variant), f"{var.name} is not a mutation, known bug or user variant of the suite"
    assert var.family_name in FAMILIES[generation], f"{var.name} runs {var.family_name}, not {generation}"
    r = play_scenario(case.story.scenario, var, case.story.seed)
    fired = sorted({v.invariant for v in r.violations})
    assert name in fired, f"{var.name} on {case.story.scenario} ({case.why}): first bad step violates {fired}"
    if not case.base_runs:
        return
    base = play_scenario(case.story.scenario, var.base or "fixed-threshold", case.story.seed)
    assert base.ok, f"the corrected base {var.base} fails the same story: {base.first.describe()}"  # type: ignore[union-attr]


@functools.lru_cache(maxsize=None)
def _observed(story: Story, variant: str) -> tuple[dict[str, list[Hashable]], bool, str]:
    """One run of ``story`` under ``variant``: every invariant's subject values (present ones), whether
    it held, its first violation."""
    seen: dict[str, list[Hashable]] = {n: [] for n in SUBJECTS}

    def observe(o: object) -> None:
        for n, subject in SUBJECTS.items():
            value = subject(o)  # type: ignore[arg-type]
            if value is not None:
                seen[n].append(value)

    r = play_scenario(story.scenario, variant, story.seed, on_step=observe)
    return seen, r.ok, r.first.describe() if r.first else ""


def _subjects(name: str, story: Story, variant: str) -> tuple[list[Hashable], bool, str]:
    seen, ok, first = _observed(story, variant)
    return seen[name], ok, first


@pytest.mark.parametrize("name,generation,story,variant", CONTROLS)
def test_the_positive_control_exercises_the_subject_and_holds(name: str, generation: str, story: Story,
                                                              variant: str) -> None:
    present, ok, first = _subjects(name, story, variant)
    assert ok, first
    assert len(set(present)) >= 2, (f"{name}'s subject on {story.scenario} under {variant}: present in "
                                    f"{len(present)} steps, {len(set(present))} distinct values (need 2)")


@pytest.mark.parametrize("name,generation,entry,variant", VACUOUS)
def test_a_vacuous_entry_never_shows_its_subject(name: str, generation: str, entry: Vacuous, variant: str) -> None:
    present, ok, first = _subjects(name, entry.story, variant)
    assert ok, first
    assert present == [], f"{name} is not vacuous in {generation}: its subject appears ({present[:3]})"


REBASED = [pytest.param(n, c, release, id=f"{n}-{as_variant(c.variant).name}-{release}")  # type: ignore[arg-type]
           for n, g, e in _params(Covered) if g == "v2" for c in e.violating  # type: ignore[attr-defined]
           for release in GENERATIONS[g]
           if as_variant(c.variant).overrides and as_variant(c.variant).base not in (None, release)]  # type: ignore[arg-type]


@pytest.mark.parametrize("name,case,release", REBASED)
def test_a_v2_violating_case_fires_on_every_v2_release(name: str, case: Case, release: str) -> None:
    """The generation's other releases (0.5.23) share the mutated operation: the same overrides on
    their correct variant violate the same invariant in the same story."""
    from specstate.model import Variant

    var = as_variant(case.variant)  # type: ignore[arg-type]
    rebased = Variant(f"{var.name}-on-{release}", var.summary, overrides=dict(var.overrides), base=release,
                      config_changes=dict(var.config_changes))
    r = play_scenario(case.story.scenario, rebased, case.story.seed)
    assert name in {v.invariant for v in r.violations}, r.first.describe() if r.first else "no violation"
