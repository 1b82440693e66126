"""The worker oracle's process: ``python -m specstate.oracle.worker.child RELEASE`` puts the
release's unpacked wheel on ``sys.path`` (``oracle/wheels.py``, ``oracle/stubs.py``: as the
scheduler oracle's process does), then answers each request (one JSON line on stdin: a list of
batches, ``batches.py``) with one JSON line on stdout: upstream's answer per batch
(``_upstream.Upstream.run``) and the figures. A missing wheel is answered ``{"unavailable": ...}``.
Its temporary files go to a private folder removed at exit, and SIGINT / SIGTERM end it at once
(``oracle/child.py::_private_files``).
"""

from __future__ import annotations

import io
import json
import logging
import resource
import sys
import time
import warnings
from contextlib import redirect_stdout
from typing import Any

__all__ = ["main"]


def _load(release: str) -> Any:
    from specstate.oracle import stubs
    from specstate.oracle.wheels import importable
    from specstate.oracle.worker.catalog import release as worker_release

    stubs.install(importable(release))
    from specstate.oracle.worker._upstream import Upstream

    return Upstream(worker_release(release).buffers)


def _answer(out: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    from specstate.oracle.child import _private_files
    from specstate.oracle.wheels import OracleUnavailable

    release = (argv or sys.argv[1:])[0]
    _private_files()
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    noise = io.StringIO()
    t0 = time.perf_counter()
    try:
        with redirect_stdout(noise):  # upstream prints; stdout carries the answers
            upstream = _load(release)
    except OracleUnavailable as e:
        _answer({"unavailable": str(e)})
        return 0
    import_s = round(time.perf_counter() - t0, 3)
    for line in sys.stdin:
        if not line.strip():
            continue
        t1 = time.perf_counter()
        with redirect_stdout(noise):
            answers = [upstream.run(b) for b in json.loads(line)["batches"]]
        noise.seek(0)
        noise.truncate()
        _answer({"release": release, "answers": answers, "import_s": import_s,
                 "run_s": round(time.perf_counter() - t1, 4),
                 "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})
    return 0


if __name__ == "__main__":
    from specstate.oracle.child import exit_at_once

    exit_at_once(main())
