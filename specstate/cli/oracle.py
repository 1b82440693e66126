"""``specstate oracle --engine RELEASE``: the differential fuzzer by hand, or one trace replayed
on the oracle and the model (``specstate.cli`` calls ``add_parsers``)."""

from __future__ import annotations

import argparse
import sys

from specstate._cli_support import int_arg

__all__ = ["add_parsers"]


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from specstate.oracle.catalog import RELEASES

    p = sub.add_parser("oracle", help="upstream's real scheduler on CPU against the model, step by step (docs/oracle.md)")
    p.add_argument("--engine", required=True, type=_release_arg(RELEASES), metavar="{" + ",".join(RELEASES) + "}",
                   help="the sglang release whose scheduler is the oracle (its family's name, sglang-X.Y.Z as "
                        "the other commands take it, works too)")
    p.add_argument("--examples", type=int_arg(1, 100_000), default=None,
                   help="fuzzed workloads (default 200; not with --trace)")
    p.add_argument("--trace", default=None, help="replay this trace's workload on the oracle and the model instead")
    p.add_argument("--random", action="store_true",
                   help="new examples each run (default: derandomized, as in CI; not with --trace)")
    p.set_defaults(func=_cmd_oracle)


def _release_arg(releases: tuple[str, ...]):  # noqa: ANN202
    """``0.5.23`` or the family's name ``sglang-0.5.23`` -> ``0.5.23``; anything else a usage error naming
    the choices."""

    def parse(value: str) -> str:
        release = value.removeprefix("sglang-")
        if release not in releases:
            shown = repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
            raise argparse.ArgumentTypeError(f"invalid choice: {shown} (choose from "
                                             f"{', '.join(repr(r) for r in releases)})")
        return release

    return parse


def _cmd_oracle(args: argparse.Namespace) -> int:
    from specstate.errors import UsageError

    if args.trace:
        unused = [o for o, given in (("--examples", args.examples is not None), ("--random", args.random)) if given]
        if unused:
            raise UsageError(f"{' and '.join(unused)}: not with --trace (the trace is one workload, replayed as "
                             f"it is); drop {'them' if len(unused) > 1 else 'it'}")
        return _replay(args.engine, args.trace)
    from specstate.oracle.fuzz import fuzz, replay_commands

    res = fuzz(args.engine, examples=200 if args.examples is None else args.examples, derandomize=not args.random)
    reached = ", ".join(f"{k} {v}" for k, v in sorted(res.reached.items()))
    print(f"sglang {args.engine}: {res.examples} workloads in {res.seconds} s (oracle: imports {res.import_s} s, "
          f"workloads {round(res.oracle_s, 1)} s, peak RSS {res.peak_rss_mb} MB); reached: {reached or 'nothing'}")
    if res.failure is None:
        print("0 mismatches")
        return 0
    print(res.failure.describe())
    for m in res.failure.mismatches[1:5]:
        print(f"  {m.describe()}")
    print(f"minimal workload: {res.trace_path}")
    for c in replay_commands(args.engine, res.trace_path or ""):
        print(f"  replay: {c}")
    return 1


def _same_family(release: str, path: str, variant: str) -> None:
    """A trace replays on the oracle of its own family only (a v2 trace on 0.5.12 would compare
    an overlap-loop workload with the v1 scheduler and "conform" by accident)."""
    from specstate.errors import UsageError
    from specstate.model import get_variant
    from specstate.oracle.catalog import VARIANTS

    want = get_variant(VARIANTS[release]).family_name
    got = get_variant(variant).family_name
    if got != want:
        raise UsageError(f"{path}: a trace of {got} (variant {variant}) but --engine {release} is {want}'s oracle: "
                         f"replay it with --engine {got.removeprefix('sglang-')}, or on the model alone "
                         f"(specstate reproduce {path})")


def _replay(release: str, path: str) -> int:
    from specstate.fuzz.trace import load_trace
    from specstate.oracle.differential import differential

    trace = load_trace(path)
    _same_family(release, path, trace.variant)
    d = differential(release, trace.config, trace.actions)
    print(d.describe())
    for m in d.mismatches[1:8]:
        print(f"  {m.describe()}")
    sys.stdout.flush()
    return 0 if d.ok else 1
