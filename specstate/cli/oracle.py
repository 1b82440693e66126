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
    p.add_argument("--examples", type=int_arg(1, 100_000), default=200,
                   help="fuzzed workloads (default 200)")
    p.add_argument("--trace", default=None, help="replay this trace's workload on the oracle and the model instead")
    p.add_argument("--random", action="store_true", help="new examples each run (default: derandomized, as in CI)")
    p.add_argument("--dp", type=int_arg(1, 8), default=1,
                   help="DP-attention ranks: upstream's scheduler on this many gloo processes against the "
                        "multi-rank model (0.5.12 only; docs/multirank.md)")
    p.set_defaults(func=_cmd_oracle)
    _add_worker_parser(sub)


def _add_worker_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from specstate.oracle.worker.catalog import RELEASES

    p = sub.add_parser("worker-oracle", help="upstream's ForwardBatch.init_new, CudaGraphRunner.can_run and "
                                             "replay_prepare on CPU against the model's batches (docs/oracle.md)")
    p.add_argument("--engine", required=True, type=_release_arg(RELEASES), metavar="{" + ",".join(RELEASES) + "}",
                   help="the sglang release whose worker-side functions are the oracle")
    p.add_argument("--examples", type=int_arg(1, 100_000), default=500, help="fuzzed workloads (default 500)")
    p.add_argument("--trace", default=None, help="feed this trace's worker batches (its variant) to upstream instead")
    p.add_argument("--random", action="store_true", help="new examples each run (default: derandomized, as in CI)")
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
        return _worker_replay(args.engine, args.trace)
    res = fuzz_worker(args.engine, examples=args.examples, derandomize=not args.random)
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


def _release_arg(releases: tuple[str, ...]):  # noqa: ANN202
    """``0.5.23`` or the family's name ``sglang-0.5.23`` -> ``0.5.23``; anything else a usage error naming
    the choices."""

    def parse(value: str) -> str:
        release = value.removeprefix("sglang-")
        if release not in releases:
            raise argparse.ArgumentTypeError(f"invalid choice: {value!r} (choose from "
                                             f"{', '.join(repr(r) for r in releases)})")
        return release

    return parse


def _cmd_oracle(args: argparse.Namespace) -> int:
    if args.dp > 1:
        return _ranks(args)
    if args.trace:
        return _replay(args.engine, args.trace)
    from specstate.oracle.fuzz import fuzz, replay_commands

    res = fuzz(args.engine, examples=args.examples, derandomize=not args.random)
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


def _replay(release: str, path: str) -> int:
    from specstate.fuzz.trace import load_trace
    from specstate.oracle.differential import differential

    trace = load_trace(path)
    d = differential(release, trace.config, trace.actions)
    print(d.describe())
    for m in d.mismatches[1:8]:
        print(f"  {m.describe()}")
    sys.stdout.flush()
    return 0 if d.ok else 1


def _ranks(args: argparse.Namespace) -> int:
    """``--dp N``: the N-rank oracle (``specstate.oracle.multirank``) on the seed's config."""
    import random
    import time

    from specstate.errors import UsageError
    from specstate.model import SpecConfig, action_to_json
    from specstate.oracle.multirank import RankOracle, fuzz_ranks

    if args.engine != "0.5.12" or args.trace:
        raise UsageError("--dp N > 1: expected --engine 0.5.12 and no --trace (the N-rank oracle runs 0.5.12's "
                         "scheduler on fuzzed workloads)")
    seed = random.randrange(1 << 30) if args.random else 0
    t0 = time.perf_counter()
    with RankOracle(args.dp) as oracle:
        ran, bad, workload = fuzz_ranks(oracle, SpecConfig(target_kv_pool_size=8192, draft_kv_pool_size=8192),
                                        cases=args.examples, seed=seed)
    print(f"sglang 0.5.12 on {args.dp} DP ranks: {ran} workloads (seed {seed}) in {time.perf_counter() - t0:.1f} s")
    if bad is None:
        print("0 mismatches")
        return 0
    print(bad.describe())
    print(f"  workload: {[action_to_json(a) for a in workload]}")
    return 1
