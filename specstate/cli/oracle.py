"""``specstate oracle --engine RELEASE``: the differential fuzzer by hand, or one trace replayed
on the oracle and the model (``specstate.cli`` calls ``add_parsers``)."""

from __future__ import annotations

import argparse
import sys

from specstate._cli_support import int_arg

__all__ = ["add_parsers"]


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from specstate.oracle.catalog import RELEASES, core_release

    p = sub.add_parser("oracle", help="upstream's real scheduler on CPU against the model, step by step (docs/oracle.md)")
    p.add_argument("--engine", required=True, type=_release_arg(RELEASES), metavar="{" + ",".join(RELEASES) + "}",
                   help="the sglang release whose scheduler is the oracle (its family's name, sglang-X.Y.Z as "
                        "the other commands take it, works too)")
    p.add_argument("--examples", type=int_arg(1, 100_000), default=None,
                   help="fuzzed workloads (default 200; not with --trace)")
    p.add_argument("--trace", default=None, help="replay this trace's workload on the oracle and the model instead")
    p.add_argument("--random", action="store_true",
                   help="new examples each run (default: derandomized, as in CI; not with --trace)")
    p.add_argument("--page-size", default="1", type=_page_sizes_arg, metavar="P[,P...]",
                   help="KV page sizes the fuzzed configs draw from (default 1; e.g. 16,64: paged KV, every "
                        "release, topk 1; not with --trace, whose config says its own)")
    p.add_argument("--static", action="store_true",
                   help="fuzz launches without --speculative-adaptive: static speculation on EAGLEWorkerV2 "
                        "(the releases whose oracle runs the overlap loop; not with --trace)")
    p.add_argument("--dp", type=int_arg(1, 8), default=1,
                   help="DP-attention ranks: upstream's scheduler on this many gloo processes against the "
                        f"multi-rank model ({core_release()} only: the shared core's release; docs/multirank.md)")
    from specstate._cli_output import add_output_options

    add_output_options(p, quiet=False)
    p.set_defaults(func=_cmd_oracle)
    _add_worker_parser(sub)


def _add_worker_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from specstate.oracle.worker.catalog import RELEASES

    p = sub.add_parser("worker-oracle", help="upstream's ForwardBatch.init_new, CudaGraphRunner.can_run and "
                                             "replay_prepare on CPU against the model's batches (docs/oracle.md)")
    p.add_argument("--engine", required=True, type=_release_arg(RELEASES), metavar="{" + ",".join(RELEASES) + "}",
                   help="the sglang release whose worker-side functions are the oracle")
    p.add_argument("--examples", type=int_arg(1, 100_000), default=None,
                   help="fuzzed workloads (default 500; not with --trace)")
    p.add_argument("--trace", default=None, help="feed this trace's worker batches (its variant) to upstream instead")
    p.add_argument("--random", action="store_true", help="new examples each run (default: derandomized, as in CI; not with --trace)")
    p.set_defaults(func=_cmd_worker_oracle)


def _worker_replay(release: str, path: str) -> int:
    from specstate.fuzz.trace import load_trace
    from specstate.oracle.worker.compare import WorkerProcess
    from specstate.oracle.worker.differential import worker_differential

    trace = load_trace(path)
    with WorkerProcess(release) as process:
        d = worker_differential(process, trace.config, trace.variant, trace.actions)
    print(f"sglang {release}, variant {trace.variant}: {len(d.batches)} worker batches; "
          + (f"first mismatch: {d.mismatch.describe()}" if d.mismatch else "0 mismatches"))
    return 0 if d.ok else 1


