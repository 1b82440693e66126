"""The oracle's process: ``python -m specstate.oracle.child RELEASE`` reads requests (one JSON
line each on stdin: config, actions), runs each on a fresh upstream scheduler and answers each with
one JSON line on stdout (observations, error, figures). One release per process: the unpacked wheel
is put on ``sys.path`` here, never installed; the imports are paid once per process.
A missing wheel that cannot be fetched, or a cache that fails a check (``specstate/upstream.py``),
is answered ``{"unavailable": "..."}``.

Python's bytecode is never read from the cache: the checked tree's modules are loaded by
``_bytecode.install``'s path hook (from source, or from entries signed with this user's key), so a
``__pycache__`` planted there is never looked at (and ``upstream.verify_tree`` refuses a tree
holding one)."""

from __future__ import annotations

import importlib
import io
import json
import logging
import resource
import sys
import time
import traceback
import warnings
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["main"]

_MODELS = Path(__file__).resolve().parents[1] / "integration" / "sglang_assets" / "models"


def _load(release: str) -> Any:
    from specstate.oracle import stubs
    from specstate.oracle.catalog import module_of
    from specstate.oracle.wheels import importable

    stubs.install(importable(release))
    return importlib.import_module(module_of(release))


def _run(adapter: Any, release: str, request: dict[str, Any]) -> dict[str, Any]:
    from specstate.schema import action_from_data
    from specstate.oracle.driver import Driver

    t1 = time.perf_counter()
    actions = [action_from_data(a) for a in request["actions"]]
    out: dict[str, Any] = {"release": release}
    driver = getattr(adapter, "DRIVER", Driver)(actions, request["config"]["speculative_num_steps"] + 1)
    try:
        adapter.run(request["config"], driver, str(_MODELS))
    except Exception as e:  # noqa: BLE001  (upstream raised: reported, the observations so far kept)
        from specstate.oracle._core import upstream_check_of

        out["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["traceback"] = traceback.format_exc()[-4000:]
        check = upstream_check_of(e.__traceback__)
        if check is not None:  # one of upstream's own invariant checks failed: a finding, not a harness error
            out["upstream_check"] = check
    from specstate.oracle._core import enabled_strict_checks

    out["strict_checks"] = list(enabled_strict_checks())
    out["observations"] = driver.observations
    out["reached"] = sorted(driver.reached)
    out["run_s"] = round(time.perf_counter() - t1, 3)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def _private_files() -> None:
    """Every temporary file upstream or torch makes (IPC names, the gloo store, inductor's cache)
    in the process's private folder, removed at exit: nothing is left in ``$TMPDIR``."""
    import os
    import tempfile

    from specstate.oracle._core import private_dir

    tempfile.tempdir = os.environ["TMPDIR"] = private_dir()
    _quick_stop()


def _quick_stop() -> None:
    """SIGINT / SIGTERM: remove the private folder and end now, without the interpreter's
    teardown of torch and sglang (about half a second the interrupted run would wait for)."""
    import signal

    def stop(signum: int, _frame: object) -> None:
        _end(128 + signum)  # no flush: a signal may land inside a write

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)


def exit_at_once(code: int) -> NoReturn:
    """End the process as ``exit(code)`` would, without the interpreter's teardown of torch, gloo and
    sglang (about 1.7 s a process here, none of it the oracle's work): the answers flushed, the
    private folder removed as at exit. Only a child run as ``python -m`` calls it, after its
    ``main`` returned (a test that calls ``main`` in its own process goes on)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach the parent
            pass
    _end(code)


def _end(code: int) -> NoReturn:
    """The private folder removed (its ``atexit`` entry does not run) and the process ended at once."""
    import os
    import shutil

    from specstate.oracle._core import private_dir

    shutil.rmtree(private_dir(), ignore_errors=True)
    os._exit(code)


def _answer(out: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    from specstate.oracle.wheels import OracleUnavailable

    release = (argv or sys.argv[1:])[0]
    _private_files()
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    noise = io.StringIO()
    t0 = time.perf_counter()
    try:
        with redirect_stdout(noise):  # upstream prints; stdout carries the answers
            adapter = _load(release)
    except OracleUnavailable as e:
        _answer({"unavailable": str(e)})
        return 0
    import_s = round(time.perf_counter() - t0, 3)
    for line in sys.stdin:
        if not line.strip():
            continue
        with redirect_stdout(noise):
            out = _run(adapter, release, json.loads(line))
        out["import_s"] = import_s
        noise.seek(0)
        noise.truncate()
        _answer(out)
    return 0


if __name__ == "__main__":
    exit_at_once(main())
