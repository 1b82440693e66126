"""``python -m benchmarks [--before CHECKOUT] [--repeats N] [--quick] [--render] [--no-graphs | --graphs-only] [--users [--fuzz-suite] [--only-users]] [--out docs/performance.md]``

``--users``: only the times users wait for, each a section of the page of its own, in one run:
``benchmarks/users.py`` (``prove`` by intervals beside the enumeration, start-up beside ``import
torch``, test collection, conform), ``detection.py`` (time to find each known bug) and
``explore_reduction.py`` (``explore`` reduced beside unreduced); ``--only-users``: the first alone.
A full run rewrites the page and puts those sections back from their saved figures.

Measures the figures of ``benchmarks/perf.py`` for this checkout and, with ``--before``, for
another checkout of specstate (``git worktree add ../before <commit>`` or ``git archive``), each
in a child process (at the same time), saving them as they come (``performance.after.json`` /
``performance.before.json`` beside the page), then, with ``--before``, compares the two
checkouts' values pair by pair (``benchmarks/ab.py``), measures this checkout's floor alone
(``benchmarks/floor.py``), and writes ``docs/performance.md``. Run it from
the repository root; every figure is a ratio to a baseline measured in the same process (see
``perf.py``). ``--render`` rewrites the page from the saved figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.ab import measure_ab
from benchmarks.report import render

ROOT = Path(__file__).resolve().parent.parent


def _env(checkout: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(checkout.resolve()), str(ROOT)]))


def _start(checkout: Path, repeats: int, quick: bool, out_dir: str, json_path: Path, cwd: str) -> subprocess.Popen:
    """One checkout's figures but the graphs in a child process (``cwd`` outside the repository,
    so that the ``PYTHONPATH`` checkout's specstate is the one imported)."""
    args = [sys.executable, "-m", "benchmarks.perf", str(repeats), out_dir, str(json_path), "--no-graphs"] + \
        (["--quick"] if quick else [])
    return subprocess.Popen(args, env=_env(checkout), cwd=cwd)


def _graphs(checkouts: list[tuple[Path, Path]], quick: bool, out_dir: str, cwd: str) -> None:
    """``specstate graph`` per variant, one child process at a time (the sweep uses both cores, so
    wall time means something only on an otherwise idle machine), the checkouts alternating per
    variant; added to each checkout's saved figures."""
    from benchmarks.perf import graph_times

    names = ["always-spec", "naive-threshold", "upstream-adaptive"] if quick else _variant_names()
    got: dict[Path, dict[str, Any]] = {j: {} for _, j in checkouts}
    for v in names:
        for checkout, json_path in checkouts:
            got[json_path].update(graph_times([v], out_dir, _env(checkout), cwd))
            print(f"graph {v} ({checkout.name or checkout}): {got[json_path][v]['wall_s']:.1f} s wall", file=sys.stderr)
    for _, json_path in checkouts:
        res = _load(json_path) or {}
        res["graph"] = got[json_path]
        json_path.write_text(json.dumps(res, indent=1))