def _cmd_worker_oracle(args: argparse.Namespace) -> int:
    from specstate.oracle.worker.fuzz import fuzz_worker, replay_commands, save_failure

    if args.trace:
        _trace_only(args)
        return _worker_replay(args.engine, args.trace)
    res = fuzz_worker(args.engine, examples=500 if args.examples is None else args.examples,
                      derandomize=not args.random)
    reached = ", ".join(f"{k} {v}" for k, v in sorted(res.reached.items()))
    f = res.figures
    print(f"sglang {args.engine}: {res.examples} workloads, {res.batches} worker batches in {res.seconds} s (oracle: "
          f"imports {f.get('import_s')} s, batches {round(f.get('run_s', 0.0), 2)} s, peak RSS {f.get('peak_rss_mb')} MB); "
          f"reached (workloads): {reached or 'nothing'}")
    if res.failure is None or res.failure.mismatch is None:
        print("0 mismatches")
        return 0
    print(f"variant {res.failure.variant}: {res.failure.mismatch.describe()}")
    path = save_failure(res)
    print(f"minimal workload: {path}")
    for c in replay_commands(args.engine, path):
        print(f"  replay: {c}")
    return 1


def _page_sizes_arg(value: str) -> tuple[int, ...]:
    """``16,64`` -> ``(16, 64)``: each a power of two in 1..256 (sglang's paged backends' sizes)."""
    try:
        sizes = tuple(sorted({int(v) for v in value.split(",")}))
    except ValueError:
        sizes = ()
    if not sizes or any(p < 1 or p > 256 or p & (p - 1) for p in sizes):
        shown = repr(value) if len(value) <= 40 else repr(value[:37]) + "..."
        raise argparse.ArgumentTypeError(f"expected page sizes, powers of two in 1..256 separated by commas, but got {shown}")
    return sizes


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
    if args.dp > 1:
        _no_json(args)
        if args.static:
            from specstate.errors import UsageError
            from specstate.oracle.catalog import core_release

            raise UsageError(f"--static: not with --dp (the N-rank oracle runs {core_release()}'s spec v1); drop it")
        return _ranks(args)
    from specstate._cli_output import json_output

    return json_output(_oracle)(args)


def _oracle(args: argparse.Namespace) -> int:
    if args.trace:
        _trace_only(args)
        return _replay(args, args.engine, args.trace)
    from specstate.integration.oracle_fuzz import fuzz, replay_commands

    if args.static:
        _static_release(args.engine)
    res = fuzz(args.engine, examples=200 if args.examples is None else args.examples, derandomize=not args.random,
               page_sizes=args.page_size, static=args.static)
    reached = ", ".join(f"{k} {v}" for k, v in sorted(res.reached.items()))
    kind = " static (no --speculative-adaptive)" if args.static else ""
    print(f"sglang {args.engine}:{kind} {res.examples} workloads in {res.seconds} s (oracle: imports {res.import_s} s, "
          f"workloads {round(res.oracle_s, 1)} s, peak RSS {res.peak_rss_mb} MB); reached: {reached or 'nothing'}")
    problems = _model_violations(res.model_violations, res.examples)
    if res.failure is None:
        print("0 mismatches")
    else:
        print(res.failure.describe())
        for m in res.failure.mismatches[1:5]:
            print(f"  {m.describe()}")
        print(f"minimal workload: {res.trace_path}")
        for c in replay_commands(args.engine, res.trace_path or ""):
            print(f"  replay: {c}")
        problems.insert(0, res.failure.describe())
    args.json_result = _result(args.engine, f"{res.examples} fuzzed workloads", problems, dict(res.reached),
                               res.trace_path, res.seconds)
    return args.json_result.exit_code


def _trace_only(args: argparse.Namespace) -> None:
    """``--examples``, ``--random`` and ``--page-size`` steer the fuzzer: with ``--trace`` they would do nothing."""
    from specstate.errors import UsageError

    unused = [o for o, given in (("--examples", args.examples is not None), ("--random", args.random),
                                 ("--page-size", getattr(args, "page_size", (1,)) != (1,)),
                                 ("--static", getattr(args, "static", False))) if given]
    if unused:
        raise UsageError(f"{' and '.join(unused)}: not with --trace (the trace is one workload, replayed as "
                         f"it is); drop {'them' if len(unused) > 1 else 'it'}")


