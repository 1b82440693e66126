"""``specstate check [--engine E] [--variant V] -- <flags or a whole launch line>``.

One line per part as it finishes (start, sweep, fuzz, prove: passed / FAILED / not modelled, what
it covered), then the verdict: the first violation with its step and shapes, the trace file and
the one command that reproduces it, after the coverage block (what was judged and assumed).
Exit 0: every part judged and passed; 1: a violation; 2: the launch (or an option) is wrong,
one line; 4: no violation, but part of the launch is outside the model (not judged).
"""

from __future__ import annotations

import argparse
import sys

from specstate._cli_output import add_output_options, json_output
from specstate._cli_support import int_arg
from specstate._engine_option import add_engine_option, add_server_args_options, resolve_launch
from specstate.errors import UsageError

__all__ = ["add_parsers", "format_part", "format_verdict"]

_SEED = int_arg(0, (1 << 63) - 1)


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 1 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"expected seconds in [1, 86400] but got {text[:40]!r}")
    return value


def _parts(text: str) -> tuple[str, ...]:
    from specstate.launch_check import PARTS

    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not names or any(n not in PARTS for n in names):
        raise argparse.ArgumentTypeError(f"expected comma-separated parts from {list(PARTS)} but got {text[:60]!r}")
    return names


def format_part(part) -> str:  # noqa: ANN001
    """A part's lines: status and summary; a failure's violation, shapes and trace."""
    if part.status in ("not modelled", "not run"):
        return f"  {part.name:6s} {part.summary}"
    if part.status == "inconclusive":
        return f"  {part.name:6s} {'INCONCLUSIVE':7s} {part.summary}"
    lines = [f"  {part.name:6s} {'passed' if part.status == 'passed' else 'FAILED':7s} {part.summary}"]
    if part.violation is not None:
        lines.append(f"  {'':14s} {part.violation.describe()}")
        if part.violation.shapes:
            lines.append(f"  {'':14s} shapes: {part.violation.shapes}")
    if part.trace_path is not None:
        lines.append(f"  {'':14s} trace: {part.trace_path}")
    return "\n".join(lines)


def format_verdict(result) -> str:  # noqa: ANN001
    from specstate.check_result import coverage_lines

    return "\n".join([*coverage_lines(result.coverage), _verdict_lines(result)])


def _verdict_lines(result) -> str:  # noqa: ANN001
    parts = result.details["parts"]
    failed = [p for p in parts if p["status"] == "failed"]
    skipped = [p["name"] for p in parts if p["status"] == "not modelled"]
    unrun = [p["name"] for p in parts if p["status"] == "not run"]
    aside = f" ({', '.join(skipped)}: not modelled for this family)" if skipped else ""
    aside += f" ({', '.join(unrun)}: not run, the engine does not start)" if unrun else ""
    if result.verdict == "pass":
        return f"verdict: PASS: every part passed{aside}"
    if result.verdict == "not judged":
        what = "; ".join(x.get("flag") or x.get("what") for x in result.coverage["not_judged"])
        return f"verdict: NOT JUDGED: no violation in what ran{aside}; not judged: {what} (see above; exit 4)"
    v = result.violation
    lines = [f"verdict: FAIL: {', '.join(p['name'] for p in failed)} failed{aside}",
             f"  first violation ({failed[0]['name']}): {v.describe() if v else failed[0]['summary']}"]
    if v is not None and v.shapes:
        lines.append(f"  shapes: {v.shapes}")
    lines += [f"  trace: {result.trace_path}"] if result.trace_path is not None else []
    lines += [f"  reproduce with: {result.repro_command}"]
    return "\n".join(lines)


def _fuzz_options(args: argparse.Namespace) -> None:
    """``--budget``, ``--max-examples`` and ``--seed`` steer the fuzz part only: given without it
    in ``--parts`` they would do nothing, so they are refused; then the defaults are filled in."""
    from specstate.launch_check import DEFAULT_BUDGET_S

    given = [o for o, v in (("--budget", args.budget), ("--max-examples", args.max_examples), ("--seed", args.seed))
             if v is not None]
    if given and "fuzz" not in args.parts:
        raise UsageError(f"{', '.join(given)}: the fuzz part's options, but --parts {','.join(args.parts)} runs no "
                         f"fuzz: add fuzz to --parts, or drop {'them' if len(given) > 1 else 'it'}")
    args.budget = DEFAULT_BUDGET_S if args.budget is None else args.budget
    args.seed = 0 if args.seed is None else args.seed


@json_output
def _cmd_check(args: argparse.Namespace) -> int:
    from specstate.cli.across import check_all, enter
    from specstate.launch_check import check_launch

    if _is_vllm(args):
        return _cmd_check_vllm(args)
    _fuzz_options(args)
    status = enter(args, check_all)
    if status is not None:
        return status
    from specstate.cli.multirank import maybe_multirank

    status = maybe_multirank(args, "check")  # DP attention on N > 1 ranks: the multi-rank model
    if status is not None:
        return status
    launch = resolve_launch(args)
    if launch is None:
        raise UsageError("expected the launch to check: flags or a whole 'python -m sglang.launch_server ...' line "
                         "after --, --server-args \"...\", or --config F")
    print(f"specstate check: {launch.variant} on {launch.describe()}")
    result = check_launch(launch, budget_s=args.budget, seed=args.seed, max_examples=args.max_examples,
                          parts=args.parts, failures=args.failures,
                          quiet=args.quiet, on_part=lambda p: print(format_part(p), flush=True))
    print(format_verdict(result))
    print(f"  time: {result.elapsed_s:.1f} s", file=sys.stderr)
    args.json_result = result
    return result.exit_code


def _is_vllm(args: argparse.Namespace) -> bool:
    """``vllm serve ...`` after ``--`` (argv[0..1]), ``--engine vllm-X.Y.Z``, or a vLLM variant's name:
    the vLLM family (``_engine_option.is_vllm``)."""
    from specstate._engine_option import is_vllm

    return is_vllm(args)


def _cmd_check_vllm(args: argparse.Namespace) -> int:
    """The check of an engine with a model of its own (``cmd_check`` of ``specstate/cli/vllm.py``: the release's
    check, ``integration/<folder>/check.py``): start, sweep, fuzz on the launch."""
    from specstate.cli.vllm import cmd_check

    return cmd_check(args)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from specstate.launch_check import DEFAULT_BUDGET_S

    c = sub.add_parser("check", help="check your own sglang launch: start, load sweep, bounded fuzz, batch-size proof "
                                     "(specstate check --variant V -- python -m sglang.launch_server ...)")
    c.add_argument("--variant", default=None, help="your patch: a built-in name or package.module:Object "
                                                   "(default fixed-threshold, or --engine's default variant)")
    add_engine_option(c, allow_all=True)
    add_server_args_options(c)
    c.add_argument("--budget", type=_budget, default=None,
                   help=f"seconds of fuzzing (default {DEFAULT_BUDGET_S:g}); the report says how much it covered")
    c.add_argument("--max-examples", type=int_arg(1, 10_000_000), default=None,
                   help="stop the fuzz after this many cases too (a run that does not depend on the machine's speed)")
    c.add_argument("--seed", type=_SEED, default=None, help="the first fuzz round's seed (rounds use seed, seed + 1, ...)")
    c.add_argument("--parts", type=_parts, default=("start", "sweep", "fuzz", "prove"),
                   help="comma-separated parts to run (default start,sweep,fuzz,prove)")
    c.add_argument("--failures", default=None, help="folder for failure traces (default ./specstate-failures)")
    add_output_options(c)
    c.set_defaults(func=_cmd_check)
