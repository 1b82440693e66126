"""The oracle's process: ``python -m specstate.oracle.child`` reads one request (JSON on stdin:
release, config, actions), runs it on upstream's scheduler and writes the observations (JSON on
stdout). One release per process: the unpacked wheel is put on ``sys.path`` here, never installed."""

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


def _run(request: dict[str, Any]) -> dict[str, Any]:
    from specstate.model import action_from_json
    from specstate.oracle.driver import Driver
    from specstate.oracle import stubs
    from specstate.oracle.wheels import unpacked

    t0 = time.perf_counter()
    release = request["release"]
    stubs.install(str(unpacked(release)))
    adapter = importlib.import_module(f"specstate.oracle.sglang_{release.replace('.', '_')}")
    t1 = time.perf_counter()
    actions = [action_from_json(a) for a in request["actions"]]
    out: dict[str, Any] = {"release": release}
    driver = Driver(actions, request["config"]["speculative_num_steps"] + 1)
    try:
        adapter.run(request["config"], driver, str(_MODELS))
    except Exception as e:  # noqa: BLE001  (upstream raised: reported, the observations so far kept)
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["traceback"] = traceback.format_exc()[-4000:]
    out["observations"] = driver.observations
    out["import_s"] = round(t1 - t0, 3)
    out["run_s"] = round(time.perf_counter() - t1, 3)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> int:
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    request = json.loads(sys.stdin.read())
    noise = io.StringIO()
    with redirect_stdout(noise):  # upstream prints; stdout carries the answer
        out = _run(request)
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
