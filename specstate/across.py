"""One check across releases: the same trace, or the same fuzz budget, on every engine family,
as one table (release range, variant, verdict, first violation).

Owns nothing; a library for ``--engine all`` (``specstate engines --trace T.json`` and
``specstate engines --fuzz PROFILE`` print its table today; ``reproduce`` / ``fuzz`` / ``check``
can call ``replay_across`` / ``fuzz_across`` and ``format_table``). Each family runs its default
variant (``Family.default_variant``, the release as shipped) unless ``variants`` names another.

A trace means the same on every family: ``Arrive`` / ``Abort`` / ``Step`` are the shared action
vocabulary (``specstate.model.actions``), and each family's ``prepare`` makes the trace's config
one it runs under. A config a family cannot start under (``InvalidConfig`` when its run is set
up) is the verdict ``cannot start``, with the reason; an action the family's state does not
admit (``InvalidAction``) is ``action N does not exist here``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from specstate.errors import InvalidAction, InvalidConfig
from specstate.model.actions import Action
from specstate.model.config import SpecConfig

__all__ = ["ReleaseRow", "replay_across", "fuzz_across", "format_table"]


@dataclass(frozen=True)
class ReleaseRow:
    family: str  #: ``sglang-0.5.23``
    releases: tuple[str, ...]  #: the range it stands for (``Family.releases``)
    variant: str
    #: ``pass``, ``FAIL``, ``cannot start``, ``action N does not exist here``, or (fuzz) ``incomplete``:
    #: no violation, but a wanted witness never reached (the budget did not explore the switch)
    verdict: str
    first: str = ""  #: the first violation (or the reason it could not start)
    steps: int = 0

    def to_json(self) -> dict[str, object]:
        return {"family": self.family, "releases": list(self.releases), "variant": self.variant,
                "verdict": self.verdict, "first": self.first, "steps": self.steps}


def _families(families: Iterable[str] | None) -> list[str]:
    from specstate.model.families import family_names

    return list(families) if families is not None else family_names()


def _replay_one(family: str, variant: str, config: SpecConfig, actions: Sequence[Action]) -> ReleaseRow:
    from specstate.check import Run, StopRun
    from specstate.model.families import get_family

    releases = get_family(family).releases
    try:
        run = Run(config, variant)
    except InvalidConfig as e:
        return ReleaseRow(family, releases, variant, "cannot start", str(e))
    for i, a in enumerate(actions):
        try:
            run.apply(a)
        except StopRun:
            break
        except InvalidAction as e:
            return ReleaseRow(family, releases, variant, f"action {i} does not exist here", str(e), i)
    r = run.result()
    first = r.first.describe().splitlines()[0] if r.first is not None else ""
    return ReleaseRow(family, releases, variant, "pass" if r.ok else "FAIL", first, r.steps)


def replay_across(config: SpecConfig, actions: Sequence[Action], *, families: Iterable[str] | None = None,
                  variants: Mapping[str, str] | None = None) -> list[ReleaseRow]:
    """``actions`` under ``config`` on every family (its default variant, or ``variants[family]``)."""
    from specstate.model.families import get_family

    return [_replay_one(f, (variants or {}).get(f, get_family(f).default_variant), config, actions)
            for f in _families(families)]


def fuzz_across(profile: str = "ci", *, max_examples: int | None = None, seed: int | None = None,
                families: Iterable[str] | None = None, variants: Mapping[str, str] | None = None) -> list[ReleaseRow]:
    """``specstate.testing.fuzz`` of every family's default variant under one budget."""
    from specstate.model.families import get_family
    from specstate.testing import fuzz

    rows = []
    for f in _families(families):
        variant = (variants or {}).get(f, get_family(f).default_variant)
        r = fuzz(variant, profile=profile, max_examples=max_examples, seed=seed, quiet=True)
        first = r.violation.describe().splitlines()[0] if r.violation is not None else (r.problems[0] if r.problems else "")
        verdict = "pass" if r.ok else ("FAIL" if r.violation is not None else "incomplete")
        rows.append(ReleaseRow(f, get_family(f).releases, variant, verdict, first, int(r.details.get("steps", 0) or 0)))
    return rows


def format_table(rows: Sequence[ReleaseRow]) -> str:
    """A Markdown table: family, releases, variant, verdict, first violation."""
    lines = ["| family | releases | variant | verdict | first violation |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        first = r.first.replace("|", "\\|")[:160]
        lines.append(f"| {r.family} | {', '.join(r.releases)} | {r.variant} | {r.verdict} | {first} |")
    return "\n".join(lines)
