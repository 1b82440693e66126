"""The engine-neutral core of the recorder: describe helpers, the control file, line writing.

Every sglang version's recorder (``sglang_recorder.py`` for 0.5.12's v1 worker,
``sglang_0_5_17/recorder.py`` for 0.5.17's v2 worker) builds on ``RecorderCore``:

- ``SPECSTATE_REC_CTL``: path of a small JSON control file ``{"out": PATH|null, "tag": STR,
  "stats": PATH|null, "mode": "full"|"lean"}``, re-read whenever it changes (``os.stat`` per
  call); ``out`` null: recording off (the hooks only count calls and time them);
- ``SPECSTATE_REC_OUT``: a fixed output file (always on), when no control file is named;
- ``SPECSTATE_REC_PER_RANK=1``: every output file (and the crash file) named per rank,
  ``x.jsonl`` -> ``x.rank<R>.jsonl`` (``per_rank_path``; the DP-attention runs of
  ``gpu_run_dp.sh``, where every rank's scheduler records);
- lines written before a file's header wait until the header is written;
- ``lean`` mode hands records to a writer thread (``_Writer``); crash lines stay synchronous;
- ``deferred`` mode keeps records in memory, as the hooks captured them (plain values and
  references to immutable objects: enums, classes, dtypes, ``torch.Size``, finish reasons;
  ``emit_lazy`` for records built later, ``emit_raw`` for a hook's capture tuple and its
  renderer), and serialises them when the file is closed (the
  output changes: the next workload, or recording off) or a crash line is written, so no
  JSON encoding and no writer thread competes with the scheduler for the GIL during a
  workload. ``_render`` turns the captured references into the JSON the other modes write.
  A fixed ``SPECSTATE_REC_OUT`` is written at exit (``atexit``) or every ``max_buffered``
  records; a process killed before the file is closed loses that file's records.

The describe helpers are pure (duck-typed) and read only what is already on the CPU, unless a
caller asks for values (``values`` on a GPU tensor synchronises).
"""

from __future__ import annotations

import bisect
import gc
import json
import os
import time
import weakref
from typing import IO, Any, Callable

__all__ = ["tdesc", "shape", "values", "padded_bs", "RecorderCore", "MODES", "per_rank_path"]

#: the recorder's modes (``SPECSTATE_REC_MODE`` / the control file's ``mode``)
MODES = ("full", "lean", "deferred")


def per_rank_path(path: str | None) -> str | None:
    """``path`` with this process's rank in its name when ``SPECSTATE_REC_PER_RANK`` is set (every
    DP rank's scheduler records into its own file), else ``path``."""
    if not path or os.environ.get("SPECSTATE_REC_PER_RANK", "0") in ("", "0"):
        return path
    from specstate.integration.dp_patch import dp_rank_of_process, rank_suffix

    return rank_suffix(path, dp_rank_of_process())


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "device")


def _enum_name(x: Any) -> Any:
    if x is None:
        return None
    name = getattr(x, "name", None)
    if isinstance(name, str) and hasattr(x, "value"):
        return name
    return x if isinstance(x, (int, float, str, bool)) else str(x)


def tdesc(x: Any) -> Any:
    """A tensor as ``[shape..]`` + dtype: ``{"s": [10, 4], "d": "int64"}``; scalars as is;
    enums by name; other objects by class name."""
    if x is None:
        return None
    if _is_tensor(x):
        return {"s": [int(v) for v in x.shape], "d": str(x.dtype).replace("torch.", "")}
    if isinstance(x, (bool, int, float, str)):
        return x
    if hasattr(x, "name") and hasattr(x, "value"):
        return _enum_name(x)
    if isinstance(x, (list, tuple)):
        if len(x) <= 64 and all(isinstance(v, (bool, int, float)) for v in x):
            return list(x)
        return {"len": len(x)}
    return {"cls": type(x).__name__}


def shape(x: Any) -> list[int] | None:
    if x is None or not _is_tensor(x):
        return None
    return [int(v) for v in x.shape]


def values(x: Any, limit: int = 512) -> list[Any] | None:
    """Values of a small CPU-or-GPU tensor or list (a GPU tensor syncs)."""
    if x is None:
        return None
    if _is_tensor(x):
        if x.numel() > limit:
            return None
        return x.detach().flatten().tolist()
    if isinstance(x, (list, tuple)):
        return list(x)[:limit]
    return None


