"""How the ``specstate`` command answers: one line per user error, nothing lost on a signal.

- ``Parser``: an ``ArgumentParser`` whose errors are one line (``specstate fuzz: error: ...
  (see specstate fuzz --help)``) and exit 2, like every other user error.
- ``int_arg(lo, hi)``: an argument type for bounded integers (``--max-bs -1`` is refused, not
  explored as an empty space).
- ``guarded(command, args)``: runs a command with SIGTERM turned into :class:`Interrupted`
  (SIGINT is Python's ``KeyboardInterrupt``), so ``finally`` blocks and the fuzzer's
  save-on-interrupt run on both; then maps what escapes to an exit code and one line:

  ====================================  ====  ==========================================
  what                                  exit  stderr
  ====================================  ====  ==========================================
  the command's own result              0/1/3 its report
  ``SpecStateError`` (your input, the   2     ``specstate: error: ...`` (one line)
  outside world), ``MemoryError``
  SIGINT / SIGTERM                      130 / ``specstate: interrupted ...`` (one line; a
                                        143   counterexample found so far was written)
  ``InternalError``, anything else      70    ``specstate: internal error: ...``: a bug,
                                              and where to report it
  stdout closed (``| head``)            141   nothing
  ====================================  ====  ==========================================

  ``--debug`` (or ``SPECSTATE_DEBUG=1``) prints the traceback as well.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NoReturn

from specstate.errors import InternalError, Interrupted, SpecStateError, UsageError

__all__ = ["Parser", "int_arg", "guarded", "Interrupted", "EXIT_USAGE", "EXIT_INTERNAL", "REPORT_BUGS",
           "add_allow_import", "guard_variant_import"]

EXIT_USAGE, EXIT_INTERNAL = 2, 70
REPORT_BUGS = ("please report it on the specstate issue tracker with the command line and the output of the "
               "same command with --debug")


class Parser(argparse.ArgumentParser):
    """Argument errors as one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def int_arg(lo: int, hi: int) -> Callable[[str], int]:
    """An ``argparse`` type: an integer in ``[lo, hi]``."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer in [{lo}, {hi}] but got {text[:40]!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer in [{lo}, {hi}] but got {value}")
        return value

    parse.__name__ = f"integer in [{lo}, {hi}]"
    return parse


def _in_dropping_callback(frame: Any) -> bool:
    """Whether ``frame`` runs inside a callback whose exception is printed and dropped: a
    ``gc.callbacks`` function (Hypothesis times the collector with one), importlib's
    module-lock weakref callback (:func:`_importlib_lock_callback`), a C extension's
    initialisation (:func:`_extension_init`) or a fork hook (:func:`_fork_hook`)."""
    import gc

    codes = {getattr(getattr(cb, "__func__", cb), "__code__", None) for cb in gc.callbacks}
    codes.discard(None)
    while frame is not None:
        code = frame.f_code
        if code in codes or _importlib_lock_callback(code) or _extension_init(code) or _fork_hook(code):
            return True
        frame = frame.f_back
    return False


def _importlib_lock_callback(code: Any) -> bool:
    """``importlib._bootstrap._get_module_lock``'s weakref callback: an exception raised there is
    printed ("Exception ignored in ...") and dropped, and the run went on to its end (seen once
    in 14 Ctrl-Cs of ``explore`` while it imported torch)."""
    return code.co_name == "cb" and code.co_filename == "<frozen importlib._bootstrap>"


_FORK_HOOKS = frozenset({"_acquireLock", "_releaseLock", "_prepareFork", "_afterFork",
                         "_after_at_fork_child_reinit_locks"})


def _fork_hook(code: Any) -> bool:
    """One of ``logging``'s ``os.register_at_fork`` hooks (3.11/3.12: ``_acquireLock`` before a
    fork, ``_releaseLock`` after it in the parent; 3.13: ``_prepareFork`` / ``_afterFork``): CPython
    prints what a fork hook raises ("Exception ignored in: <function _releaseLock ...>") and forks
    on. CI saw it: a Ctrl-C 0.3 s into ``explore --jobs 2`` landed there while the pool forked,
    and the search ran its 63 s to the end (stop 32)."""
    return code.co_name in _FORK_HOOKS and code.co_filename == getattr(sys.modules.get("logging"), "__file__", None)


def _extension_init(code: Any) -> bool:
    """Inside a C extension's initialisation (``ExtensionFileLoader.create_module``), which may
    import Python modules and drop what they raise: ``torch._C`` imports numpy there and turns a
    ``KeyboardInterrupt`` into its "Failed to initialize NumPy" warning, and ``import torch`` goes
    on (2 of 16 ``python -c "import torch"`` interrupted at 0.4-2.7 s ran to the end)."""
    return code.co_name == "create_module" and code.co_filename == "<frozen importlib._bootstrap_external>"


_DELIVERED: list[int] = []  # the signals delivered during the running command (see _answer)


def _on_signal(signum: int, frame: Any) -> None:
    """SIGINT -> ``KeyboardInterrupt``, SIGTERM -> ``Interrupted``; but a signal that lands inside
    a collector callback or importlib's module-lock callback, where the exception would be
    dropped and the run would go on (``tests/test_interrupt.py`` caught that once in CI), is sent
    again 10 ms later. Each delivery is remembered: whatever the command raises after it is the
    interruption's echo, not a bug (see :func:`_answer`)."""
    _DELIVERED.append(signum)
    if _in_dropping_callback(frame):
        import threading

        threading.Timer(0.01, os.kill, (os.getpid(), signum)).start()
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(signum)


