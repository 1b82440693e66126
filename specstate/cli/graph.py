"""``specstate graph``: arguments, the command and its parser (``specstate.cli`` calls ``add_parsers``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from specstate._cli_support import EXIT_USAGE, int_arg
from specstate.errors import UsageError

if TYPE_CHECKING:
    from specstate.graph.build import AbstractGraph
    from specstate.graph.transitions import SweepBounds

__all__ = ["add_graph_args", "cmd_graph", "build_from_args", "add_parsers"]


def add_graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output file: .svg, .png, .dot or .json (networkx node-link)")
    p.add_argument("--trace", default=None, help="a failure trace: its path is drawn bold and numbered")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--from-fuzz", action="store_true", help="edges taken by the seeded fuzz cases (--runs)")
    src.add_argument("--from-recording", default=None, metavar="REC.jsonl.gz", help="edges a real GPU run took")
    src.add_argument("--raw", action="store_true", help="the concrete graph of every explored model state")
    p.add_argument("--runs", type=int_arg(1, 1000), default=20, help="--from-fuzz: generator seeds 0..N-1 (N <= 1000)")
    p.add_argument("--threshold", type=int_arg(-1, 4096), default=5,
                   help="--from-recording: the run's threshold (-1: none)")
    p.add_argument("--jobs", type=int_arg(0, 64), default=0,
                   help="processes for the exploration (0: both cores); the graph is the same for any N")
    p.add_argument("--levels", default=None, help="burst sizes of the exploration, e.g. 1,2,5,10 "
                   "(default: the seed's levels up to max_running_requests)")


def _bounds(args: argparse.Namespace) -> SweepBounds:
    from specstate.graph.parallel import default_jobs
    from specstate.graph.transitions import SweepBounds

    jobs = getattr(args, "jobs", 1) or default_jobs()
    if args.levels is None:
        return SweepBounds(jobs=jobs)
    parts = [x.strip() for x in args.levels.split(",") if x.strip()]
    if not parts or len(parts) > 32 or not all(x.isdigit() and 1 <= int(x) <= 4096 for x in parts):
        raise UsageError(f"Expected --levels to be 1..32 comma-separated burst sizes in [1, 4096] "
                         f"(e.g. 1,2,5,10) but got {args.levels[:60]!r}")
    return SweepBounds(levels=tuple(int(x) for x in parts), jobs=jobs)


def build_from_args(args: argparse.Namespace) -> AbstractGraph:
    from specstate.fuzz.trace import load_trace
    from specstate.scenarios import SEED_CONFIG

    from specstate._engine_option import resolve_variant
    from specstate._cli_support import guard_variant_import
    from specstate.model import get_variant
    from specstate.graph.sources import exploration_graph, fuzz_graph, overlay_trace, recording_graph

    from specstate.cli.vllm import is_vllm_trace

    if args.trace and is_vllm_trace(args.trace):  # the vLLM family has no abstract state to draw
        from specstate._engine_option import refuse_vllm

        refuse_vllm(args)
    trace = load_trace(args.trace) if args.trace else None
    if trace is not None:
        guard_variant_import(trace, args.trace, args, used=args.variant is None and args.engine is None)
    variant = resolve_variant(args, trace.variant if trace else "naive-threshold")
    assert variant is not None
    v = get_variant(variant)  # the entry: resolved once, the object goes down
    if trace is not None:
        from specstate.fuzz.reproduce import trace_family

        family, ours = trace_family(trace), v.family_name
        if family is not None and family != ours:
            raise UsageError(f"Expected a --trace of the {ours} family (--variant {variant}) but {args.trace} is a "
                             f"trace of {trace.variant} ({family})")
    from specstate.fuzz.static import static_config

    family_config = v.engine_family.graph_config
    family_config = static_config(family_config, v) if family_config is not None else None
    config = trace.config if trace else family_config or SEED_CONFIG
    from specstate._engine_option import resolve_launch

    launch = resolve_launch(args) if getattr(args, "launch", None) is None else args.launch
    config = launch.config if launch is not None else config
    if args.from_recording:
        g = recording_graph(args.from_recording, variant, None if args.threshold < 0 else args.threshold,
                            bounds=_bounds(args))
    elif args.from_fuzz:
        g = fuzz_graph(config, v, args.runs, bounds=_bounds(args))
    else:
        g = exploration_graph(config, v, _bounds(args))
    if trace is not None:
        overlay_trace(g, trace, v)
    return g


def _raw(args: argparse.Namespace) -> tuple[str, str, str]:
    import networkx as nx

    from specstate.cli.fuzz import run_explore
    from specstate.fuzz.graph import to_dot as raw_dot

    r = run_explore(args, keep_graph=True)
    data = nx.node_link_data(r.graph, edges="links")
    return raw_dot(r.graph).source, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n", \
        f"raw graph {r.variant}: {r.states} states, {r.transitions} transitions"


def cmd_graph(args: argparse.Namespace) -> int:
    from specstate.graph.output import check_out, write_graph
    from specstate.graph.render import node_link_text, to_dot
    from specstate.model import get_variant

    from specstate.cli.multirank import maybe_multirank

    status = maybe_multirank(args, "graph")  # DP attention on N > 1 ranks: the explored multi-rank states
    if status is not None:
        return status
    t0 = time.perf_counter()
    check_out(args.out)  # a wrong --out fails now, not after the exploration
    if args.variant is not None:
        get_variant(args.variant)
    _bounds(args)
    _unused_options(args)
    if args.raw and args.trace is not None:
        raise UsageError("Expected --trace without --raw: a trace is drawn on the abstract graph, --raw draws the "
                         "concrete one without it")
    if args.raw:
        dot_text, json_text, summary = _raw(args)
    else:
        g = build_from_args(args)
        dot_text, json_text = to_dot(g), node_link_text(g)
        nodes, edges = g.counts
        summary = (f"graph {g.title}: {nodes} nodes, {edges} edges, {len(g.failing_edges())} failing, "
                   f"{sum(1 for e in g.edges.values() if not e.taken)} untaken")
    w = write_graph(dot_text, json_text, args.out)
    print(summary)
    print(f"  time: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(w.message, file=sys.stdout if w.drawn else sys.stderr)
    return 0 if w.drawn else EXIT_USAGE  # a missing program, with its install command: 2, as a missing package is


def _unused_options(args: argparse.Namespace) -> None:
    """The options of one graph source given with another, where they would do nothing."""
    from specstate.cli._unused import refuse_unused

    refuse_unused(args, [
        (("max_bs", "max_arrivals", "depth", "max_states", "reduce"), args.raw,
         "the --raw exploration's bounds, but without --raw the abstract graph is drawn from the load sweep "
         "(--levels)"),
        (("levels",), not args.raw, "the abstract graph's burst sizes, but --raw explores the concrete states "
                                    "(--max-bs, --depth, ...)"),
        (("runs",), args.from_fuzz, "--from-fuzz's number of seeds, but no --from-fuzz was given"),
        (("threshold",), args.from_recording is not None, "--from-recording's threshold, but no --from-recording "
                                                          "was given"),
    ])


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``specstate graph``: the ``--raw`` exploration's bounds (``explore``'s), then the graph's own."""
    from specstate._cli_support import add_allow_import
    from specstate.cli.fuzz import explore_args

    g = sub.add_parser("graph", help="draw the abstract transition graph (svg, png, dot, json); --raw: concrete")
    explore_args(g)  # --max-bs, --depth, ...: the --raw exploration's bounds
    add_graph_args(g)
    add_allow_import(g)
    g.set_defaults(func=cmd_graph)
