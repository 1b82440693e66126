"""``--json`` and ``--quiet`` for the CLI's long-running commands.

``add_output_options(parser)`` adds both; ``json_output`` wraps a command: with ``--json``
its usual text goes to stderr and stdout carries one JSON object, the ``CheckResult``
(``specstate.testing``) the command left in ``args.json_result``, so CI reads one schema
from ``run``, ``fuzz``, ``explore``, ``reproduce`` and ``minimize``. The exit code is the
command's own. Timings (``elapsed_s``, ``details.first_violation_s``) are ``null`` unless
``--timings`` is given, so the same seed prints the same bytes.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from contextlib import redirect_stdout
from typing import Callable

__all__ = ["add_output_options", "json_output"]

Command = Callable[[argparse.Namespace], int]


def add_output_options(p: argparse.ArgumentParser, *, quiet: bool = True) -> None:
    p.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout (text to stderr)")
    p.add_argument("--timings", action="store_true", help="with --json: include wall-clock times (not reproducible)")
    if quiet:
        p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")


def json_output(command: Command) -> Command:
    """Run ``command``; with ``--json``, print ``args.json_result.to_json()`` on stdout."""

    @functools.wraps(command)
    def wrapped(args: argparse.Namespace) -> int:
        if getattr(args, "timings", False) and not getattr(args, "json", False):
            from specstate.errors import UsageError

            raise UsageError("--timings: adds wall-clock times to the --json result, but no --json was given; "
                             "add --json, or drop it")
        if not getattr(args, "json", False):
            return command(args)
        stdout = sys.stdout
        with redirect_stdout(sys.stderr):
            code = command(args)
        result = getattr(args, "json_result", None)
        payload = result.to_json() if result is not None else _no_result(code)
        if not getattr(args, "timings", False):
            payload = _without_timings(payload)
        print(json.dumps(payload, indent=1, sort_keys=True), file=stdout)
        return code

    return wrapped


def _no_result(code: int) -> dict:
    """A command that ended without a result (its one line is on stderr): still the same keys."""
    from specstate.check_result import coverage_block

    return {"ok": code == 0, "verdict": None, "exit_code": code,
            "coverage": coverage_block(judged="nothing: the command ended before a verdict")}


def _without_timings(payload: dict) -> dict:
    out = dict(payload)
    if "elapsed_s" in out:
        out["elapsed_s"] = None
    for key in ("first_violation_s", "cpu_s"):  # cpu_s: specstate prove's own CPU seconds
        if isinstance(out.get("details"), dict) and key in out["details"]:
            out["details"] = {**out["details"], key: None}
    return out
