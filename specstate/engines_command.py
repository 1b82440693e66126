"""``specstate engines``: the engine families, the releases each stands for, and the state of
their citations against those releases' source (``specstate.cli`` calls ``add_parsers``).

The citation state is computed from the sglang sources already unpacked in the cache the
citation tests fill (``.specstate-cache/`` or ``$SPECSTATE_SGLANG_CACHE``); nothing is
downloaded here. A release without source in the cache is named, with the command that fetches
it. Exit 1 when a citation fails its range, else 0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["add_parsers", "family_rows"]

FETCH = "python -m pytest tests/test_release_ranges.py  (downloads the wheels into .specstate-cache/)"


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
            "unreviewed": sorted({str(f.citation) for f in rep.unreviewed}),
            "ok": rep.ok and not rep.missing_sources,
        })
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
    if any(r["missing_sources"] for r in rows):
        print(f"fetch the missing sources with: {FETCH}")


def _cmd_engines(args: argparse.Namespace) -> int:
    rows = family_rows()
    if args.json:
        print(json.dumps(rows, indent=1, sort_keys=True))
    else:
        _print(rows)
    return 1 if any(r["failures"] for r in rows) else 0


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("engines", help="list the engine families, their sglang release ranges and citation state")
    p.add_argument("--json", action="store_true", help="print the families as one JSON list on stdout")
    p.set_defaults(func=_cmd_engines)
