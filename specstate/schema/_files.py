"""Reading the files specstate is given, before any parsing.

A path must name a regular file (a directory, a FIFO that would block, a device or a socket
is refused before it is opened), no larger than the limit for its kind, and decode as UTF-8.
A ``.gz`` file is decompressed with the same limit on what comes out, and a truncated or
corrupt stream is an error naming the file, not an ``EOFError``. Every problem raises the
caller's ``FileFormatError`` subclass with one line that starts with the path.

The one reader of every file specstate is given (``docs/trust.md``): traces, workloads and
recordings (``read_text``, ``read_lines``), and the JSON / TOML files of flags, configs and
adaptive configs (``read_data``: the same checks, then parsed by ``specstate._parsing``, which
bounds nesting to ``MAX_NESTING`` before the parser recurses, and a TOML dotted key the same
way, since ``tomllib`` builds one table per dot).
"""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from pathlib import Path
from typing import Any, Iterator

from specstate._parsing import MAX_NESTING, nesting_depth, parse_json, parse_toml
from specstate.errors import FileFormatError

__all__ = ["MAX_TRACE_BYTES", "MAX_RECORDING_BYTES", "MAX_LINE_BYTES", "MAX_RECORDS", "MAX_NESTING", "read_text",
           "read_lines", "checked_path", "nesting_depth", "parse_json", "parse_toml", "read_data"]

MAX_TRACE_BYTES = 32 << 20  #: a trace (or workload) file, 32 MiB
MAX_RECORDING_BYTES = 1 << 30  #: a recording, 1 GiB (after decompression)
MAX_LINE_BYTES = 16 << 20  #: one record of a recording
MAX_RECORDS = 500_000  #: records in one recording (the longest recorded: 7,000)

Error = type[FileFormatError]


def checked_path(path: Path | str, what: str, max_bytes: int, error: Error) -> Path:
    """``path`` if it is a regular file within ``max_bytes``; else ``error``."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise error(f"{p}: no such {what}") from None
    except OSError as e:
        raise error(f"{p}: cannot read the {what}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{p}: expected a {what} but got a directory")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{p}: expected a {what} but got a FIFO, device or socket (not a regular file)")
    if st.st_size > max_bytes:
        raise error(f"{p}: expected a {what} of at most {max_bytes >> 20} MiB but got {st.st_size >> 20} MiB")
    return p


def _decode(p: Path, data: bytes, what: str, error: Error, line: int | None = None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        where = f"line {line}, " if line is not None else ""
        raise error(f"{p}: expected a UTF-8 {what} but {where}byte {e.start} is {data[e.start:e.start + 1]!r}") from None


def read_text(path: Path | str, *, what: str, max_bytes: int = MAX_TRACE_BYTES, error: Error = FileFormatError) -> str:
    """The whole file as text (checked as the module doc says)."""
    p = checked_path(path, what, max_bytes, error)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise error(f"{p}: cannot read the {what}: {e.strerror or e}") from None
    return _decode(p, data, what, error)


def _blocks(f, size: int = 1 << 20) -> Iterator[bytes]:  # noqa: ANN001
    while True:
        block = f.read(size)
        if not block:
            return
        yield block


class _Lines:
    """Splits a stream of blocks into numbered non-blank lines, within the limits."""

    def __init__(self, p: Path, what: str, max_bytes: int, error: Error) -> None:
        self.p, self.what, self.max_bytes, self.error = p, what, max_bytes, error
        self.total = self.n = self.records = 0
        self.tail = b""

    def _too_big(self) -> None:
        raise self.error(f"{self.p}: expected a {self.what} of at most {self.max_bytes >> 20} MiB (lines of at most "
                         f"{MAX_LINE_BYTES >> 20} MiB, {MAX_RECORDS} records) but line {self.n + 1} goes past it")

    def feed(self, block: bytes) -> Iterator[tuple[int, str]]:
        self.total += len(block)
        if self.total > self.max_bytes:
            self._too_big()
        buf = self.tail + block
        if not buf.strip():  # blank lines only (a blank-line bomb): count them, keep the last partial one
            cut = buf.rfind(b"\n") + 1
            self.n += buf.count(b"\n", 0, cut)
            self.tail = buf[cut:]
            return
        lines = buf.split(b"\n")
        self.tail = lines.pop()
        if len(self.tail) > MAX_LINE_BYTES:
            self.n += len(lines)
            self._too_big()
        for raw in lines:
            yield from self._line(raw)

    def _line(self, raw: bytes) -> Iterator[tuple[int, str]]:
        self.n += 1
        if len(raw) > MAX_LINE_BYTES:
            self.n -= 1
            self._too_big()
        if raw.strip():
            self.records += 1
            if self.records > MAX_RECORDS:
                self.n -= 1
                self._too_big()
            yield self.n, _decode(self.p, raw, self.what, self.error, self.n)

    def end(self) -> Iterator[tuple[int, str]]:
        if self.tail:
            yield from self._line(self.tail)


def read_lines(path: Path | str, *, what: str, max_bytes: int = MAX_RECORDING_BYTES,
               error: Error = FileFormatError) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line; ``.gz`` is decompressed. Read in 1 MiB
    blocks, so a file of blank lines (a gzip bomb of newlines) is counted, not iterated."""
    p = checked_path(path, what, max_bytes, error)
    opener = gzip.open if p.suffix == ".gz" else open
    lines = _Lines(p, what, max_bytes, error)
    try:
        with opener(p, "rb") as f:
            for block in _blocks(f):
                yield from lines.feed(block)
            yield from lines.end()
    except EOFError:
        raise error(f"{p}: the {what} is truncated (the gzip stream ends early)") from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise error(f"{p}: the {what} is not a valid gzip file: {e}") from None
    except OSError as e:
        raise error(f"{p}: cannot read the {what}: {e.strerror or e}") from None


def read_data(path: Path | str, *, what: str, max_bytes: int = 1 << 20, error: Error = FileFormatError) -> Any:
    """A JSON file (TOML when its name ends ``.toml``), read by ``read_text`` and parsed with
    nesting bounded."""
    text = read_text(path, what=what, max_bytes=max_bytes, error=error)
    if str(path).endswith(".toml"):
        return parse_toml(text, str(path), what=f"a TOML {what}", error=error)
    return parse_json(text, str(path), what=f"a JSON {what} (a .toml file is read as TOML)", error=error)
