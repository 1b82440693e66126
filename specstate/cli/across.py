"""``--engine all`` on ``check``, ``fuzz`` and ``reproduce``: the command on every engine family,
one table (``specstate.across.format_table``), ``--json`` as one object (``AcrossResult``).

- ``check --engine all -- FLAGS``: the launch on each family's default variant; a release that
  refuses the flags (its parser, or the rules of ``specstate.server_args``) is a row ``refused``
  with the reason, not an error; the parts and budget are the command's. Exit 1 when a family
  fails; 2 when no family accepts the flags (every reason listed).
- ``fuzz --engine all``: ``across.fuzz_across`` (the profile, ``--max-examples``, ``--seed``);
  with launch flags, the ``fuzz`` part of ``check_across`` instead. Exit 1 on ``FAIL``,
  ``incomplete`` (as ``fuzz`` alone) or ``cannot start`` (the engine refuses the launch).
- ``reproduce --engine all TRACE``: ``across.replay_across`` of the trace's config and actions.
  Exit 1 when it fails somewhere; ``cannot start`` / ``action N does not exist here`` are rows.

Each family runs its default variant: ``--variant`` with ``--engine all`` is refused.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from specstate.errors import UsageError

__all__ = ["is_all", "enter", "check_all", "fuzz_all", "reproduce_all"]


def enter(args: argparse.Namespace, across: "Callable[[argparse.Namespace], int]") -> int | None:
    """Where ``check`` and ``fuzz`` start: with ``--engine all``, ``across(args)`` over every family
    (its exit status); else ``None``, with the variant resolved (default ``fixed-threshold``). The
    failures folder is made either way."""
    from specstate._engine_option import resolve_variant
    from specstate.fuzz.trace import failure_dir

    if is_all(args):
        failure_dir(args.failures)
        return across(args)
    resolve_variant(args, "fixed-threshold")
    failure_dir(args.failures)
    return None


def is_all(args: argparse.Namespace) -> bool:
    """``--engine all`` given; refuses ``--variant`` with it (each family runs its own default)."""
    if getattr(args, "engine", None) != "all":
        return False
    if getattr(args, "variant", None) is not None:
        raise UsageError(f"--engine all runs each family's default variant; drop --variant {args.variant} "
                         f"(or name one family with --engine)")
    return True


def _tokens_for(args: argparse.Namespace):  # noqa: ANN202
    from specstate.server_args import launch_tokens

    return lambda variant: launch_tokens(after_dashes=getattr(args, "server_argv", None) or (),
                                         server_args=getattr(args, "server_args", None),
                                         config_file=getattr(args, "server_config", None), variant=variant)


def _finish(args: argparse.Namespace, kind: str, rows, failing: tuple[str, ...]) -> int:  # noqa: ANN001
    from specstate.across import AcrossResult, format_table

    result = args.json_result = AcrossResult(kind, tuple(rows), failing)
    print(format_table(result.rows))
    print(verdict_line(result.ok, rows))
    return result.exit_code


def verdict_line(ok: bool, rows) -> str:  # noqa: ANN001
    """``verdict: FAIL: FAIL on sglang-0.5.17; pass on sglang-0.5.23; refused on sglang-0.5.12``:
    the families grouped by their verdict, failing ones first, in the table's order within a group."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        groups.setdefault(r.verdict, []).append(r.family)
    order = sorted(groups, key=lambda v: (v == "pass", v == "refused"))
    head = "FAIL" if not ok else "NOT JUDGED" if {"not judged", "incomplete"} & set(groups) else "PASS"
    return f"verdict: {head}: " + "; ".join(f"{v} on {', '.join(groups[v])}" for v in order)


def _launch_rows(args: argparse.Namespace, parts: tuple[str, ...], *, budget_s: float, max_examples: int | None,
                 seed: int):  # noqa: ANN202
    from specstate.across import check_across
    from specstate.launch_check import check_launch

    def run(launch):  # noqa: ANN001, ANN202
        print(f"specstate check: {launch.variant} on {launch.describe()}", file=sys.stderr)
        return check_launch(launch, budget_s=budget_s, seed=seed, max_examples=max_examples, parts=parts,
                            failures=getattr(args, "failures", None), quiet=getattr(args, "quiet", True))

    from specstate._engine_option import deployment_arg

    rows = check_across(_tokens_for(args), run, deployment=deployment_arg(args))
    if all(r.verdict == "refused" for r in rows):
        raise UsageError("no engine family accepts these flags: "
                         + "; ".join(f"{r.family}: {r.first}" for r in rows))
    return rows


def check_all(args: argparse.Namespace) -> int:
    from specstate._engine_option import has_launch

    if not has_launch(args):
        raise UsageError("expected the launch to check: flags or a whole 'python -m sglang.launch_server ...' line "
                         "after --, --server-args \"...\", or --config F")
    rows = _launch_rows(args, args.parts, budget_s=args.budget, max_examples=args.max_examples, seed=args.seed)
    return _finish(args, "check", rows, ("FAIL",))


def fuzz_all(args: argparse.Namespace) -> int:
    from specstate._engine_option import has_launch
    from specstate.across import fuzz_across

    if has_launch(args):
        from specstate.fuzz.profiles import profile_settings

        n = args.max_examples or profile_settings(args.profile).max_examples
        rows = _launch_rows(args, ("fuzz",), budget_s=float("inf"), max_examples=n, seed=args.seed or 0)
    else:
        rows = fuzz_across(args.profile, max_examples=args.max_examples, seed=args.seed)
    return _finish(args, "fuzz", rows, ("FAIL", "cannot start"))  # incomplete: not judged, exit 4


def reproduce_all(args: argparse.Namespace) -> int:
    from specstate._engine_option import has_launch
    from specstate.across import replay_across
    from specstate.fuzz.trace import load_trace

    if args.trace is None or args.seed is not None or args.scenario is not None or has_launch(args):
        raise UsageError("expected reproduce --engine all TRACE.json alone (no --seed, --scenario or launch flags): "
                         "the trace's config and actions replay on every family")
    trace = load_trace(args.trace)
    return _finish(args, "reproduce", replay_across(trace.config, trace.actions), ("FAIL",))
