"""An interrupted oracle run keeps what it found: the first mismatch is written as soon as it is
seen (before Hypothesis shrinks it), an interruption while shrinking names it, and a finished
shrink replaces it with the minimal workload (``specstate/integration/oracle_fuzz.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specstate.integration import oracle_fuzz
from specstate.integration.oracle_differential import Differential, OracleRun
from tests.signals_default import default_sigint, wait_until_busy

ROOT = Path(__file__).resolve().parents[1]


class _NoProcess:
    def __init__(self, release: str) -> None:
        self.release = release

    def __enter__(self) -> "_NoProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def _planted(interrupt_after: int | None) -> Any:
    """A differential that "mismatches" on every workload of 2 or more actions; raises
    ``KeyboardInterrupt`` on its ``interrupt_after``-th mismatch (inside the shrink)."""
    from specstate.integration.compare import Mismatch

    seen = []

    def differential(release: str, cfg: Any, actions: Any, *, oracle: Any = None, variant: Any = None) -> Differential:
        if len(actions) < 2:
            return Differential(release, OracleRun([], None), [], [])
        seen.append(len(actions))
        if interrupt_after is not None and len(seen) >= interrupt_after:
            raise KeyboardInterrupt
        return Differential(release, OracleRun([], None), [], [Mismatch(0, "planted", 1, 2, 0)])

    return differential, seen


def test_the_first_mismatch_is_on_disk_when_the_shrink_is_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    planted, seen = _planted(interrupt_after=3)
    monkeypatch.setattr(oracle_fuzz, "OracleProcess", _NoProcess)
    monkeypatch.setattr(oracle_fuzz, "differential", planted)
    with pytest.raises(KeyboardInterrupt):
        oracle_fuzz.fuzz("0.5.12", examples=50, failure_dir=str(tmp_path))
    saved = list(tmp_path.glob("*.json"))
    assert len(saved) == 1 and len(seen) == 3
    assert len(json.loads(saved[0].read_text())["actions"]) == seen[0]  # the first one seen
    assert str(saved[0]) in capsys.readouterr().err


def test_a_finished_shrink_replaces_the_first_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted, seen = _planted(interrupt_after=None)
    monkeypatch.setattr(oracle_fuzz, "OracleProcess", _NoProcess)
    monkeypatch.setattr(oracle_fuzz, "differential", planted)
    res = oracle_fuzz.fuzz("0.5.12", examples=50, failure_dir=str(tmp_path))
    saved = list(tmp_path.glob("*.json"))
    assert [str(p) for p in saved] == [res.trace_path]
    assert len(json.loads(saved[0].read_text())["actions"]) == min(seen) == 2


@pytest.mark.slow
def test_sigint_stops_the_oracle_within_two_seconds(tmp_path: Path) -> None:
    from specstate import upstream

    if not (upstream.cache_dir() / "wheels" / upstream.PINS["0.5.12"][0]).is_file():
        pytest.skip("no cached 0.5.12 wheel")
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "specstate", "oracle", "--engine", "0.5.12", "--examples", "5000"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=default_sigint)
    wait_until_busy(proc.pid, 8.0, 12)  # imports done (about 3 CPU s), workloads running
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while line and "interrupted by" not in line:  # up to the interruption line: the run has stopped
            line = proc.stderr.readline()
        said = time.monotonic() - t0
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stopped = time.monotonic() - t0
    print(f"oracle said it stopped {said:.2f} s after SIGINT, exited at {stopped:.2f} s")
    assert proc.returncode == 130 and "interrupted by SIGINT" in line, line + err
    # stopped within 2 s; the exit after it is the interpreter's teardown of torch (0.8-1.5 s
    # here), given room on a loaded CI machine
    assert said < 2.0 and stopped < 4.0, (said, stopped)
    time.sleep(0.5)  # the oracle's own process, signalled too, removes its folder on the way out
    assert list(tmp.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("whom", ["group", "parent"])
def test_sigint_stops_prove_exhaustive_workers_within_two_seconds(tmp_path: Path, whom: str) -> None:
    """The forked workers end at once (they took 43-77 s, each finishing its capture list)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "specstate", "prove", "--exhaustive", "--jobs", "2", "--variant",
                             "fixed-threshold"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_sigint)
    wait_until_busy(proc.pid, 10.0, 8)  # the workers are proving
    assert proc.poll() is None, "finished before the signal"
    t0 = time.monotonic()
    (os.killpg if whom == "group" else os.kill)(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stopped = time.monotonic() - t0
    print(f"prove stopped {stopped:.2f} s after SIGINT to the {whom}")
    assert proc.returncode == 130 and stopped < 2.0, (stopped, err)
    left = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert left == [], f"workers left running: {left}"
