"""``specstate engines``: the engine families, the releases each stands for, and the state of
their citations against those releases' source (``specstate.cli`` calls ``add_parsers``);
``--trace T.json`` / ``--fuzz PROFILE``: the same trace or fuzz budget on every family, one table
(``specstate.across``; exit 1 when any family does not pass).

The citation state is computed from the sglang sources already unpacked in the cache the
citation tests fill (``~/.cache/specstate/`` or ``$SPECSTATE_SGLANG_CACHE``: ``upstream.cache_dir``); nothing is
downloaded here. A release without source in the cache is named, with the command that fetches
it. Exit 1 when a citation fails its range, else 0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from specstate._cli_support import int_arg

__all__ = ["add_parsers", "family_rows", "vllm_rows"]

FETCH = "python -m pytest tests/test_release_ranges.py  (downloads the pinned wheels into the cache, docs/trust.md)"


def family_rows(cache: Path | None = None) -> list[dict[str, Any]]:
    """One row per family: name, default variant, base, releases, and its citation report."""
    from specstate.citations import cached_sources, check_family
    from specstate.model.families import family_names, get_family

    sources = cached_sources(cache)
    rows = []
    for name in family_names():
        fam, rep = get_family(name), check_family(name, sources)
        rows.append({
            "family": name, "default_variant": fam.default_variant, "base": fam.base, "releases": list(fam.releases),
            "summary": fam.summary, "own_citations": rep.own, "inherited_citations": rep.inherited,
            "reviewed_inherited": rep.reviewed, "checked_releases": list(rep.checked),
            "missing_sources": list(rep.missing_sources), "failures": [f.describe() for f in rep.failures],
            "unreviewed": sorted({f"{Path(f.citation.file).name}::{f.citation.symbol}" for f in rep.unreviewed}),
            "ok": rep.ok and not rep.missing_sources,
        })
    return rows + vllm_rows(cache)


def vllm_rows(cache: Path | None = None) -> list[dict[str, Any]]:
    """One row per release of an engine with a model of its own (``Release.has_own_model``: vLLM's, not in
    the SGLang registry), each asked by folder: its default variant (its launch part), its summary (its
    package's ``SUMMARY``), its citations checked against its unpacked wheel in the cache when it is there
    (``<cache>/<family>/<engine>/``)."""
    from specstate.citations import check_vllm_citations
    from specstate.model.releases import own_model_releases
    from specstate.upstream import cache_dir

    rows = []
    for release in reversed(own_model_releases()):  # oldest first, as the SGLang rows
        launch = release.part("launch")
        source = (cache or cache_dir()) / release.name / release.engine
        checked = source.is_dir()
        own, failures = check_vllm_citations(source, family=release.name)  # an absent source: only counted
        rows.append({"family": release.name, "default_variant": getattr(launch, "DEFAULT_VARIANT", None), "base": None,
                     "releases": [release.version], "summary": str(getattr(release.load(), "SUMMARY", "")),
                     "own_citations": own, "inherited_citations": 0, "reviewed_inherited": 0,
                     "checked_releases": [release.version] if checked else [],
                     "missing_sources": [] if checked else [release.version],
                     "failures": failures if checked else [], "unreviewed": [], "ok": checked and not failures})
    return rows


def _state(row: dict[str, Any]) -> str:
    if row["failures"]:
        return f"FAIL: {len(row['failures'])} ({row['failures'][0]}{', ...' if len(row['failures']) > 1 else ''})"
    if row["missing_sources"]:
        return f"not checked in {', '.join(row['missing_sources'])} (no source cached)"
    return f"unchanged in {', '.join(row['checked_releases'])}"


def _print(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        base = f", derived from {r['base']}" if r["base"] else ""
        print(f"{r['family']}  releases {', '.join(r['releases'])}  (default variant {r['default_variant']}{base})")
        print(f"  {r['summary']}")
        print(f"  citations: {r['own_citations']} own: {_state(r)}")
        if r["base"]:
            changed = ("changes not checked" if r["missing_sources"] else
                       f"{len(r['unreviewed'])} of them changed and not yet reviewed (the family's ledger)")
            print(f"  inherited from {r['base']}: {r['reviewed_inherited']} re-read or replaced, "
                  f"{r['inherited_citations']} kept, {changed}")
    if any(r["missing_sources"] for r in rows if not r["family"].startswith("vllm-")):
        print(f"fetch the missing sources with: {FETCH}")
    if any(r["missing_sources"] for r in rows if r["family"].startswith("vllm-")):
        print("unpack vLLM's wheel for its citations: docs/vllm.md, 'The CPU oracle'")


def _cmd_across(args: argparse.Namespace) -> int:
    """``--trace`` / ``--fuzz``: the one table across releases (``specstate.across``)."""
    from specstate.across import format_table, fuzz_across, replay_across

    if args.trace is not None:
        from specstate.fuzz.trace import load_trace

        trace = load_trace(args.trace)
        rows = replay_across(trace.config, trace.actions)
    else:
        rows = fuzz_across(args.fuzz, max_examples=args.max_examples, seed=args.seed)
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=1, sort_keys=True))
    else:
        print(format_table(rows))
    return 0 if all(r.verdict == "pass" for r in rows) else 1


def _cmd_release(release: str, as_json: bool) -> int:
    """``--release R``: the family that stands for ``R``, or where ``R`` lies between the families and
    which of the later family's changes it ships (``model/release_gap.py``). Exit 0 when a family
    stands for it, else 1."""
    from specstate.errors import UsageError
    from specstate.model.release_gap import describe_unmodelled, family_for_release

    family = family_for_release(release)
    text = describe_unmodelled(release, detail=True)
    if text is None:
        raise UsageError(f"--release: expected an sglang release such as 0.5.20 but got {release[:40]!r}{'...' if len(release) > 40 else ''}")
    if as_json:
        print(json.dumps({"release": release, "family": family, "answer": text.splitlines()}, indent=1))
    else:
        print(text)
    return 0 if family is not None else 1


def _cmd_engines(args: argparse.Namespace) -> int:
    from specstate.errors import UsageError

    unused = [o for o, v in (("--max-examples", args.max_examples), ("--seed", args.seed)) if v is not None]
    if unused and args.fuzz is None:
        raise UsageError(f"{', '.join(unused)}: --fuzz's options, but no --fuzz was given; add --fuzz PROFILE, "
                         f"or drop {'them' if len(unused) > 1 else 'it'}")
    if args.release is not None:
        return _cmd_release(args.release, args.json)
    if args.trace is not None or args.fuzz is not None:
        return _cmd_across(args)
    rows = family_rows()
    if args.json:
        print(json.dumps(rows, indent=1, sort_keys=True))
    else:
        _print(rows)
    return 1 if any(r["failures"] for r in rows) else 0


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("engines", help="list the engine families, their sglang release ranges and citation state")
    p.add_argument("--json", action="store_true", help="print the families as one JSON list on stdout")
    across = p.add_mutually_exclusive_group()
    across.add_argument("--trace", default=None, help="replay TRACE.json on every family's default variant: one table")
    across.add_argument("--fuzz", default=None, choices=("dev", "ci", "deep"),
                        help="fuzz every family's default variant under this profile: one table")
    across.add_argument("--release", default=None, metavar="R",
                        help="the family for sglang release R, or where R lies between the families and which "
                             "of the later one's changes R ships (exit 1: no family of its own)")
    p.add_argument("--max-examples", type=int_arg(1, 1_000_000), default=None, help="with --fuzz: the budget")
    p.add_argument("--seed", type=int_arg(0, (1 << 64) - 1), default=None, help="with --fuzz: a random run from this seed")
    p.set_defaults(func=_cmd_engines)
