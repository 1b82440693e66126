"""Writing a graph by the output file's extension, atomically.

``.dot`` (DOT text) and ``.json`` (networkx node-link) need nothing outside Python; ``.svg``
and ``.png`` need graphviz's ``dot`` program. Without it, the ``.dot`` and ``.json`` are
written next to the requested file and the message says how to install ``dot``. Every file
goes through a temporary file in the same folder and ``os.replace``: a reader never sees
half a picture, and a failed write leaves the old file.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from specstate.errors import UsageError

__all__ = ["FORMATS", "INSTALL_DOT", "Written", "write_graph", "atomic_write", "check_out"]

FORMATS = ("svg", "png", "dot", "json")
INSTALL_DOT = ("install graphviz's `dot`: apt-get install graphviz (Debian/Ubuntu), brew install graphviz (macOS), "
               "conda install -c conda-forge graphviz")


@dataclass(frozen=True)
class Written:
    paths: tuple[Path, ...]
    drawn: bool  #: the requested file was written (False: ``dot`` missing, fallback files only)
    message: str


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a drawing is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _format(out: Path) -> str:
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise UsageError(f"Expected --out ending in one of {', '.join('.' + f for f in FORMATS)} but got {out.name!r}")
    return fmt


def check_out(out: Path | str) -> str:
    """The format of ``out``, checked before any work: a known extension, not a directory,
    in a folder that exists or can be made."""
    p = Path(out)
    fmt = _format(p)
    if p.is_dir():
        raise UsageError(f"Expected --out to be a file but {p} is a directory")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"Expected --out in a writable folder but {parent} is not one")
    try:  # root passes os.access everywhere: try it (/proc, /sys, a read-only mount)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"Expected --out in a writable folder but {p.parent}: {getattr(e, 'strerror', None) or e}") from None
    return fmt


def _draw(dot_text: str, fmt: str) -> bytes | None:
    """``dot -T<fmt>``; ``None`` when the ``dot`` program is missing."""
    from specstate._deps import require

    graphviz = require("graphviz", "specstate graph --out .svg/.png")

    try:
        return graphviz.Source(dot_text).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        return None


def write_graph(dot_text: str, json_text: str, out: Path | str) -> Written:
    """Write ``out`` by its extension (see the module doc)."""
    out = Path(out)
    fmt = _format(out)
    if fmt in ("dot", "json"):
        atomic_write(out, (dot_text if fmt == "dot" else json_text).encode())
        return Written((out,), True, f"wrote {out}")
    image = _draw(dot_text, fmt)
    if image is not None:
        atomic_write(out, image)
        return Written((out,), True, f"wrote {out}")
    dot_path, json_path = out.with_suffix(".dot"), out.with_suffix(".json")
    atomic_write(dot_path, dot_text.encode())
    atomic_write(json_path, json_text.encode())
    return Written((dot_path, json_path), False,
                   f"graphviz's `dot` program is missing, so {out} was not drawn; wrote {dot_path} and {json_path}. "
                   f"To draw it, {INSTALL_DOT}; then run: dot -T{fmt} {dot_path} -o {out}")