@contextmanager
def _signals() -> Iterator[None]:
    """SIGTERM raises ``Interrupted`` and SIGINT ``KeyboardInterrupt`` in the main thread
    (:func:`_on_signal`; the previous handlers restored afterwards)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGINT only where Python's default handler has it (not where the parent made us ignore it)
    sigs = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is signal.default_int_handler else [])
    old = {sig: signal.signal(sig, _on_signal) for sig in sigs}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _one_line(text: str) -> str:
    """One line, control characters escaped (a terminal escape from a file or flag is shown, not run)."""
    from specstate.schema._messages import printable

    return printable(" ".join(str(text).split())) or "(no message)"


def guarded(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``command(args)`` and answer as the module doc says; a refused command (exit 2) leaves
    no empty failures folder behind (``fuzz.trace.remove_empty_failure_dirs``)."""
    code = _answer(command, args)
    trace = sys.modules.get("specstate.fuzz.trace")  # only it creates failures folders: not imported, none made
    if code == EXIT_USAGE and trace is not None:
        trace.remove_empty_failure_dirs()
    return code


def _answer(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    debug = bool(getattr(args, "debug", False)) or os.environ.get("SPECSTATE_DEBUG", "") not in ("", "0")
    del _DELIVERED[:]
    try:
        return _answer_unguarded(command, args, debug)
    except (KeyboardInterrupt, Interrupted) as e:  # a second signal while the first was answered
        return _interrupted(e.signum if isinstance(e, Interrupted) else signal.SIGINT)


def _interrupted(signum: int) -> int:
    name = signal.Signals(signum).name
    print(f"specstate: interrupted by {name}; stopped (anything already found was written, as printed above)",
          file=sys.stderr)
    return 128 + int(signum)


def _answer_unguarded(command: Callable[[argparse.Namespace], int], args: argparse.Namespace, debug: bool) -> int:
    try:
        with _signals():
            return int(command(args))
    except (KeyboardInterrupt, Interrupted) as e:
        return _interrupted(e.signum if isinstance(e, Interrupted) else signal.SIGINT)
    except InternalError as e:
        return _internal(e, debug)
    except ModuleNotFoundError as e:
        from specstate._deps import missing_dependency

        found = missing_dependency(e, f"specstate {getattr(args, 'command', '')}".strip())
        if found is None:
            return _internal(e, debug)
        if debug:
            traceback.print_exc()
        print(f"specstate: error: {found}", file=sys.stderr)
        return EXIT_USAGE
    except SpecStateError as e:
        if debug:
            traceback.print_exc()
        print(f"specstate: error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:
        if debug:
            traceback.print_exc()
        print("specstate: error: out of memory: the input asks for more than this machine has (smaller sizes or "
              "bounds)", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader went away (`| head`): end quietly, as SIGPIPE would
        if _DELIVERED:  # a child the signal stopped, not our reader (see _internal)
            return _interrupted(_DELIVERED[0])
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 128 + signal.SIGPIPE
    except Exception as e:  # noqa: BLE001  (the last line of defence)
        return _internal(e, debug)


def _internal(e: BaseException, debug: bool) -> int:
    """An unexpected exception: a bug, unless a signal was delivered before it. Then it is the
    interruption's echo: the signal's ``KeyboardInterrupt`` can be dropped where CPython prints and
    ignores exceptions (CI saw it in a ``WeakValueDictionary`` weakref callback), and the children
    the signal stopped then break the parent's pipes, which Hypothesis reports as a
    ``FlakyFailure``; that is answered as the interruption (128 + signal; stop 35's CI run)."""
    if debug:
        traceback.print_exc()
    if _DELIVERED:
        return _interrupted(_DELIVERED[0])
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    print(f"specstate: internal error: {type(e).__name__}: {_one_line(str(e))[:300]}{where}. This is a bug in "
          f"specstate, not in your input; {REPORT_BUGS}", file=sys.stderr)
    return EXIT_INTERNAL


def add_allow_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-variant-import", action="store_true",
                   help="a trace naming a variant package.module:Object imports that module, running its code: "
                        "allow it (only for traces you trust)")


def guard_variant_import(trace: Any, path: object, args: argparse.Namespace, *, used: bool = True) -> None:
    """A trace names ``package.module:Object``: replaying it imports (runs) that module, so
    it needs ``--allow-variant-import`` (or ``SPECSTATE_ALLOW_VARIANT_IMPORT=1``): the one guard,
    the Python API's too (``specstate.model.variant_registry.require_variant_import``). ``used``: the
    command loads the trace's variant (``graph --trace --engine`` does not)."""
    from specstate.model.variant_registry import require_variant_import

    if used:
        require_variant_import(trace.variant, path, bool(getattr(args, "allow_variant_import", False)),
                               hint="add --allow-variant-import")