def _static_release(release: str) -> None:
    """``--static`` fuzzes launches without ``--speculative-adaptive``: an overlap release's (the v2 worker)."""
    from specstate.errors import UsageError
    from specstate.oracle.catalog import RELEASES, is_overlap

    if not is_overlap(release):
        overlap = ", ".join(r for r in RELEASES if is_overlap(r))
        raise UsageError(f"--static: expected an overlap release (the v2 worker: {overlap}) but got {release}: "
                         "its oracle runs spec v1, where speculation is always static; drop --static")


def _no_json(args: argparse.Namespace) -> None:
    """``--dp N`` prints its own lines and has no JSON result (``--json`` would do nothing)."""
    from specstate.errors import UsageError

    unused = [o for o, given in (("--json", args.json), ("--timings", args.timings)) if given]
    if unused:
        raise UsageError(f"{' and '.join(unused)}: not with --dp (the N-rank oracle prints its lines only, no JSON "
                         f"result); drop {'them' if len(unused) > 1 else 'it'}")


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


def _model_violations(found: list[tuple[int, str]], examples: int) -> list[str]:
    """The model's own invariant violations, printed: the oracle compares observations, but a broken
    invariant of the model is a finding too (``differential.judge`` returns them as well)."""
    if not found:
        print("0 model invariant violations")
        return []
    print(f"{len(found)} of {examples} workloads broke a model invariant; first (workload {found[0][0]}): {found[0][1]}")
    return [f"model invariant violated (workload {i}): {text}" for i, text in found]


def _result(release: str, what: str, problems: list[str], reached: dict[str, int], trace: str | None,
            seconds: float):  # noqa: ANN202
    from pathlib import Path

    from specstate.check_result import CheckResult, run_coverage

    coverage = run_coverage(f"oracle: {what} on sglang {release}'s own scheduler (CPU) against the model", reached=reached)
    return CheckResult("oracle", f"sglang {release}", f"sglang-{release}", not problems, None, tuple(problems),
                       Path(trace) if trace else None, None, seconds, {"release": release}, coverage)


def _replay(args: argparse.Namespace, release: str, path: str) -> int:
    from specstate.fuzz.trace import load_trace
    from specstate.integration.oracle_differential import differential

    trace = load_trace(path)
    _same_family(release, path, trace.variant)
    d = differential(release, trace.config, trace.actions)
    print(d.describe())
    for m in d.mismatches[1:8]:
        print(f"  {m.describe()}")
    problems = _model_violations([(0, v.describe()) for v in d.violations[:1]], 1)
    if not d.ok:
        problems.insert(0, d.describe())
    sys.stdout.flush()
    args.json_result = _result(release, f"the workload of {path}", problems, {r: 1 for r in d.oracle.reached}, None, 0.0)
    return args.json_result.exit_code


def _ranks(args: argparse.Namespace) -> int:
    """``--dp N``: the N-rank oracle (``specstate.oracle.multirank``) on the seed's config."""
    import random
    import time

    from specstate.errors import UsageError
    from specstate.model import SpecConfig, action_to_json
    from specstate.oracle.catalog import core_release
    from specstate.oracle.multirank import RankOracle, fuzz_ranks

    release = core_release()  # the shared core's: the multi-rank model composes its family's ranks
    if args.engine != release or args.trace:
        raise UsageError(f"--dp N > 1: expected --engine {release} and no --trace (the N-rank oracle runs {release}'s "
                         "scheduler on fuzzed workloads)")
    seed = random.randrange(1 << 30) if args.random else 0
    t0 = time.perf_counter()
    with RankOracle(args.dp) as oracle:
        ran, bad, workload = fuzz_ranks(oracle, SpecConfig(target_kv_pool_size=8192, draft_kv_pool_size=8192),
                                        cases=200 if args.examples is None else args.examples, seed=seed)
    print(f"sglang {release} on {args.dp} DP ranks: {ran} workloads (seed {seed}) in {time.perf_counter() - t0:.1f} s")
    if bad is None:
        print("0 mismatches")
        return 0
    print(bad.describe())
    print(f"  workload: {[action_to_json(a) for a in workload]}")
    return 1
