"""The verdict of a real-engine run: what failed, where, and why, so that ``ok`` never passes
what failed (``sglang_driver.run`` writes it into ``summary.json`` and prints it last).

- An engine that does not start is a result, not a silence: ``start_failure`` reads the last
  Python traceback the host and sglang's own processes printed (``host.log``: sglang's
  scheduler dies in a child, whose traceback only reaches the log) and keeps its exception
  class, its message, the frames inside sglang and the *phase* it died in (``import``,
  ``model load``, ``memory pool``, ``graph capture``, ``first forward``, else ``engine start``).
- Per workload, every request sent is counted by how it ended (``outcome``): ``finished``;
  ``aborted`` by the ``client`` (the workload's ``abort_after_s``), by the scheduler's
  ``out-of-memory`` abort or by the ``scheduler`` otherwise; ``refused`` (an error before the
  scheduler: sglang's validation, ``Requested token count exceeds ...``); ``admitted`` counts
  the requests the recording saw arrive at the scheduler. A workload where nothing reached the
  scheduler, or where a request ended in a way the workload did not ask for, fails the run
  with that reason. A workload allows more through ``meta.expect`` (e.g. ``["out-of-memory",
  "refused"]``), and a client abort is always asked for.

Pure Python: the CPU tests drive it with the fake engine of ``tests/test_integration_cpu.py``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PHASES", "outcome", "workload_verdict", "start_failure", "parse_traceback", "START_MARK"]

#: what the host prints before it starts the engine: the start's traceback comes after it
START_MARK = "[driver] importing took"

#: frames (function or file names) that say which part of the engine start a traceback died in
PHASES: tuple[tuple[str, str], ...] = (
    ("capture", "graph capture"), ("cuda_graph", "graph capture"),
    ("init_memory_pool", "memory pool"), ("profile_max_num_token", "memory pool"),
    ("load_model", "model load"), ("model_loader", "model load"), ("load_weights", "model load"),
    ("forward", "first forward"),
)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)):?\s?(.*)$")


def outcome(request: dict[str, Any], result: dict[str, Any]) -> str:
    """How one request ended (module doc): ``finished``, ``aborted:<by whom>`` or ``refused``."""
    if result.get("error"):
        return "aborted:out-of-memory" if "out of memory" in str(result["error"]).lower() else "refused"
    finish = str(result.get("finish") or "").lower()
    if finish != "abort":
        return "finished" if finish else "refused"
    message = str(result.get("finish_message") or "").lower()
    if "out of memory" in message:
        return "aborted:out-of-memory"
    if request.get("abort_after_s") is not None:
        return "aborted:client"
    return "aborted:scheduler"


def _allowed(kind: str, expect: list[str]) -> bool:
    return kind in ("finished", "aborted:client") or kind.split(":")[-1] in expect or "any" in expect


def workload_verdict(entry: dict[str, Any], workload: dict[str, Any], admitted: int | None) -> dict[str, Any]:
    """Counts and problems of one workload's run (``entry``: the host's record of it)."""
    requests = {r["rid"]: r for wave in workload.get("waves", []) for r in wave}
    expect = [str(x) for x in (workload.get("meta") or {}).get("expect", [])]
    counts: dict[str, int] = {"sent": len(requests)}
    problems: list[str] = []
    for wave in entry.get("waves", []):
        for res in wave.get("reqs", []):
            kind = outcome(requests.get(res.get("rid"), {}), res)
            counts[kind] = counts.get(kind, 0) + 1
            if not _allowed(kind, expect):
                why = res.get("error") or res.get("finish_message") or kind
                problems.append(f"request {res.get('rid')} {kind}: {str(why)[:200]}")
        if wave.get("error") and not wave.get("reqs"):
            problems.append(f"wave {wave.get('i')} failed as a whole: {str(wave['error'])[:200]}")
    if admitted is not None:
        counts["admitted"] = admitted
    reached = admitted if admitted is not None else counts.get("finished", 0) + sum(
        v for k, v in counts.items() if k.startswith("aborted"))
    if counts["sent"] and not reached:
        problems.insert(0, f"no request of {counts['sent']} reached the scheduler")
    return {"counts": counts, "problems": problems, "ok": not problems}


def parse_traceback(text: str) -> dict[str, Any] | None:
    """The first ``Traceback`` block of ``text`` (the cause: a child's traceback comes before the
    host's "initialization failed"): exception class, message and frames."""
    start = text.find("Traceback (most recent call last):")
    if start < 0:
        return None
    frames: list[dict[str, Any]] = []
    exc: tuple[str, str] | None = None
    for line in text[start:].splitlines()[1:]:
        m = _FRAME.match(line)
        if m:
            frames.append({"file": m.group(1), "line": int(m.group(2)), "func": m.group(3)})
            continue
        e = _EXC.match(line.strip()) if not line.startswith(" ") else None
        if e and frames:
            exc = (e.group(1), e.group(2))
            break
    if exc is None:
        return None
    return {"cls": exc[0].rsplit(".", 1)[-1], "msg": exc[1][:1000], "frames": frames}


def _phase(frames: list[dict[str, Any]], fallback: str) -> str:
    for f in reversed(frames):
        where = f"{f['func']} {f['file']}".lower()
        for needle, phase in PHASES:
            if needle in where:
                return phase
    return fallback


def start_failure(log_text: str, host: dict[str, Any]) -> dict[str, Any] | None:
    """Why the engine did not start (``None`` if it did): the last traceback of the log, the
    frames inside sglang, the phase; ``host``: the host's ``host_result.json``."""
    if host.get("engine_start_s") is not None:
        return None
    phase = "import" if host.get("t_import_s") is None else "engine start"
    mark = log_text.find(START_MARK)
    tb = parse_traceback(log_text[mark:] if phase != "import" and mark >= 0 else log_text)
    if tb is None:
        return {"phase": phase, "cls": None, "msg": "no traceback in the log (killed, or it hung)", "sglang_frames": []}
    inside = [f for f in tb["frames"] if "sglang" in f["file"].replace("\\", "/").split("/site-packages/")[-1]]
    return {"phase": _phase(inside or tb["frames"], phase) if phase != "import" else phase, "cls": tb["cls"],
            "msg": tb["msg"], "sglang_frames": [f"{f['file'].rsplit('site-packages/', 1)[-1]}:{f['line']} {f['func']}"
                                                 for f in inside][-8:]}