def _floor(json_path: Path, repeats: int, quick: bool, cwd: str) -> None:
    """This checkout's floor (``benchmarks/floor.py``) in a child process on an otherwise idle
    machine (after both checkouts' figures: its prices and its baseline move differently under a
    neighbour's load), added to its saved figures."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        args = [sys.executable, "-m", "benchmarks.floor", str(repeats), f.name] + (["--quick"] if quick else [])
        subprocess.run(args, env=_env(ROOT), cwd=cwd, check=True)
        res = _load(json_path) or {}
        res["floor"] = json.loads(Path(f.name).read_text())
    json_path.write_text(json.dumps(res, indent=1))


def _variant_names() -> list[str]:
    from specstate.model import variant_names

    return list(variant_names())


#: the sections of ``--users``: the module that measures and renders each, and its saved figures' suffix
USER_SECTIONS = (("users", ".users.json"), ("detection", ".detection.json"),
                 ("explore_reduction", ".explore_reduction.json"), ("coverage", ".coverage.json"),
                 ("fast_tier", ".fast_tier.json"))


def _keep_users_section(page: Path) -> None:
    """The sections of ``--users`` (``benchmarks/users.py``, ``detection.py``, ``explore_reduction.py``)
    and ``coverage.py``'s and ``fast_tier.py``'s (each run by itself: ``python -m benchmarks.coverage``,
    ``python -m benchmarks.fast_tier``), rendered again from their saved figures (a full run rewrites
    the page)."""
    import importlib

    from benchmarks.sections import put_section

    for name, suffix in USER_SECTIONS:
        saved = page.with_suffix(suffix)
        if saved.exists():
            put_section(page, importlib.import_module(f"benchmarks.{name}").render_section(json.loads(saved.read_text())))


def _users(out: Path, quick: bool, fuzz_suite: bool, only_users: bool) -> int:
    """Every figure users wait for, one section after the other: ``users.py`` (prove, start-up,
    collection, conform), then unless ``only_users`` the time to find each known bug
    (``detection.py``, 20 seeds; ``--quick``: 5) and ``explore``'s reduction (``explore_reduction.py``,
    depth 12, the unreduced search capped at 300,000 states; ``--quick``: depth 10)."""
    from benchmarks import detection, explore_reduction, users

    code = users.main((["--quick"] if quick else []) + (["--fuzz-suite"] if fuzz_suite else []) + ["--out", str(out)])
    if only_users:
        return code
    code |= detection.main(["--seeds", "5" if quick else "20", "--out", str(out)])
    return code | explore_reduction.main(["--depth", "10" if quick else "12", "--unreduced-max-states", "300000",
                                          "--out", str(out)])


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--before", default=None, help="another checkout of specstate, measured in a child process")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer cases and variants (a smoke run)")
    ap.add_argument("--render", action="store_true", help="only rewrite the page from the figures already measured")
    ap.add_argument("--no-graphs", action="store_true", help="skip the per-variant graph times")
    ap.add_argument("--graphs-only", action="store_true",
                    help="only the per-variant graph times, added to the figures already measured")
    ap.add_argument("--ab-repeats", type=int, default=8,
                    help="with --before: back-to-back pairs per figure of the paired A/B (benchmarks/ab.py; 0: none)")
    ap.add_argument("--users", action="store_true",
                    help="only the times users wait for, each new method beside today's (benchmarks/users.py, "
                         "detection.py, explore_reduction.py: about half an hour)")
    ap.add_argument("--only-users", action="store_true",
                    help="with --users: users.py's figures alone (prove, start-up, collection, conform)")
    ap.add_argument("--fuzz-suite", action="store_true",
                    help="with --users: also time `pytest -m fuzz` (profile ci; minutes)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "performance.md"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.users:
        return _users(out, args.quick, args.fuzz_suite, args.only_users)
    after_json, before_json = out.with_suffix(".after.json"), out.with_suffix(".before.json")
    codes: list[int] = []
    if not args.render:
        if not args.graphs_only:
            for p in (after_json, before_json):
                p.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory() as out_dir, tempfile.TemporaryDirectory() as cwd:
            if not args.graphs_only:
                # both checkouts at once: every figure is a ratio within its own process
                kids = [_start(ROOT, args.repeats, args.quick, out_dir, after_json, cwd)]
                if args.before:
                    kids.append(_start(Path(args.before), args.repeats, args.quick, out_dir, before_json, cwd))
                codes = [k.wait() for k in kids]
                if args.before and args.ab_repeats > 0 and not any(codes):
                    # the two checkouts' values, pair by pair on an otherwise idle core
                    res = _load(after_json) or {}
                    res["ab"] = measure_ab(Path(args.before), ROOT, ROOT, repeats=args.ab_repeats)
                    after_json.write_text(json.dumps(res, indent=1))
                if not any(codes):
                    _floor(after_json, args.repeats, args.quick, cwd)
            if not args.no_graphs:
                _graphs([(ROOT, after_json)] + ([(Path(args.before), before_json)] if args.before else []),
                        args.quick, out_dir, cwd)
        if any(codes):
            print(f"a measuring child failed (exit codes {codes}); the page shows what was measured", file=sys.stderr)
    after, before = _load(after_json), _load(before_json)
    if after is None:
        raise SystemExit(f"no figures in {after_json}")
    command = "python -m benchmarks" + (" --before CHECKOUT" if args.before or before else "") + \
        (f" --repeats {args.repeats}" if args.repeats != 3 else "") + (" --quick" if args.quick else "")
    out.write_text(render(after, before, command=command))
    _keep_users_section(out)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
