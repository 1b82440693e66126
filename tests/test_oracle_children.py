"""The worker oracle (``specstate worker-oracle``) and the N-rank oracle (``specstate oracle --dp N``)
behave as the scheduler oracle does at their trust boundaries (docs/trust.md): the parent checks the
pinned tree before it starts a child (a cache that fails a check is one line, exit 2, nothing
written, nothing run), and each child keeps its temporary files in a private folder (nothing left
in ``$TMPDIR``) and stops within 2 s of SIGINT."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specstate import upstream
from specstate.cli import main
from tests.signals_default import default_sigint, group_pids, wait_until_busy

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {"worker-oracle": ["worker-oracle", "--engine", "0.5.12", "--examples", "1"],
            "oracle --dp 2": ["oracle", "--engine", "0.5.12", "--dp", "2", "--examples", "1"]}
#: CPU seconds the command's processes use before the signal: each one's imports (about 3 s: the
#: worker oracle reports "imports 2.9 s") and then workloads (the parent, a child per rank)
BUSY_CPU_S = {"worker-oracle": 10.0, "oracle --dp 2": 16.0}


def _wheel() -> Path:
    path = upstream.cache_dir() / "wheels" / upstream.PINS["0.5.12"][0]
    if not path.is_file():
        pytest.skip("no cached 0.5.12 wheel")
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_changed_tree_is_one_line_before_any_child_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], command: str) -> None:
    wheel = _wheel()
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    shutil.copy(wheel, cache / "wheels" / wheel.name)
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)
    root = upstream.tree("0.5.12")
    upstream._tree.cache_clear()  # the next use checks it again, as a new process would
    (root / "sglang/srt/evil.py").write_text("raise SystemExit('ran')\n")
    started: list[object] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))
    code = main(COMMANDS[command])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "sglang 0.5.12" in err and "evil.py" in err and "not in the pinned wheel" in err, err
    assert started == [], "a child was started"
    assert not list(tmp_path.glob("*failures*")) and not list(tmp_path.glob("*.json")), "wrote something"


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_sigint_stops_the_children_within_two_seconds_leaving_nothing(tmp_path: Path, command: str) -> None:
    _wheel()
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    argv = [a if a != "1" else "100000" for a in COMMANDS[command]]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
    # SIGINT at its default in the command, as a terminal's Ctrl-C finds it: a run started with it
    # ignored (CI's background job) handed the ignore on, the parent never saw the signal, and only
    # the child's own handler stopped; the parent noticed at its next read of the child, after the
    # workload the model was running (11.1 s under load; `tests/signals_default.py`)
    proc = subprocess.Popen([sys.executable, "-m", "specstate", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_sigint)
    wait_until_busy(proc.pid, BUSY_CPU_S[command], 25)  # imports done, workloads running
    assert proc.poll() is None, "finished before the signal"
    kids = group_pids(proc.pid)
    assert len(kids) >= 2, kids  # the parent and its child(ren)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stopped = time.monotonic() - t0
    left = group_pids(proc.pid)
    while left and time.monotonic() - t0 < 6:
        time.sleep(0.1)
        left = group_pids(proc.pid)
    gone = time.monotonic() - t0
    print(f"{command}: the parent stopped {stopped:.2f} s after SIGINT, the whole group {gone:.2f} s")
    assert proc.returncode == 130 and "interrupted by SIGINT" in err, err
    assert stopped < 2.0, stopped
    # the children end at once; multiprocessing's resource tracker (a grandchild that ignores
    # SIGINT) ends when its parent's pipe closes, after it has cleaned up
    assert left == [], f"left running: {left}"
    assert list(tmp.iterdir()) == []


def test_a_child_that_ends_at_once_still_flushes_and_leaves_nothing(tmp_path: Path) -> None:
    """``oracle/child.py::exit_at_once``, which every oracle child calls after its ``main`` (it skips
    the interpreter's teardown, and with it the ``atexit`` removal of the private folder): the
    answer written but not flushed still reaches the parent, the exit code is ``main``'s, and the
    private folder and what upstream left in it are gone."""
    code = ("import os\n"
            "from specstate.oracle._core import private_dir\n"
            "from specstate.oracle.child import _private_files, exit_at_once\n"
            "_private_files()\n"
            "open(os.path.join(private_dir(), 'gloo-store'), 'w').write('x')\n"
            "print('the answer', end='')\n"
            "exit_at_once(3)\n")
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp)),
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (3, "the answer"), out.stderr
    assert list(tmp.iterdir()) == []
