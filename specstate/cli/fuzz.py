"""``specstate`` subcommands of the fuzzer: ``reproduce``, ``fuzz``, ``minimize`` and ``explore``
(``specstate.cli`` calls ``add_parsers``; ``graph`` is ``specstate/cli/graph.py``'s)."""

from __future__ import annotations

import argparse
import sys
import time

from specstate._cli_output import add_output_options, json_output
from specstate._cli_support import add_allow_import, guard_variant_import, int_arg
from specstate._engine_option import add_engine_option, add_server_args_options, resolve_launch, resolve_variant

__all__ = ["add_parsers", "add_allow_import", "guard_variant_import", "explore_args", "run_explore"]

SEED = int_arg(0, (1 << 64) - 1)


@json_output
def _cmd_reproduce(args: argparse.Namespace) -> int:
    from pathlib import Path

    from specstate.cli.across import is_all, reproduce_all
    from specstate.cli.vllm import is_vllm_trace

    if args.trace is not None and is_vllm_trace(args.trace):  # the vLLM family's trace (specstate/cli/vllm.py)
        from specstate.cli.vllm import cmd_reproduce

        return cmd_reproduce(args)
    if is_all(args):
        return reproduce_all(args)
    from specstate.cli.multirank import maybe_multirank

    status = maybe_multirank(args, "reproduce")  # a multi-rank trace (specstate.multirank)
    if status is not None:
        return status
    t0 = time.perf_counter()
    if args.trace is not None:  # read once; options that contradict the trace refused (fuzz/reproduce.py)
        from specstate.fuzz.reproduce import check_trace_engine, reproduce_trace, trace_for_options

        trace = trace_for_options(args.trace, variant=args.variant, engine=args.engine, seed=args.seed,
                                  scenario=args.scenario)
        guard_variant_import(trace, args.trace, args)
        check_trace_engine(trace, args.trace, args.engine, allow_variant_import=True)
        rep = (_reproduce_on_launch(trace, args) if _has_launch(args)
               else reproduce_trace(trace, args.trace, allow_variant_import=True))
    elif resolve_variant(args, None) is not None and _has_launch(args):
        rep = _scenario_on_launch(args)
    elif args.variant is not None and args.seed is not None:
        from specstate.fuzz.reproduce import reproduce_seed

        rep = reproduce_seed(args.seed, args.variant, scenario=args.scenario, progress=not args.quiet)
    else:
        from specstate.errors import UsageError

        raise UsageError("expected TRACE.json, or --seed N --variant V [--scenario S]")
    print(rep.report)
    from specstate.testing._api import from_run  # here: a trace refused above imports no model (tests/test_startup.py)

    again = None if args.trace is not None else (f"specstate reproduce --seed {args.seed} --variant {args.variant}"
                                                 + (f" --scenario {args.scenario}" if args.scenario else ""))
    args.json_result = from_run(rep.result, kind="reproduce", subject=args.trace or f"seed {args.seed}",
                                trace_path=Path(args.trace) if args.trace else None, repro_command=again,
                                elapsed_s=time.perf_counter() - t0,
                                details={"exit_code": rep.exit_code, "verdict": rep.report.splitlines()[-1].strip()},
                                launch=getattr(args, "launch", None))
    if rep.exit_code == 0 and args.json_result.verdict == "not judged":
        print(f"  verdict: not judged (exit 4): {'; '.join(x['reason'] for x in args.json_result.coverage['not_judged'])}")
        return args.json_result.exit_code
    return rep.exit_code


def _has_launch(args: argparse.Namespace) -> bool:
    from specstate._engine_option import has_launch

    return has_launch(args)


def _reproduce_on_launch(trace, args: argparse.Namespace):  # noqa: ANN001, ANN202
    """The trace's actions on the launch's config (its variant unless --variant): a recorded
    violation that differs is exit 3, as for any replay."""
    from dataclasses import replace
    from pathlib import Path

    from specstate.fuzz.reproduce import Reproduction, _verdict
    from specstate.fuzz.trace import replay_trace
    from specstate.report import format_result

    args.variant = args.variant or trace.variant
    launch = resolve_launch(args)
    result = replay_trace(replace(trace, config=launch.config, variant=args.variant))
    line, code = _verdict(result, trace.violation)
    title = f"trace {Path(args.trace).name} / {args.variant} on the given launch"
    return Reproduction(result, format_result(result, title=title) + "\n" + line, code)


