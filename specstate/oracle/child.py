"""The oracle's process: ``python -m specstate.oracle.child RELEASE`` reads requests (one JSON
line each on stdin: config, actions), runs each on a fresh upstream scheduler and answers each with
one JSON line on stdout (observations, error, figures). One release per process: the unpacked wheel
is put on ``sys.path`` here, never installed; the imports are paid once per process.
A missing wheel that cannot be fetched is answered ``{"unavailable": "..."}``. After its first
answer the process byte-compiles the wheel's modules it imported (``_compile_imported``)."""

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
from typing import Any

__all__ = ["main"]

_MODELS = Path(__file__).resolve().parents[1] / "integration" / "sglang_assets" / "models"


def _load(release: str) -> Any:
    from specstate.oracle import stubs
    from specstate.oracle.wheels import unpacked

    stubs.install(str(unpacked(release)))
    return importlib.import_module(f"specstate.oracle.sglang_{release.replace('.', '_')}")


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
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["traceback"] = traceback.format_exc()[-4000:]
    out["observations"] = driver.observations
    out["reached"] = sorted(driver.reached)
    out["run_s"] = round(time.perf_counter() - t1, 3)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def _compile_imported(root: str) -> int:
    """Byte-compile the modules of the unpacked wheel (under ``root``) that this process imported
    and that have no bytecode yet; the number written. The cache holds sources only (``wheels.py``
    unpacks them), so with ``PYTHONDONTWRITEBYTECODE`` set (this machine's setting) every oracle
    process compiled the thousand-odd modules it imports again: about a third of its start-up.
    Later processes read the bytecode (Python checks it against the source's size and time);
    pip byte-compiles what it installs the same way. Once per process, after the first answer."""
    import importlib.util
    import os
    import py_compile

    written = 0
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py") or not path.startswith(root):
            continue
        cached = importlib.util.cache_from_source(path)
        if os.path.exists(cached):
            continue
        try:
            py_compile.compile(path, cfile=cached, doraise=True)  # written atomically
            written += 1
        except (py_compile.PyCompileError, OSError):  # a read-only cache: the next process compiles it again
            pass
    return written


def _answer(out: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    from specstate.oracle.wheels import OracleUnavailable

    release = (argv or sys.argv[1:])[0]
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
    compiled = False
    for line in sys.stdin:
        if not line.strip():
            continue
        with redirect_stdout(noise):
            out = _run(adapter, release, json.loads(line))
        out["import_s"] = import_s
        noise.seek(0)
        noise.truncate()
        _answer(out)
        if not compiled:  # the first workload imported what the scheduler's run needs
            from specstate.oracle.wheels import unpacked

            _compile_imported(str(unpacked(release)))
            compiled = True
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
