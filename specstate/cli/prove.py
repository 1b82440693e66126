"""``specstate prove``: arguments and the text report (``specstate.cli`` calls ``add_parsers``); the
proof as a ``CheckResult`` and its failure trace are ``specstate.check_result.from_prove``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specstate._cli_output import add_output_options, json_output
from specstate._cli_support import int_arg
from specstate._engine_option import add_engine_option, add_server_args_options, resolve_launch, resolve_variant
from specstate.errors import UsageError

__all__ = ["add_parsers", "parse_lists"]


def parse_lists(text: str) -> tuple[str, ...]:
    """``--capture-lists``: comma-separated names of ``CAPTURE_LIST_NAMES``, or ``all``."""
    from specstate.prove import CAPTURE_LIST_NAMES

    if text == "all":
        return CAPTURE_LIST_NAMES
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [n for n in names if n not in CAPTURE_LIST_NAMES]
    if not names or bad:
        raise UsageError(f"Expected --capture-lists to be 'all' or names from {list(CAPTURE_LIST_NAMES)} "
                         f"(comma-separated) but got {text[:80]!r}")
    return names


def _report(result, check) -> None:  # noqa: ANN001
    method = "every bound (--exhaustive)" if result.exhaustive else "by intervals"
    print(f"prove {result.variant}: bs 1..{result.max_bs}, {len(result.lists)} capture lists, {method}")
    for v in result.lists:
        state = f"fails at bs = {v.failure.bound}" if v.failure else f"holds for bs <= {v.proved_up_to}"
        if v.unreached is not None and v.failure is None:
            state += f"; bs = {v.unreached_bs} not reached (inconclusive above)"
        print(f"  {v.name:7s} {_show(v.capture):30s} {state} ({v.bounds_run} bounds run, {v.runs} scripts, "
              f"{v.steps} steps)")
    print(f"  witnesses reached: {', '.join(check.details['witnesses']) or 'none'}")
    f = result.failure
    if f is None:
        print(f"  {result.verdict()}")
        if result.inconclusive:
            print(f"  NOT JUDGED (exit 4): the proof could not conclude above the bounds named; no violation found")
        return
    print(f"  smallest failing bs = {f.bound} (capture list {f.capture_list}, script {f.script}, "
          f"{len(f.actions)} actions)")
    for line in check.problems:
        print(f"  {line}")
    print(f"  trace: {check.trace_path}\n  reproduce with: {check.repro_command}")


def _show(capture: tuple[int, ...]) -> str:
    text = ",".join(map(str, capture))
    return f"({text})" if len(text) <= 26 else f"({text[:12]},...,{capture[-1]}; {len(capture)})"


@json_output
def _cmd_prove(args: argparse.Namespace) -> int:
    from specstate.check_result import from_prove
    from specstate.fuzz.trace import failure_dir
    from specstate.model import get_variant
    from specstate.progress import progress_bar
    from specstate.prove import prove
    from specstate.scenarios import SEED_CONFIG
    from specstate.cli.multirank import maybe_multirank

    status = maybe_multirank(args, "prove")  # DP attention on N > 1 ranks: per-rank batch-size vectors
    if status is not None:
        return status
    resolve_variant(args, "fixed-threshold")
    failure_dir(args.failures)
    get_variant(args.variant)
    lists = parse_lists(args.capture_lists)
    if args.jobs > 1 and len(lists) < 2:  # one process per capture list: with one list the work is serial
        raise UsageError(f"--jobs {args.jobs}: runs the capture lists in parallel, one per process, but "
                         f"--capture-lists {args.capture_lists} names one; drop it, or name more lists")
    launch = resolve_launch(args)  # the user's launch: its config, bs up to its max_running_requests
    config = launch.config if launch is not None else SEED_CONFIG
    if args.max_bs is None:
        args.max_bs = min(config.max_running_requests, 256) if launch is not None else 256
    elif launch is not None and args.max_bs > config.max_running_requests:
        raise UsageError(f"argument --max-bs: expected at most the launch's --max-running-requests "
                         f"{config.max_running_requests} but got {args.max_bs}")
    from specstate.model.tensors import warm

    warm()  # torch before the proof's timer (cpu_s: the proof's own) if every tensor op runs it (SPECSTATE_TORCH=always)

    from specstate.fuzz.reads import interval_notes

    for line in interval_notes(get_variant(args.variant).ops(), exhaustive=args.exhaustive):
        print(f"specstate prove: {line}", file=sys.stderr)
    with progress_bar(f"prove {args.variant}", total=len(lists) * args.max_bs, unit="bs", quiet=args.quiet) as bar:
        result = prove(config, args.variant, args.max_bs, lists=lists, on_bound=lambda name, b: bar.update(1),
                       jobs=args.jobs, exhaustive=args.exhaustive)
    check = args.json_result = from_prove(result, failures=args.failures, launch=launch)
    if result.interrupted is not None:
        if check.trace_path is not None:
            print(f"specstate: prove {args.variant}: interrupted; the smallest failing bs found so far is in "
                  f"{check.trace_path}\n  reproduce with: {check.repro_command}", file=sys.stderr, flush=True)
        raise result.interrupted
    _report(result, check)
    flags = [x for x in check.coverage["not_judged"] if x.get("flag")]
    for x in flags:
        print(f"  NOT JUDGED: {x.get('flag') or x.get('what')}: {x['reason']}")
    if flags and result.holds:
        print("  verdict: NOT JUDGED (exit 4): the proof holds on the model, but the launch is outside it where named")
    print(f"  time: {result.elapsed_s:.1f} s ({result.cpu_s:.1f} s CPU), {result.steps} steps", file=sys.stderr)
    return check.exit_code


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prove", help="the shape invariants at every batch size 1..--max-bs under every capture list")
    p.add_argument("--variant", default=None, help="default fixed-threshold (or --engine's default variant)")
    add_engine_option(p)
    add_server_args_options(p)
    p.add_argument("--max-bs", type=int_arg(1, 256), default=None,
                   help="the bound: most live requests, 1..256 (also max_running_requests; default 256, or the "
                        "launch's --max-running-requests; under DP attention: per rank, default the launch's // dp)")
    p.add_argument("--capture-lists", default="all",
                   help="comma-separated from config, sglang, every, single, one (default all; docs/prove.md)")
    p.add_argument("--jobs", type=int_arg(1, 64), default=1,
                   help="run the capture lists in this many processes (same verdict and trace)")
    p.add_argument("--exhaustive", action="store_true",
                   help="run every bound's scripts, not one per interval of batch sizes (docs/prove.md; slow)")
    p.add_argument("--failures", default=None, help="folder for the failure trace (default ./specstate-failures)")
    add_output_options(p)
    p.set_defaults(func=_cmd_prove)
