"""SIGINT and SIGTERM during ``specstate fuzz``: the counterexample already found is on disk,
its path on stderr, no temporary left, and the exit code says which signal stopped it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specstate.fuzz.trace import load_trace, replay_trace
from tests.signals_default import default_sigint


def _fuzz_until_found(folder: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SPECSTATE_FAILURE_DIR")}
    proc = subprocess.Popen([sys.executable, "-m", "specstate", "fuzz", "--variant", "naive-threshold", "--seed", "1",
                             "--profile", "deep", "--failures", str(folder), "--quiet"],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_sigint)
    assert proc.stderr is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "found a counterexample" in line or not line:
            return proc
    proc.kill()
    pytest.fail("no counterexample reported within 300 s")


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_fuzz_run_keeps_its_counterexample(tmp_path: Path, sig: int, code: int) -> None:
    folder = tmp_path / "failures"
    proc = _fuzz_until_found(folder)
    time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    trace_lines = [ln for ln in err.splitlines() if ln.strip().startswith("trace: ")]
    assert trace_lines, err
    path = Path(trace_lines[-1].split("trace: ", 1)[1].split(" (")[0])
    assert path.is_file() and path.parent == folder
    assert replay_trace(load_trace(path)).first is not None  # it still fails
    assert f"interrupted by {signal.Signals(sig).name}" in err.splitlines()[-1]
    assert not list(folder.glob(".trace-*")), "a temporary was left behind"


def test_a_signal_inside_a_collector_callback_is_sent_again_not_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception raised in a ``gc.callbacks`` function is printed and dropped, so a SIGTERM
    that lands there would be lost: the handler sends it again instead (and raises elsewhere)."""
    import gc
    import threading

    from specstate import _cli_support
    from specstate.errors import Interrupted

    frames: list = []

    def cb(phase: str, info: dict) -> None:
        if not frames:
            frames.append(sys._getframe())

    sent: list = []
    monkeypatch.setattr(threading, "Timer", lambda delay, fn, args: type("T", (), {"start": lambda self: sent.append(args)})())
    gc.callbacks.append(cb)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(cb)
        gc.callbacks.append(cb)  # still registered while the handler looks at the frame
    try:
        _cli_support._on_signal(signal.SIGTERM, frames[0])
        assert sent == [(os.getpid(), signal.SIGTERM)]
    finally:
        gc.callbacks.remove(cb)
    with pytest.raises(Interrupted):
        _cli_support._on_signal(signal.SIGTERM, sys._getframe())
    with pytest.raises(KeyboardInterrupt):
        _cli_support._on_signal(signal.SIGINT, sys._getframe())


def test_a_signal_inside_importlibs_module_lock_callback_is_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """importlib's weakref callback drops what is raised in it, as the collector's callbacks do."""
    import threading

    from specstate import _cli_support

    scope: dict = {}
    exec(compile("import sys\ndef cb():\n    return sys._getframe()\n", "<frozen importlib._bootstrap>", "exec"), scope)
    sent: list = []
    monkeypatch.setattr(threading, "Timer", lambda delay, fn, args: type("T", (), {"start": lambda self: sent.append(args)})())
    _cli_support._on_signal(signal.SIGINT, scope["cb"]())
    assert sent == [(os.getpid(), signal.SIGINT)]
    with pytest.raises(KeyboardInterrupt):
        _cli_support._on_signal(signal.SIGINT, sys._getframe())


_FORK_PROBE = r'''
import logging, os, signal, sys, time
from specstate import _cli_support

class Lock:  # logging's module lock, whose release (in the parent's after-fork hook) takes a Ctrl-C
    def __init__(self, real):
        self.real, self.armed = real, False
    def acquire(self, *a):
        return self.real.acquire(*a)
    def _at_fork_reinit(self):
        self.real._at_fork_reinit()
    def release(self):
        self.real.release()
        if self.armed:
            self.armed = False
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs here, inside logging._releaseLock
                pass

logging._lock = Lock(logging._lock)
try:
    with _cli_support._signals():
        logging._lock.armed = True
        if os.fork() == 0:
            os._exit(0)
        os.wait()
        time.sleep(2)
    print("ran on")
except KeyboardInterrupt:
    print("interrupted")
'''


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_signal_inside_loggings_fork_hook_is_sent_again() -> None:
    """CPython prints and drops what an ``os.register_at_fork`` hook raises: a Ctrl-C landing in
    ``logging``'s hook while ``explore --jobs 2`` forked its pool ran the search to its end (CI,
    stop 32). The handler sends such a signal again, so it stops the run."""
    out = subprocess.run([sys.executable, "-c", _FORK_PROBE], capture_output=True, text=True, timeout=60,
                         preexec_fn=default_sigint)
    assert out.stdout.strip() == "interrupted", (out.stdout, out.stderr)
    assert "Exception ignored" not in out.stderr, out.stderr


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_failure_after_a_dropped_signal_is_answered_as_the_interruption(capsys: pytest.CaptureFixture[str],
                                                                          signum: int, code: int) -> None:
    """Stop 35's CI: SIGINT's ``KeyboardInterrupt`` was dropped in a weakref callback, the killed
    children broke the parent's pipes, and Hypothesis raised ``FlakyFailure``: exit 70 "internal
    error". An exception after a delivered signal is that signal's echo: 128 + signal."""
    import argparse

    from specstate import _cli_support

    def command(args: argparse.Namespace) -> int:
        try:
            _cli_support._on_signal(signum, sys._getframe())
        except BaseException:  # noqa: BLE001  the drop CPython does in a weakref callback
            pass
        raise BrokenPipeError("the child the signal stopped")

    assert _cli_support.guarded(command, argparse.Namespace(command="fuzz")) == code
    err = capsys.readouterr().err
    assert f"interrupted by {signal.Signals(signum).name}" in err and "internal error" not in err, err

    def buggy(args: argparse.Namespace) -> int:  # no signal this time: still a bug, still 70
        raise RuntimeError("a bug")

    assert _cli_support.guarded(buggy, argparse.Namespace(command="fuzz")) == 70
    assert "internal error: RuntimeError" in capsys.readouterr().err