def _scenario_on_launch(args: argparse.Namespace):  # noqa: ANN202
    from specstate.errors import UsageError
    from specstate.fuzz.reproduce import EXIT_PASS, EXIT_VIOLATION, Reproduction
    from specstate.launch_check._parts import play_on
    from specstate.report import format_result

    if args.scenario is None or args.seed is None or args.variant is None:
        raise UsageError("expected TRACE.json, or --seed N --variant V --scenario S, with server flags "
                         "(the generator's cases draw their own config)")
    result = play_on(resolve_launch(args).config, args.scenario, args.variant, args.seed)
    return Reproduction(result, format_result(result, title=f"{args.scenario} / {args.variant} (seed {args.seed}) "
                        f"on the given launch"), EXIT_PASS if result.ok else EXIT_VIOLATION)


def _fuzz_launch(args: argparse.Namespace, launch) -> int:  # noqa: ANN001
    """``fuzz`` on a launch's config: workloads only, ``--max-examples`` (else the profile's) cases."""
    from specstate.fuzz.profiles import profile_settings
    from specstate.launch_check._parts import fuzz_part
    from specstate.launch_check._verdict import part_result

    n = args.max_examples or profile_settings(args.profile).max_examples
    part = fuzz_part(launch.config, args.variant, budget_s=float("inf"), max_examples=n, seed=args.seed or 0,
                     failures=args.failures, quiet=args.quiet)
    r = args.json_result = part_result(part, launch)
    print(f"fuzz {args.variant} on the given launch ({launch.describe()}): {part.summary}")
    print(r.report if not r.ok else "  PASS: no violation")
    return r.exit_code


def _launch_profile(args: argparse.Namespace) -> None:
    """With a launch, the profile gives the number of cases only (the launch's fuzz part sets the
    rest): ``--profile`` beside ``--max-examples`` would do nothing."""
    from specstate.cli._unused import refuse_unused

    launch = bool(args.server_argv) or args.server_args is not None or args.server_config is not None
    refuse_unused(args, [(("profile",), not launch or args.max_examples is None,
                          "with a launch, the profile gives only the number of cases, and --max-examples gives it")])


@json_output
def _cmd_fuzz(args: argparse.Namespace) -> int:
    from specstate.cli.across import enter, fuzz_all
    from specstate.model import get_variant
    from specstate.testing import fuzz

    from specstate._engine_option import is_vllm

    if is_vllm(args):  # the vLLM family's fuzz (specstate/cli/vllm.py)
        from specstate.cli.vllm import cmd_fuzz

        return cmd_fuzz(args)
    _launch_profile(args)
    status = enter(args, fuzz_all)
    if status is not None:
        return status
    from specstate.cli.multirank import maybe_multirank

    status = maybe_multirank(args, "fuzz")  # DP attention on N > 1 ranks: the multi-rank model
    if status is not None:
        return status
    v = get_variant(args.variant)  # the entry: resolved once, the object goes down
    launch = resolve_launch(args)
    if launch is not None:
        return _fuzz_launch(args, launch)
    r = fuzz(v, profile=args.profile, max_examples=args.max_examples, seed=args.seed,
             failures=args.failures, quiet=args.quiet, announce=True)
    d = r.details
    print(f"fuzz {args.variant} (profile {args.profile}, seed {args.seed}): "
          f"max crossings {d['max_crossings']}, witnesses {', '.join(d['witnesses']) or 'none'}")
    print(f"  time: {r.elapsed_s:.1f} s", file=sys.stderr)
    if r.violation is not None:
        print(f"  shrunk to {d['shrunk_length']} actions")
        print(f"  first violation after {d['first_violation_s']:.2f} s", file=sys.stderr)
    print(r.report if not r.ok else "  PASS: no violation, every wanted witness reached")
    args.json_result = r
    return r.exit_code


@json_output
def _cmd_minimize(args: argparse.Namespace) -> int:
    from specstate.fuzz.minimize import minimize_failure
    from specstate.fuzz.trace import Trace, load_trace, reproduce_command, save_trace

    from specstate.progress import progress_bar
    from specstate.testing._api import from_run

    from specstate.fuzz.trace import failure_dir

    t0 = time.perf_counter()
    failure_dir(args.failures)
    from specstate.cli.vllm import is_vllm_trace

    if is_vllm_trace(args.trace):  # check, run and fuzz shrink vLLM findings themselves
        from specstate._engine_option import refuse_vllm

        refuse_vllm(args)
    trace = load_trace(args.trace)
    guard_variant_import(trace, args.trace, args)
    if _has_launch(args):  # the trace's actions minimised on the launch's config
        from dataclasses import replace

        args.variant = trace.variant
        trace = replace(trace, config=resolve_launch(args).config)
    with progress_bar(f"minimize {trace.variant}", unit="run", quiet=args.quiet) as bar:
        m = minimize_failure(trace.config, trace.variant, trace.actions, bfs_depth=args.bfs_depth,
                             on_run=lambda: bar.update(1))
    out = Trace(trace.config, trace.variant, m.actions, m.result.first.to_json() if m.result.first else None,
                trace.seed, trace.scenario, notes={**trace.notes, **m.notes()})
    path = save_trace(out, args.failures, name=args.out, overwrite=args.out is not None)
    print(f"{len(trace.actions)} -> {m.verdict()}\n  {m.result.first.describe() if m.result.first else ''}")
    print(f"  trace: {path}\n  reproduce with: {reproduce_command(path, out.variant)}")
    args.json_result = from_run(m.result, kind="minimize", subject=str(args.trace), trace_path=path,
                                elapsed_s=time.perf_counter() - t0, details=m.notes(),
                                launch=getattr(args, "launch", None))
    return 0


