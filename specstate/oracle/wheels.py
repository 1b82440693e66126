"""The release's pinned wheel, checked and unpacked into the cache (``specstate/upstream.py``).

The wheel is the one pinned by sha256 for the release (``upstream.PINS``), downloaded once (hash
pinned) into ``<cache>/wheels`` and unpacked into ``<cache>/oracle/sglang-X-<hash>``, whose every
file is checked against the wheel's ``RECORD`` once per process before it is run. The oracle loads
it from there with ``sys.path`` in its own process (``child.py``, bytecode kept outside the cache):
it is never installed into the environment, so several releases coexist (one per process). The
cache is ``$SPECSTATE_SGLANG_CACHE``, else ``$XDG_CACHE_HOME/specstate`` (``~/.cache/specstate``).
"""

from __future__ import annotations

from pathlib import Path

from specstate import upstream
from specstate.oracle.catalog import RELEASES as _RELEASES
from specstate.oracle.worker.catalog import RELEASES as _WORKER_RELEASES

__all__ = ["RELEASES", "OracleUnavailable", "OracleOffline", "cache_dir", "unpacked", "importable", "wheel_path"]

#: the releases with an oracle adapter (each release folder's ``oracle.py``, listed in ``catalog.py``),
#: then those with a worker oracle only (``specstate/oracle/worker/catalog.py``)
RELEASES = _RELEASES + tuple(r for r in _WORKER_RELEASES if r not in _RELEASES)

#: the release's wheel is not in the cache and cannot be downloaded, or the cache fails a check
#: (one line naming the release, the file and the reason: ``upstream.UpstreamUnavailable``)
OracleUnavailable = upstream.UpstreamUnavailable

#: ... the first because the wheel is not cached and there is no package registry (tests skip on it)
OracleOffline = upstream.UpstreamOffline

cache_dir = upstream.cache_dir


def wheel_path(release: str) -> Path:
    """The cached wheel of ``release``, checked against its pin; downloaded (hash pinned) when missing."""
    return upstream.wheel(release)


def unpacked(release: str) -> Path:
    """The folder holding the release's ``sglang`` package: the pinned wheel unpacked once,
    checked file by file against its ``RECORD`` (once per process)."""
    if release not in RELEASES:
        raise OracleUnavailable(f"Expected a release from {list(RELEASES)} but got {release!r}")
    return upstream.tree(release, "oracle")


_HOOKED: set[str] = set()


def importable(release: str) -> str:
    """``unpacked(release)`` as a ``str`` for ``stubs.install``, its modules loadable in this
    process only from their checked source or this user's signed bytecode (``_bytecode.install``),
    never from a ``__pycache__``. Every oracle process (``child.py``, ``worker/child.py``,
    ``multirank_child.py``) imports the tree through this."""
    from specstate import _bytecode

    root = str(unpacked(release))
    if root not in _HOOKED:
        _bytecode.install(root, upstream.manifest(release))
        _HOOKED.add(root)
    return root
