"""The oracle's bytecode for the checked sglang tree: never Python's ``__pycache__``, only entries
this user's key signed.

Python trusts a ``.pyc`` whose header matches the source's size and time (or its SipHash): a
forged one, stamped to match, runs in place of the checked source. So the tree's modules are
loaded by a path hook of their own (``install``): compiled from the source, or read from a store
beside the tree (``<tree>.bytecode/``) whose every entry carries an HMAC-SHA256 over the Python
magic number, the module's path, the source's sha256 from the wheel's ``RECORD`` and the code.
The key is 32 random bytes kept outside the cache (``$XDG_STATE_HOME/specstate/bytecode.key``,
default ``~/.local/state/specstate``, mode 0600), so bytecode planted in a cache (a checkout's
``SPECSTATE_SGLANG_CACHE``, a copied cache folder) fails its tag and is compiled again from the
source instead. Without a key (a read-only home) every process compiles from source: slower
(about 6 s more per oracle process here), never wrong. Modules outside the tree keep Python's own
bytecode handling.

Every oracle child installs it (``oracle/wheels.py`` for sglang's, the vLLM release's
``integration/vllm_0_34_0/oracle_child.py`` for vLLM's trees), so it sits at the package's top,
below the ``oracle`` room and the ``integration`` room (the integration room imports no oracle module).
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import marshal
import os
import sys
import tempfile
from importlib.machinery import EXTENSION_SUFFIXES, SOURCE_SUFFIXES, ExtensionFileLoader, FileFinder, SourceFileLoader
from pathlib import Path
from typing import Any, Callable, Mapping

__all__ = ["install", "key", "hook", "read_signed", "write_signed"]

_TAG = 32  #: bytes of an entry's HMAC-SHA256


def key() -> bytes | None:
    """This user's bytecode key (made on first use), or ``None`` where it cannot be kept."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    folder = Path(base if os.path.isabs(base) else Path.home() / ".local" / "state") / "specstate"
    path = folder / "bytecode.key"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
        with open(path, "rb") as f:
            data = f.read(33)
    except OSError:
        return None
    return data if len(data) == 32 else None


def _tag(secret: bytes, rel: str, digest: str, code: bytes) -> bytes:
    msg = b"\0".join([importlib.util.MAGIC_NUMBER, rel.encode(), digest.encode(), code])
    return hmac.new(secret, msg, hashlib.sha256).digest()


def _loader(root: str, manifest: Mapping[str, tuple[str, int]], store: Path, secret: bytes | None) -> type:
    class Checked(SourceFileLoader):
        """A module of the checked tree: signed bytecode from the store, else its source."""

        def get_code(self, fullname: str) -> Any:
            rel = os.path.relpath(self.path, root).replace(os.sep, "/")
            entry = manifest.get(rel)
            cached = store / (rel + ".pyc")
            if secret is not None and entry is not None:
                code = _read(cached, secret, rel, entry[0])
                if code is not None:
                    return code
            code = self.source_to_code(self.get_data(self.path), self.path)
            if secret is not None and entry is not None:
                write_signed(cached, secret, rel, entry[0], marshal.dumps(code))
            return code

    return Checked


def _read(path: Path, secret: bytes, rel: str, digest: str) -> Any:
    code = read_signed(path, secret, rel, digest)
    if code is None:
        return None
    try:
        return marshal.loads(code)
    except (ValueError, EOFError, TypeError):
        return None


def read_signed(path: Path, secret: bytes, rel: str, digest: str) -> bytes | None:
    """The payload of the entry at ``path`` if this user's key signed it for ``rel`` and ``digest``
    (the source's sha256) under this Python; ``None`` when it is missing, forged, stale or torn
    (the caller derives it again from the source). Also the store of ``citations.py``'s index."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    tag, payload = data[:_TAG], data[_TAG:]
    if len(tag) != _TAG or not hmac.compare_digest(tag, _tag(secret, rel, digest, payload)):
        return None
    return payload


def write_signed(path: Path, secret: bytes, rel: str, digest: str, payload: bytes) -> None:
    """``payload`` stored at ``path`` with its tag, atomically (a read-only store: nothing, the next
    process derives it again)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".entry-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(_tag(secret, rel, digest, payload) + payload)
        os.replace(tmp, path)
    except OSError:
        pass


def hook(root: str, manifest: Mapping[str, tuple[str, int]], store: Path,
         secret: bytes | None) -> Callable[[str], FileFinder]:
    """A ``sys.path_hooks`` entry for the folders under ``root``; any other path falls through."""
    loaders = [(ExtensionFileLoader, EXTENSION_SUFFIXES), (_loader(root, manifest, store, secret), SOURCE_SUFFIXES)]

    def finder(path: str) -> FileFinder:
        if path != root and not path.startswith(root + os.sep):
            raise ImportError("not the checked tree")  # the standard hooks take it
        return FileFinder(path, *loaders)  # no sourceless .pyc loader

    return finder


def install(root: str, manifest: Mapping[str, tuple[str, int]]) -> None:
    """The tree at ``root`` (checked against ``manifest``) loaded through ``hook``; before ``root``
    goes on ``sys.path``. The process then writes no ``__pycache__`` anywhere (``sys.dont_write_bytecode``):
    a module of the tree loaded past the path hook (by file location) would otherwise leave Python's
    own bytecode in the tree wherever ``PYTHONDONTWRITEBYTECODE`` is not set, and the next check of
    the tree refuses it as an added file."""
    sys.dont_write_bytecode = True
    sys.path_hooks.insert(0, hook(root, manifest, Path(root + ".bytecode"), key()))
    sys.path_importer_cache.clear()