def run_explore(args: argparse.Namespace, *, keep_graph: bool = False):  # noqa: ANN202
    from specstate.fuzz.explore_parallel import default_jobs
    from specstate.testing._api import explore_bfs

    resolve_variant(args, "naive-threshold")
    launch = resolve_launch(args) if getattr(args, "launch", None) is None else args.launch
    if launch is not None:
        return _explore_launch(args, launch, keep_graph=keep_graph)
    return explore_bfs(args.variant, max_live=args.max_bs, max_arrivals=args.max_arrivals, depth=args.depth,
                       max_states=args.max_states, quiet=args.quiet, keep_graph=keep_graph,
                       jobs=getattr(args, "jobs", 1) or default_jobs(), reduce=args.reduce)


def _explore_launch(args: argparse.Namespace, launch, *, keep_graph: bool):  # noqa: ANN001, ANN202
    """BFS on the launch's config; the batch is bounded by ``--max-bs`` (at most 8) and the
    launch's ``max_running_requests``, and the command says how deep that goes."""
    from specstate.fuzz.explore import default_alphabet, explore
    from specstate.fuzz.explore_parallel import default_jobs
    from specstate.progress import progress_bar

    mrr = launch.config.max_running_requests
    live = min(args.max_bs, mrr)
    print(f"specstate explore: batches of up to {live} of the launch's max_running_requests {mrr} (--max-bs, at most "
          f"8: the BFS grows exponentially with it; specstate prove covers every bs 1..{min(mrr, 256)})",
          file=sys.stderr)
    alphabet = default_alphabet(max_live=live, max_arrivals=args.max_arrivals or live + 1)
    with progress_bar(f"explore {args.variant}", unit="state", quiet=args.quiet) as bar:
        return explore(launch.config, args.variant, alphabet=alphabet, max_depth=args.depth,
                       max_states=args.max_states, on_node=lambda n, t, d: bar.update(n - bar.n),
                       keep_graph=keep_graph, jobs=getattr(args, "jobs", 1) or default_jobs(), reduce=args.reduce)


def _explore_result(r, args: argparse.Namespace):  # noqa: ANN001, ANN202
    """``from_explore``; on a launch, the counterexample's trace is written with the launch's config."""
    from specstate.fuzz.trace import Trace, reproduce_command, safe_part, save_trace
    from specstate.testing._api import from_explore

    from dataclasses import replace

    from specstate.testing._api import explore_coverage

    launch = getattr(args, "launch", None)
    if launch is None or r.counterexample is None:
        return replace(from_explore(r, failures=args.failures), coverage=explore_coverage(r, launch))
    first = r.violations[0] if r.violations else None
    trace = Trace(config=launch.config, variant=r.variant, actions=list(r.counterexample),
                  violation=first.to_json() if first else None, notes={"source": "explore", "shortest": True})
    path = save_trace(trace, args.failures, name=f"{safe_part(r.variant)}-explore-launch.json")
    from specstate.check_result import CheckResult

    return CheckResult("explore", f"{r.variant} (BFS, given launch)", r.variant, False, first,
                       tuple(v.describe() for v in r.violations), path, reproduce_command(path, r.variant),
                       r.elapsed_s, {"states": r.states, "transitions": r.transitions, "complete": r.complete,
                                     "max_depth_reached": r.max_depth_reached,
                                     "counterexample_length": len(r.counterexample)}, explore_coverage(r, launch))


