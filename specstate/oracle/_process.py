"""Ending an oracle's child process: the one way the harness's process wrappers
(``integration/oracle_differential.py::OracleProcess``, ``oracle/worker/compare.py::WorkerProcess``)
close their pipes and wait for it."""

from __future__ import annotations

import subprocess
from typing import IO, Any

__all__ = ["end_child"]


def end_child(proc: "subprocess.Popen[Any]", err: IO[Any], timeout_s: float) -> None:
    """Close the child's stdin (it reads its end and exits), wait ``timeout_s`` for it, kill it
    after that; then close its stdout and the file its stderr went to. A child that had already
    ended (a signal) leaves a broken pipe, which is not an error here."""
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except BrokenPipeError:  # the process had already ended (a signal)
            pass
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    err.close()
