"""One check across releases: the same trace, or the same fuzz budget, on every engine family,
as one table (release range, variant, verdict, first violation).

Owns nothing; a library for ``--engine all``: ``specstate check --engine all -- FLAGS``
(``check_across``: the launch checked on every family whose release accepts the flags),
``specstate fuzz --engine all`` (``fuzz_across``), ``specstate reproduce --engine all TRACE``
(``replay_across``), and ``specstate engines --trace T.json`` / ``--fuzz PROFILE``; all print
``format_table`` (``specstate/cli/across.py``). Each family runs its default
variant (``Family.default_variant``, the release as shipped) unless ``variants`` names another.

A trace means the same on every family: ``Arrive`` / ``Abort`` / ``Step`` are the shared action
vocabulary (``specstate.model.actions``), and each family's ``prepare`` makes the trace's config
one it runs under. A config a family cannot start under (``InvalidConfig`` when its run is set
up) is the verdict ``cannot start``, with the reason; an action the family's state does not
admit (``InvalidAction``) is ``action N does not exist here``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from specstate.errors import InvalidAction, InvalidConfig
from specstate.model.actions import Action
from specstate.model.config import SpecConfig

__all__ = ["ReleaseRow", "AcrossResult", "replay_across", "fuzz_across", "check_across", "format_table"]


@dataclass(frozen=True)
class ReleaseRow:
    family: str  #: ``sglang-0.5.23``
    releases: tuple[str, ...]  #: the range it stands for (``Family.releases``)
    variant: str
    #: ``pass``, ``FAIL``, ``cannot start``, ``action N does not exist here``, (fuzz) ``incomplete``:
    #: no violation, but a wanted witness never reached (the budget did not explore the switch), or
    #: (check) ``refused``: the release does not accept the launch flags (``first`` says why)
    verdict: str
    first: str = ""  #: the first violation (or the reason it could not start / was refused)
    steps: int = 0
    #: (check) each part's status (``passed``, ``failed``, ``not modelled``, ``not run``), in order
    parts: tuple[tuple[str, str], ...] = ()
    details: Mapping[str, object] | None = None  #: (check) the family's ``CheckResult.to_json()``

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"family": self.family, "releases": list(self.releases), "variant": self.variant,
                                  "verdict": self.verdict, "first": self.first, "steps": self.steps}
        if self.parts:
            out["parts"] = dict(self.parts)
        if self.details is not None:
            out["check"] = dict(self.details)
        return out


@dataclass(frozen=True)
class AcrossResult:
    """The rows of one ``--engine all`` command, as ``--json`` prints them."""

    kind: str  #: ``check``, ``fuzz``, ``reproduce``
    rows: tuple[ReleaseRow, ...]
    failing: tuple[str, ...] = ("FAIL",)  #: the verdicts that fail the command (exit 1)

    @property
    def ok(self) -> bool:
        return not any(r.verdict in self.failing for r in self.rows)

    @property
    def exit_code(self) -> int:
        """1 when a family fails; else 4 when one is not judged; else 0 (``check_result.EXIT_CODES``)."""
        return 1 if not self.ok else 4 if any(r.verdict in ("not judged", "incomplete") for r in self.rows) else 0

    def to_json(self) -> dict[str, object]:
        from specstate.check_result import coverage_block

        coverage = coverage_block(judged=f"{self.kind} on every family: " + ", ".join(f"{r.family} {r.verdict}"
                                                                                   for r in self.rows),
                                  not_judged=[{"what": r.family, "parts": "every part", "reason": r.first}
                                              for r in self.rows if r.verdict in ("not judged", "incomplete")])
        verdict = "violation" if self.exit_code == 1 else "not judged" if self.exit_code == 4 else "pass"
        return {"kind": self.kind, "engine": "all", "ok": self.exit_code == 0, "verdict": verdict,
                "exit_code": self.exit_code, "coverage": coverage, "rows": [r.to_json() for r in self.rows]}


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
        gaps = [x["reason"] for x in r.coverage["not_judged"]]
        first = r.violation.describe().splitlines()[0] if r.violation is not None else ([*r.problems, *gaps] or [""])[0]
        verdict = "pass" if r.ok else "FAIL" if r.verdict == "violation" else "incomplete"  # incomplete: not judged
        rows.append(ReleaseRow(f, get_family(f).releases, variant, verdict, first, int(r.details.get("steps", 0) or 0)))
    return rows


def _check_row(family: str, tokens_for: Callable[[str], Sequence[str]], run_check: Callable[..., object],
               deployment: object = None) -> ReleaseRow:
    from specstate.errors import UsageError
    from specstate.model.families import get_family
    from specstate.server_args import parse_launch

    fam = get_family(family)
    variant = fam.default_variant
    try:
        launch = parse_launch(tokens_for(variant), variant, deployment, read_model_path=True)  # type: ignore[arg-type]
    except UsageError as e:
        return ReleaseRow(family, fam.releases, variant, "refused", str(e))
    try:
        result = run_check(launch)
    except InvalidConfig as e:  # a part that sets up a run (fuzz alone) on a config the engine refuses
        return ReleaseRow(family, fam.releases, variant, "cannot start", str(e))
    parts = tuple((p["name"], p["status"]) for p in result.details["parts"])  # type: ignore[attr-defined]
    verdict = {"pass": "pass", "not judged": "not judged"}.get(result.verdict, "FAIL")  # type: ignore[attr-defined]
    gaps = [f"not judged: {x.get('flag') or x.get('what')}" for x in result.coverage["not_judged"]]  # type: ignore[attr-defined]
    first = "" if result.ok else ([*result.problems, *gaps] or [""])[0]  # type: ignore[attr-defined]
    return ReleaseRow(family, fam.releases, variant, verdict,
                      first.splitlines()[0] if first else "", 0, parts, result.to_json())  # type: ignore[attr-defined]


def check_across(tokens_for: Callable[[str], Sequence[str]], run_check: Callable[..., object], *,
                 families: Iterable[str] | None = None, deployment: object = None) -> list[ReleaseRow]:
    """``specstate check`` of one launch on every family's default variant: ``tokens_for(variant)``
    gives the flags (a ``--config`` file is read per release), ``run_check(launch)`` the
    ``CheckResult`` (``launch_check.check_launch`` with the command's parts and budget). A release
    whose parser or rules refuse the flags is the row ``refused``, with sglang's reason; one whose
    engine refuses the config outside the ``start`` part (``fuzz`` alone) is ``cannot start``.
    ``deployment``: the model and GPU (``server_args.deployment_of``), each release deriving its own settings."""
    return [_check_row(f, tokens_for, run_check, deployment) for f in _families(families)]


def format_table(rows: Sequence[ReleaseRow]) -> str:
    """A Markdown table: family, releases, variant, (check: one column per part), verdict, first violation."""
    names = list(dict.fromkeys(n for r in rows for n, _ in r.parts))
    head = ["family", "releases", "variant", *names, "verdict", "first violation"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        status = dict(r.parts)
        first = r.first.replace("|", "\\|")[:160]
        cells = [r.family, ", ".join(r.releases), r.variant, *(status.get(n, "-") for n in names), r.verdict, first]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
