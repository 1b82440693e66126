"""Children that get signals the way a user's terminal delivers them.

A test run started with SIGINT ignored (a background job of a non-interactive shell, as
``cmd &`` in a script, or under some CI runners) hands that to every child, and Python keeps an
inherited ignore: the child never sees the Ctrl-C the test sends and runs to its end. The tests
that send SIGINT start their children with it at its default (``preexec_fn=default_sigint``).

They signal a command once it is at work: ``wait_until_busy`` waits for the CPU time of the
command's process group (its imports done, its workloads running) instead of a fixed sleep sized
for a loaded machine, which held the child and the test's core for 25 s where it needed 5.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

__all__ = ["default_sigint", "group_pids", "group_cpu_s", "wait_until_busy"]


def default_sigint() -> None:
    """In the child, before ``exec``: SIGINT at its default (Python installs its handler then)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def group_pids(pgid: int) -> list[str]:
    """The running processes of group ``pgid`` (``pgrep -g``)."""
    return subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()


def group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of the running processes of group ``pgid`` (``/proc``; a
    process that ended meanwhile counts 0)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in group_pids(pgid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15 of stat)
    return total


def wait_until_busy(pgid: int, cpu_s: float, limit_s: float) -> float:
    """Wait until the processes of group ``pgid`` have used ``cpu_s`` CPU seconds between them,
    or ``limit_s`` seconds have passed; the wall seconds waited. CPU time, not wall time, tells a
    command's imports are done (they cost the same CPU on a loaded machine, and take longer)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s and group_cpu_s(pgid) < cpu_s:
        time.sleep(0.25)
    return time.monotonic() - t0