@json_output
def _cmd_explore(args: argparse.Namespace) -> int:
    from specstate.fuzz.reads import reduction_notes
    from specstate.fuzz.trace import failure_dir
    from specstate.model import action_to_json, get_variant
    from specstate.cli.multirank import maybe_multirank

    status = maybe_multirank(args, "explore")  # DP attention on N > 1 ranks: the multi-rank model
    if status is not None:
        return status
    resolve_variant(args, "naive-threshold")
    failure_dir(args.failures)
    get_variant(args.variant)
    r = run_explore(args)
    for line in reduction_notes(r.kept, reduce=args.reduce):  # what the key kept for the variant's own operations
        print(f"  {line}", file=sys.stderr)
    result = args.json_result = _explore_result(r, args)
    if r.interrupted is not None:
        print(f"specstate: explore {r.variant}: interrupted; the shortest counterexample found so far "
              f"({len(r.counterexample or [])} actions) is in {result.trace_path}\n"
              f"  reproduce with: {result.repro_command}", file=sys.stderr, flush=True)
        raise r.interrupted
    print(f"explore {r.variant}: {r.states} states, {r.transitions} transitions, depth {r.max_depth_reached}, "
          f"{'frontier exhausted within the bounds' if r.complete else 'stopped at max-states'}")
    print(f"  time: {r.elapsed_s:.1f} s, {r.states_per_s:.0f} states/s", file=sys.stderr)
    print(f"  witnesses reached: {', '.join(sorted(r.witnesses)) or 'none'}")
    if r.counterexample is None:
        print("  no violation in the explored space")
        for x in result.coverage["not_judged"]:
            print(f"  NOT JUDGED: {x.get('flag') or x.get('what')}: {x['reason']}")
        if result.exit_code:
            print(f"  verdict: not judged (exit {result.exit_code})")
        return result.exit_code
    print(f"  shortest counterexample ({len(r.counterexample)} actions):")
    for i, a in enumerate(r.counterexample, 1):
        print(f"    {i:>3}: {action_to_json(a)}")
    for v in r.violations:
        print(f"  {v.describe()}")
    print(f"  trace: {result.trace_path}\n  reproduce with: {result.repro_command}")
    return 1


def explore_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", default=None, help="default naive-threshold (or --engine's default variant)")
    add_engine_option(p)
    add_server_args_options(p)
    p.add_argument("--max-bs", type=int_arg(1, 8), default=3, help="most live requests (no arrival beyond), 1..8")
    p.add_argument("--max-arrivals", type=int_arg(1, 16), default=None,
                   help="requests in all, 1..16 (default max-bs + 1)")
    p.add_argument("--depth", type=int_arg(1, 40), default=8, help="most actions per path, 1..40")
    p.add_argument("--max-states", type=int_arg(1, 10_000_000), default=200_000)
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.add_argument("--reduce", action=argparse.BooleanOptionalAction, default=True,
                   help="one node per class of equivalent states: finished requests' spent fields erased, request "
                        "ids and the radix tree's ids and clock renamed canonically, and sleep sets over the "
                        "commuting arrivals and aborts (the same verdicts and shortest counterexample lengths; "
                        "default on, --no-reduce: every concrete state and transition; "
                        "docs/fuzzing.md)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("reproduce", help="replay a failure trace, or a seed (generator or --scenario)")
    r.add_argument("trace", nargs="?", default=None, help="a trace JSON written by a failing run")
    r.add_argument("--seed", type=SEED, default=None)
    r.add_argument("--variant", default=None)
    add_engine_option(r, allow_all=True)
    add_server_args_options(r)
    r.add_argument("--scenario", default=None, help="replay this built-in scenario with --seed")
    add_allow_import(r)
    add_output_options(r)
    r.set_defaults(func=_cmd_reproduce)
    f = sub.add_parser("fuzz", help="run the Hypothesis state machine on one variant")
    f.add_argument("--variant", default=None, help="default fixed-threshold (or --engine's default variant)")
    add_engine_option(f, allow_all=True)
    add_server_args_options(f)
    f.add_argument("--profile", default="dev", choices=("dev", "ci", "deep"))
    f.add_argument("--seed", type=SEED, default=None, help="a Hypothesis seed (random, no database)")
    f.add_argument("--max-examples", type=int_arg(1, 10_000_000), default=None)
    f.add_argument("--failures", default=None)
    add_output_options(f)
    f.set_defaults(func=_cmd_fuzz)
    m = sub.add_parser("minimize", help="delta-debug a failing trace and check minimality by BFS")
    m.add_argument("trace")
    m.add_argument("--bfs-depth", type=int_arg(0, 12), default=None)
    m.add_argument("--failures", default=None)
    m.add_argument("--out", default=None, help="file name for the minimised trace (in --failures; replaced if there)")
    add_server_args_options(m)
    add_allow_import(m)
    add_output_options(m)
    m.set_defaults(func=_cmd_minimize)
    e = sub.add_parser("explore", help="exhaustive BFS over the model's abstract state space")
    explore_args(e)
    e.add_argument("--failures", default=None, help="folder for the counterexample trace")
    e.add_argument("--jobs", type=int_arg(0, 64), default=0,
                   help="processes for the search (0: both cores); the result is the same for any N")
    add_output_options(e, quiet=False)
    e.set_defaults(func=_cmd_explore)
