"""``specstate`` subcommands of the fuzzer: ``reproduce``, ``fuzz``, ``minimize``,
``explore`` and ``graph`` (``specstate.cli`` calls ``add_parsers``)."""

from __future__ import annotations

import argparse
import sys
import time


__all__ = ["add_parsers"]


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from specstate.fuzz.reproduce import reproduce_file, reproduce_seed

    if args.trace is not None:
        rep = reproduce_file(args.trace)
    elif args.seed is not None and args.variant is not None:
        rep = reproduce_seed(args.seed, args.variant, scenario=args.scenario)
    else:
        print("specstate: error: expected TRACE.json, or --seed N --variant V [--scenario S]", file=sys.stderr)
        return 2
    print(rep.report)
    return rep.exit_code


def _cmd_fuzz(args: argparse.Namespace) -> int:
    from hypothesis import settings

    from specstate.fuzz.profiles import profile_settings
    from specstate.fuzz.runner import fuzz_variant, record_failure, wanted_witnesses
    from specstate.model import get_variant

    s = profile_settings(args.profile)
    if args.max_examples is not None:
        s = settings(s, max_examples=args.max_examples)
    if args.seed is not None:
        s = settings(s, derandomize=False, database=None)
    expected = get_variant(args.variant).expected_invariant
    report = fuzz_variant(args.variant, s, seed=args.seed, prefer=expected)
    print(f"fuzz {args.variant} (profile {args.profile}, seed {args.seed}): {report.elapsed_s:.1f} s, "
          f"max crossings {report.max_crossings}, witnesses {', '.join(sorted(report.witnesses)) or 'none'}")
    if report.result is not None:
        print(f"  first violation after {report.first_violation_s:.2f} s; shrunk to {len(report.result.actions)} actions")
        record_failure(report, folder=args.failures, seed=args.seed, out=sys.stdout)
        return 1
    missing = report.missing(wanted_witnesses(args.variant))
    if missing:
        print(f"  FAIL: witnesses never reached: {', '.join(sorted(missing))}")
        return 1
    print("  PASS: no violation, every wanted witness reached")
    return 0


def _cmd_minimize(args: argparse.Namespace) -> int:
    from specstate.fuzz.minimize import minimize_failure
    from specstate.fuzz.trace import Trace, load_trace, save_trace

    trace = load_trace(args.trace)
    m = minimize_failure(trace.config, trace.variant, trace.actions, bfs_depth=args.bfs_depth)
    out = Trace(trace.config, trace.variant, m.actions, m.result.first.to_json() if m.result.first else None,
                trace.seed, trace.scenario, notes={**trace.notes, **m.notes()})
    path = save_trace(out, args.failures, name=args.out)
    print(f"{len(trace.actions)} -> {m.verdict()}\n  {m.result.first.describe() if m.result.first else ''}")
    print(f"  trace: {path}\n  reproduce with: specstate reproduce {path}")
    return 0


def _explore(args: argparse.Namespace):  # noqa: ANN202
    from specstate.fuzz.explore import DEFAULT_EXPLORE_CONFIG, default_alphabet, explore

    alphabet = default_alphabet(max_live=args.max_bs, max_arrivals=args.max_arrivals or args.max_bs + 1)
    return explore(DEFAULT_EXPLORE_CONFIG, args.variant, alphabet=alphabet, max_depth=args.depth,
                   max_states=args.max_states, progress=sys.stderr)


def _cmd_explore(args: argparse.Namespace) -> int:
    from specstate.model import action_to_json

    r = _explore(args)
    print(f"explore {r.variant}: {r.states} states, {r.transitions} transitions, depth {r.max_depth_reached}, "
          f"{r.elapsed_s:.1f} s, {r.states_per_s:.0f} states/s, {'frontier exhausted within the bounds' if r.complete else 'stopped at max-states'}")
    if r.counterexample is None:
        print("  no violation in the explored space")
        return 0
    print(f"  shortest counterexample ({len(r.counterexample)} actions):")
    for i, a in enumerate(r.counterexample, 1):
        print(f"    {i:>3}: {action_to_json(a)}")
    for v in r.violations:
        print(f"  {v.describe()}")
    return 1


def _cmd_graph(args: argparse.Namespace) -> int:
    from specstate.graph.command import cmd_graph

    return cmd_graph(args)


def _explore_args(p: argparse.ArgumentParser, variant: str | None = "naive-threshold") -> None:
    p.add_argument("--variant", default=variant)
    p.add_argument("--max-bs", type=int, default=3, help="most live requests (no arrival beyond)")
    p.add_argument("--max-arrivals", type=int, default=None, help="requests in all (default max-bs + 1)")
    p.add_argument("--depth", type=int, default=8, help="most actions per path")
    p.add_argument("--max-states", type=int, default=200_000)


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    r = sub.add_parser("reproduce", help="replay a failure trace, or a seed (generator or --scenario)")
    r.add_argument("trace", nargs="?", default=None, help="a trace JSON written by a failing run")
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--variant", default=None)
    r.add_argument("--scenario", default=None, help="replay this built-in scenario with --seed")
    r.set_defaults(func=_cmd_reproduce)
    f = sub.add_parser("fuzz", help="run the Hypothesis state machine on one variant")
    f.add_argument("--variant", default="fixed-threshold")
    f.add_argument("--profile", default="dev", choices=("dev", "ci", "deep"))
    f.add_argument("--seed", type=int, default=None, help="a Hypothesis seed (random, no database)")
    f.add_argument("--max-examples", type=int, default=None)
    f.add_argument("--failures", default=None)
    f.set_defaults(func=_cmd_fuzz)
    m = sub.add_parser("minimize", help="delta-debug a failing trace and check minimality by BFS")
    m.add_argument("trace")
    m.add_argument("--bfs-depth", type=int, default=None)
    m.add_argument("--failures", default=None)
    m.add_argument("--out", default=None, help="file name for the minimised trace")
    m.set_defaults(func=_cmd_minimize)
    e = sub.add_parser("explore", help="exhaustive BFS over the model's abstract state space")
    _explore_args(e)
    e.set_defaults(func=_cmd_explore)
    g = sub.add_parser("graph", help="draw the abstract transition graph (svg, png, dot, json); --raw: concrete")
    _explore_args(g, variant=None)  # --max-bs, --depth, ...: the --raw exploration's bounds
    from specstate.graph.command import add_graph_args

    add_graph_args(g)
    g.set_defaults(func=_cmd_graph)


