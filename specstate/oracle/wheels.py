"""The release's wheel, fetched once and unpacked into a cache.

``pip download --no-deps sglang==X`` into ``<cache>/wheels`` (the folder ``tests/sglang_source.py``
uses too), unpacked once into ``<cache>/oracle/sglang-X``. The oracle loads it from there with
``sys.path`` in its own process: it is never installed into the environment, so three releases
coexist (one per process). The cache is ``$SPECSTATE_SGLANG_CACHE``, default ``.specstate-cache/``
in the current directory (git-ignored).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from specstate.errors import EnvironmentProblem
from specstate.oracle.catalog import RELEASES as _RELEASES
from specstate.oracle.worker.catalog import RELEASES as _WORKER_RELEASES

__all__ = ["RELEASES", "OracleUnavailable", "cache_dir", "unpacked", "wheel_path"]

#: the releases with an oracle adapter (``specstate/oracle/sglang_<release>.py``, listed in ``catalog.py``),
#: then those with a worker oracle only (``specstate/oracle/worker/catalog.py``)
RELEASES = _RELEASES + tuple(r for r in _WORKER_RELEASES if r not in _RELEASES)


class OracleUnavailable(EnvironmentProblem):
    """The release's wheel is not in the cache and cannot be downloaded (no package registry)."""


def cache_dir() -> Path:
    return Path(os.environ.get("SPECSTATE_SGLANG_CACHE", ".specstate-cache")).resolve()


def wheel_path(release: str) -> Path:
    """The cached wheel of ``release``, downloaded (``--no-deps``) when missing."""
    wheels = cache_dir() / "wheels"
    found = sorted(wheels.glob(f"sglang-{release}-*.whl"))
    if found:
        return found[0]
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(wheels),
           f"sglang=={release}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    found = sorted(wheels.glob(f"sglang-{release}-*.whl"))
    if done.returncode != 0 or not found:
        raise OracleUnavailable(f"sglang {release}: no wheel in {wheels} and `pip download --no-deps sglang=={release}` "
                                f"failed (no package registry?); put the wheel there to run the oracle")
    return found[0]


def unpacked(release: str) -> Path:
    """The folder holding the release's ``sglang`` package (unpacked once, atomically)."""
    if release not in RELEASES:
        raise OracleUnavailable(f"Expected a release from {list(RELEASES)} but got {release!r}")
    dest = cache_dir() / "oracle" / f"sglang-{release}"
    if (dest / "sglang" / "srt" / "managers" / "scheduler.py").is_file():
        return dest
    whl = wheel_path(release)
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    with zipfile.ZipFile(whl) as z:
        z.extractall(tmp, [m for m in z.namelist() if m.startswith("sglang/")])
    try:
        os.replace(tmp, dest)
    except OSError:  # another process unpacked it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return dest