def _int_or_none(x: Any) -> int | None:
    try:
        return None if x is None else int(x)
    except Exception:  # noqa: BLE001
        return None


def _cpu_values(x: Any) -> list[Any] | None:
    if x is None or not _is_tensor(x) or getattr(x.device, "type", str(x.device)) != "cpu":
        return None
    return values(x)


def _render(x: Any) -> Any:
    """``json.dumps(default=...)`` for records captured in ``deferred`` mode: a class by its
    name, a ``torch.dtype`` as ``tdesc`` writes it, an enum by name, any other object by its
    class name (a finish reason: ``FINISH_LENGTH``), as the other modes write them."""
    if isinstance(x, type):
        return x.__name__
    t = type(x)
    if t.__name__ == "dtype" and t.__module__ == "torch":
        return str(x).replace("torch.", "")
    name = getattr(x, "name", None)
    if isinstance(name, str) and hasattr(x, "value"):
        return name
    return t.__name__


def _built(item: Any) -> Any:
    """A buffered record: a dict, a builder of one (``emit_lazy``), or a ``(render, *args)``
    tuple (``emit_raw``)."""
    if type(item) is tuple:
        return item[0](*item[1:])
    return item() if callable(item) else item


def _encode(item: Any) -> str:
    """One buffered record (a dict, or a builder of one) as a JSON line; a record that cannot
    be built or encoded becomes an ``ev: record_error`` line."""
    try:
        return json.dumps(_built(item), separators=(",", ":"), default=_render)
    except Exception as e:  # noqa: BLE001
        return json.dumps({"ev": "record_error", "desc_err": repr(e)[:500]})


def padded_bs(runner: Any, raw_bs: int) -> int | None:
    cbs = list(getattr(runner, "capture_bs", []) or [])
    if not cbs:
        return None
    i = bisect.bisect_left(cbs, raw_bs)
    return cbs[i] if i < len(cbs) else None


class _Writer:
    """Serialises and writes records in a daemon thread, off the scheduler's critical path
    (the scheduler thread only builds small dicts of plain values)."""

    def __init__(self) -> None:
        import queue
        import threading

        self.q: "queue.Queue[tuple[str, dict[str, Any]] | None]" = queue.Queue()
        self.files: dict[str, Any] = {}
        threading.Thread(target=self._run, name="specstate-recorder", daemon=True).start()

    def put(self, path: str, rec: dict[str, Any]) -> None:
        self.q.put((path, rec))

    def drain(self) -> None:
        self.q.join()
        for f in self.files.values():
            f.flush()

    def close(self) -> None:
        self.q.join()
        files, self.files = self.files, {}
        for f in files.values():
            f.close()

    def _run(self) -> None:
        while True:
            item = self.q.get()
            try:
                if item is not None:
                    path, rec = item
                    f = self.files.get(path)
                    if f is None:
                        d = os.path.dirname(path)
                        if d:
                            os.makedirs(d, exist_ok=True)
                        f = self.files[path] = open(path, "a", buffering=1 << 16)
                    f.write(json.dumps(rec, separators=(",", ":"), default=str) + "\n")
                    if self.q.empty():
                        f.flush()
            except Exception:  # noqa: BLE001  (never break the scheduler)
                pass
            finally:
                self.q.task_done()


# ---------------------------------------------------------------------------------------
# the recorder
# ---------------------------------------------------------------------------------------


def _time_gc(phase: str, info: dict[str, Any]) -> None:
    """The one ``gc.callbacks`` entry of the module: hands every collection to each live
    recorder (a weak set: a recorder a test made and dropped is not kept alive by it)."""
    for rec in list(_GC_TIMED):
        rec._on_gc(phase, info)


_GC_TIMED: "weakref.WeakSet[RecorderCore]" = weakref.WeakSet()
gc.callbacks.append(_time_gc)


class RecorderCore:
    """The recorder's control (``SPECSTATE_REC_CTL`` / ``_OUT`` / ``_MODE``), stats and line
    writing, shared by every sglang version's hooks."""

    def __init__(self) -> None:
        self.ctl_path = os.environ.get("SPECSTATE_REC_CTL") or None
        self.static_out = os.environ.get("SPECSTATE_REC_OUT") or None
        self._ctl_key: Any = None
        self.out_path: str | None = self.static_out
        self.stats_path: str | None = None
        self.tag: str = os.environ.get("SPECSTATE_REC_TAG", "")
        self._fh: IO[str] | None = None
        self._header_written_for: str | None = None
        self.iter = 0
        self.header_extra: dict[str, Any] = {}
        self._pending: list[tuple[str, Any]] = []  #: (path, record or builder) before the header
        #: ``full``: every field, written in the scheduler thread (crash-safe line by line);
        #: ``lean``: only what conformance reads, no GPU reads, serialised by a writer thread;
        #: ``deferred``: what ``lean`` records, captured raw, serialised when the file closes
        self.mode = os.environ.get("SPECSTATE_REC_MODE", "full")
        self._writer: _Writer | None = None
        #: ``deferred`` mode: (path, record or builder) in the order they were emitted; written
        #: at once when it holds ``max_buffered`` records (a bound on memory: one long stall)
        self._buf: list[tuple[str, Any]] = []
        self.max_buffered = int(os.environ.get("SPECSTATE_REC_MAX_BUFFERED", "50000"))
        self._at_exit = False  #: ``flush_buffer`` registered with ``atexit``
        #: the collector's pauses in this process, added to the stats of the block they fall in
        #: (not while ``flush_buffer`` writes a deferred recording: that is between blocks)
        self._gc_t0: float | None = None
        self._gc_paused = False
        self._reset_stats()
        _GC_TIMED.add(self)

    # -- control ------------------------------------------------------------------------
    def _reset_stats(self) -> None:
        self.stats: dict[str, Any] = {
            "calls": 0,
            "decode_calls": 0,
            "paths": {},
            "t_fbg_s": 0.0,
            "t_fbg_decode_s": 0.0,
            "t_rec_s": 0.0,
            "t_rec_decode_s": 0.0,
            "records": 0,
            "first_iter": None,
            "last_iter": None,
            "gc_ms": 0.0,  #: wall ms of the collector's passes during the block
            "gc_n": [0, 0, 0],  #: passes per generation
            "gc_ms_gen": [0.0, 0.0, 0.0],
        }

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        """Time every collection (:func:`_time_gc`; issue 11: what the recorder costs beyond its
        hooks may be the collector walking what it keeps)."""
        if phase == "start":
            self._gc_t0 = time.perf_counter()
            return
        t0, self._gc_t0 = self._gc_t0, None
        if t0 is None or self._gc_paused:
            return
        try:
            dt = (time.perf_counter() - t0) * 1e3
            g = min(int(info.get("generation", 0)), 2)
            st = self.stats
            st["gc_ms"] += dt
            st["gc_n"][g] += 1
            st["gc_ms_gen"][g] += dt
        except Exception:  # noqa: BLE001  (never break the scheduler)
            pass

    def poll_ctl(self) -> None:
        if not self.ctl_path:
            return
        try:
            st = os.stat(self.ctl_path)
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            key = None
        if key == self._ctl_key:
            return
        self._ctl_key = key
        ctl: dict[str, Any] = {}
        if key is not None:
            try:
                with open(self.ctl_path) as f:
                    ctl = json.load(f)
            except Exception:  # noqa: BLE001  (half-written: try again next call)
                self._ctl_key = None
                return
        new_tag = str(ctl.get("tag", ""))
        if new_tag != self.tag:
            self.flush_stats()
            self.tag = new_tag
        self.stats_path = ctl.get("stats") or self.stats_path
        mode = str(ctl.get("mode") or self.mode)
        if mode != self.mode:
            self.flush_buffer()  # keep the file's order across a mode change
            self.mode = mode
        out = per_rank_path(ctl.get("out") or None)
        if out != self.out_path:
            self._close()
            self.out_path = out

    def flush_stats(self) -> None:
        if self.stats_path and self.stats["calls"] > 0:
            rec = dict(self.stats, tag=self.tag, pid=os.getpid(), recording=self.out_path is not None)
            try:
                with open(self.stats_path, "a") as f:
                    f.write(json.dumps(rec) + "\n")
            except Exception:  # noqa: BLE001
                pass
        self._reset_stats()

    def _close(self) -> None:
        self.flush_buffer()
        if self._writer is not None:
            self._writer.close()
        if self._fh is not None:
            try:
                self._fh.close()
            except Exception:  # noqa: BLE001
                pass
        self._fh = None

    @property
    def on(self) -> bool:
        return self.out_path is not None

    @property
    def deferred(self) -> bool:
        return self.mode == "deferred"

    def emit_lazy(self, build: Callable[[], dict[str, Any]]) -> None:
        """A record built by ``build()``: at once, or in ``deferred`` mode when the buffer is
        written (in emission order, so a builder may depend on the records before it)."""
        if self.out_path is None:
            return
        if not self.deferred:
            self.emit(build())
        elif self._header_written_for != self.out_path:
            self._pending.append((self.out_path, build))
        else:
            self._buffer(build)

    def emit_raw(self, render: Callable[..., dict[str, Any]], *args: Any) -> None:
        """The record ``render(*args)``: at once, or in ``deferred`` mode when the buffer is
        written (``args``: the hook's capture, a tuple of references and plain values; no
        closure is allocated per record)."""
        if self.out_path is None:
            return
        if self.mode != "deferred":
            self.emit(render(*args))
        elif self._header_written_for != self.out_path:
            self._pending.append((self.out_path, (render, *args)))
        else:
            self._buffer((render, *args))

    def _buffer(self, item: Any) -> None:
        assert self.out_path is not None
        if not self._at_exit:
            import atexit

            atexit.register(self.flush_buffer)  # a fixed SPECSTATE_REC_OUT never closes
            self._at_exit = True
        self._buf.append((self.out_path, item))
        if len(self._buf) >= self.max_buffered:
            self.flush_buffer()

    def flush_buffer(self) -> None:
        """Serialise and write the ``deferred`` records (never raises: a record that cannot
        be built or encoded is replaced by an ``ev: record_error`` line)."""
        buf, self._buf = self._buf, []
        files: dict[str, Any] = {}
        self._gc_paused = True
        try:
            for path, item in buf:
                f = files.get(path)
                if f is None:
                    d = os.path.dirname(path)
                    if d:
                        os.makedirs(d, exist_ok=True)
                    f = files[path] = open(path, "a", buffering=1 << 20)
                f.write(_encode(item) + "\n")
        except Exception:  # noqa: BLE001  (never break the scheduler: an unwritable file)
            pass
        finally:
            self._gc_paused = False
            for f in files.values():
                f.close()

    def emit(self, rec: dict[str, Any]) -> None:
        """Write one line; lines before the file's header (arrivals before the first
        forward) wait until the header is written, so every file starts with it."""
        if self.out_path is None:
            return
        if rec.get("ev") != "header" and self._header_written_for != self.out_path:
            self._pending.append((self.out_path, rec))
            return
        self._write(rec)
        if rec.get("ev") == "header":
            pending, self._pending = self._pending, []
            for path, r in pending:
                if path == self.out_path:
                    if self.deferred:
                        self._buf.append((path, r))
                    else:
                        self._write(_built(r))

    def _write(self, rec: dict[str, Any]) -> None:
        assert self.out_path is not None
        if self.deferred:
            self._buffer(rec)
            if rec.get("ev") == "fbg_error":
                self.flush_buffer()  # the file's records, then the crash line, on disk at once
            return
        if self.mode == "lean" and rec.get("ev") != "fbg_error":
            if self._writer is None:
                self._writer = _Writer()
            self._writer.put(self.out_path, rec)
            return
        if self._writer is not None:
            self._writer.drain()  # keep the file's order, and a crash's line on disk
        if self._fh is None:
            d = os.path.dirname(self.out_path)
            if d:
                os.makedirs(d, exist_ok=True)
            self._fh = open(self.out_path, "a", buffering=1)
        self._fh.write(json.dumps(rec, separators=(",", ":"), default=str) + "\n")
        self._fh.flush()


def _longest_shared_prefix(ids: list[int], seen: dict[str, tuple[int, ...]]) -> tuple[int, str | None]:
    """Longest common prefix of ``ids`` with any earlier prompt (binary search on slices)."""
    best, best_rid = 0, None
    t = tuple(ids)
    for rid, other in seen.items():
        lo, hi = 0, min(len(t), len(other))
        if hi <= best or not hi or t[0] != other[0]:
            continue
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if t[:mid] == other[:mid]:
                lo = mid
            else:
                hi = mid - 1
        if lo > best:
            best, best_rid = lo, rid
    return best, best_rid


