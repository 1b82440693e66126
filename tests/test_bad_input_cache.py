"""The oracle runs only pinned upstream code (``specstate/upstream.py``, ``docs/trust.md``).

A hostile or broken cache, as an attacker or an accident leaves it: a forged, truncated, empty
or other release's wheel under the pinned name, a look-alike wheel beside it, code planted in or
appended to the unpacked tree, forged bytecode, a missing module, a link, a member over the size
bound, an interrupted unpack, no wheel and no registry. Each is one line naming the release, the
file and the reason, exit 2, nothing written (no trace, no failures folder), nothing run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from specstate import upstream
from specstate.cli import main

RELEASE = "0.5.12"
NAME, SHA = upstream.PINS[RELEASE]
ROOT = Path(__file__).resolve().parents[1]
SHARED = upstream.cache_dir() / "wheels"  #: the suite's cache, read (copied from) only


def _shared_wheel(release: str = RELEASE) -> Path:
    path = SHARED / upstream.PINS[release][0]
    if not path.is_file():
        pytest.skip(f"no cached wheel of sglang {release} in {SHARED}")
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of this test's own (nothing shared is ever changed)."""
    c = tmp_path / "cache"
    (c / "wheels").mkdir(parents=True)
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(c))
    monkeypatch.chdir(tmp_path)
    return c


@pytest.fixture
def good(cache: Path) -> Path:
    """The cache holding the pinned 0.5.12 wheel (a copy)."""
    shutil.copy(_shared_wheel(), cache / "wheels" / NAME)
    return cache


def _refused(capsys: pytest.CaptureFixture[str], *reason: str, argv: list[str] | None = None) -> str:
    code = main(argv or ["oracle", "--engine", RELEASE, "--examples", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"sglang {RELEASE}" in err and all(r in err for r in reason), err
    assert not any(Path(".").glob("*failures*")) and not list(Path(".").glob("*.json")), "wrote something"
    return err


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 not a wheel", "truncated", "other release"])
def test_a_wheel_that_is_not_the_pinned_one_is_refused(good: Path, content: object,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = good / "wheels" / NAME
    if content == "truncated":
        data = path.read_bytes()[: path.stat().st_size // 2]
    elif content == "other release":
        data = _shared_wheel("0.5.9").read_bytes()
    else:
        assert isinstance(content, bytes)
        data = content
    path.write_bytes(data)
    _refused(capsys, str(path), "is not the pinned")


def test_a_lookalike_wheel_beside_the_pinned_one_is_never_read(good: Path) -> None:
    (good / "wheels" / f"sglang-{RELEASE}-0evil-py3-none-any.whl").write_bytes(b"evil")
    assert upstream.wheel(RELEASE) == good / "wheels" / NAME


def test_a_wheel_that_is_a_fifo_or_folder_is_refused_without_blocking(cache: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(cache / "wheels" / NAME)
    _refused(capsys, "regular file")
    (cache / "wheels" / NAME).unlink()
    (cache / "wheels" / NAME).mkdir()
    _refused(capsys, "regular file")


def _tree(cache: Path) -> Path:
    root = upstream.tree(RELEASE)
    upstream._tree.cache_clear()  # the next use checks it again, as a new process would
    assert root.parent == cache / "oracle" and SHA[:16] in root.name
    return root


@pytest.mark.parametrize("change", ["planted module", "appended code", "forged bytecode", "missing module", "link",
                                    "writable and rewritten"])
def test_a_changed_tree_is_refused_before_it_runs(good: Path, change: str, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(good)
    sched = root / "sglang/srt/managers/scheduler.py"
    if change == "planted module":
        (root / "sglang/srt/evil.py").write_text("raise SystemExit('ran')\n")
        reason = "not in the pinned wheel"
    elif change == "appended code":
        os.chmod(sched, 0o644)
        with open(sched, "a") as f:
            f.write("\nraise SystemExit('ran')\n")
        reason = "changed since unpacked"
    elif change == "forged bytecode":
        (sched.parent / "__pycache__").mkdir()
        (sched.parent / "__pycache__" / "scheduler.cpython-311.pyc").write_bytes(b"\x00" * 64)
        reason = "not in the pinned wheel"
    elif change == "missing module":
        sched.unlink()
        reason = "missing from the unpacked tree"
    elif change == "link":
        sched.unlink()
        sched.symlink_to("/etc/hostname")
        reason = "changed since unpacked"
    else:  # same size, other bytes
        os.chmod(sched, 0o644)
        data = bytearray(sched.read_bytes())
        data[0:1] = b"#" if data[0:1] != b"#" else b" "
        sched.write_bytes(bytes(data))
        reason = "sha256 differs"
    _refused(capsys, reason)


def test_the_unpacked_tree_is_read_only_and_holds_the_wheels_files_only(good: Path) -> None:
    root = _tree(good)
    sched = root / "sglang/srt/managers/scheduler.py"
    assert not os.access(sched, os.W_OK) or os.geteuid() == 0
    assert sched.stat().st_mode & 0o222 == 0
    assert not list(root.rglob("__pycache__")) and not list(good.glob("oracle/*.partial-*"))


def test_no_wheel_and_no_registry_is_one_line(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(upstream.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "no index"))
    err = _refused(capsys, str(cache / "wheels" / NAME), "no package registry")
    assert not list((cache / "wheels").iterdir()), "the download folder was left behind"
    assert "FlakyFailure" not in err


def test_the_download_is_hash_pinned(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        folder = Path(cmd[cmd.index("-d") + 1])
        (folder / NAME).write_bytes(b"a forged download")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(upstream.subprocess, "run", fake)
    with pytest.raises(upstream.UpstreamUnavailable, match="is not the pinned"):
        upstream.wheel(RELEASE)
    req = Path(seen[0][seen[0].index("-r") + 1])
    assert not req.exists() and not list((cache / "wheels").iterdir())  # nothing kept
    assert "--platform" in seen[0] and "manylinux_2_34_x86_64" in seen[0]


def test_a_release_without_a_pin_is_refused(cache: Path) -> None:
    for release in ("0.5.99", "0.5.12.post9", "9" * 4300, None):
        with pytest.raises(upstream.UpstreamUnavailable, match="no pinned wheel") as e:
            upstream.tree(release)  # type: ignore[arg-type]
        assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_a_member_over_the_size_bound_is_not_unpacked(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream, "MAX_MEMBER_BYTES", 64 << 10)
    with pytest.raises(upstream.UpstreamUnavailable, match="cannot unpack it: more than 0 MiB"):
        upstream.tree(RELEASE)
    assert list((good / "oracle").iterdir()) == []  # the partial folder removed


def test_an_interrupted_unpack_leaves_nothing(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = upstream._stream

    def interrupted(*a: object, **k: object) -> tuple[str, int]:
        calls.append(1)
        if len(calls) == 50:
            raise KeyboardInterrupt
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(upstream, "_stream", interrupted)
    with pytest.raises(KeyboardInterrupt):
        upstream.tree(RELEASE)
    assert list((good / "oracle").iterdir()) == []


def test_a_killed_unpacks_partial_folder_is_reaped(good: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = good / "oracle" / f"sglang-{RELEASE}-{SHA[:16]}.partial-{dead.stdout.strip()}-x"
    (stale / "sglang").mkdir(parents=True)
    (stale / "sglang" / "a.py").write_text("")
    os.chmod(stale / "sglang" / "a.py", 0o444)
    upstream.tree(RELEASE)
    assert not stale.exists()


def test_the_default_cache_is_the_users_never_the_current_folder(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPECSTATE_SGLANG_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert upstream.cache_dir() == tmp_path / "xdg" / "specstate"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # not absolute: ignored, as the spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert upstream.cache_dir() == tmp_path / "home" / ".cache" / "specstate"
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(tmp_path / "mine"))
    assert upstream.cache_dir() == tmp_path / "mine"


@pytest.mark.slow  # a whole oracle run in a fresh process (20 s)
def test_an_oracle_run_leaves_nothing_in_tmpdir_nor_bytecode_in_the_tree(good: Path, tmp_path: Path) -> None:
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT), SPECSTATE_SGLANG_CACHE=str(good))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # Python's default: a module loaded past the hook would leave bytecode
    done = subprocess.run([sys.executable, "-m", "specstate", "oracle", "--engine", RELEASE, "--examples", "3"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(tmp.iterdir()) == []
    tree = good / "oracle" / f"sglang-{RELEASE}-{SHA[:16]}"
    assert not list(tree.rglob("__pycache__")) and not list(tree.rglob("*.pyc"))
    store = list(Path(str(tree) + ".bytecode").rglob("*.pyc"))  # the signed entries, beside the tree
    assert len(store) > 100 and all(p.stat().st_size > 32 for p in store)


# -- the citation cache (``specstate engines`` reads the unpacked sources; nothing is run) ----------

@pytest.mark.parametrize("what,make,needle", [
    ("a FIFO", lambda p: os.mkfifo(p), "not a regular file"),
    ("a folder", lambda p: p.mkdir(), "got a directory"),
    ("bad UTF-8", lambda p: p.write_bytes(b"class Req:\n    x = '\xff'\n"), "expected a UTF-8"),
    ("nested brackets", lambda p: p.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n"), "schedule_batch.py"),
    ("a deep attribute chain", lambda p: p.write_text("x = a" + ".b" * 200_000 + "\n"), "schedule_batch.py"),
    ("not Python", lambda p: p.write_text("class (\n"), "does not parse"),
    ("a null byte", lambda p: p.write_bytes(b"x = 1\0\n"), "schedule_batch.py"),
    ("8 MiB", lambda p: p.write_bytes(b"#" * (8 << 20)), "at most 4 MiB"),
])
def test_a_hostile_citation_cache_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], what: str, make: object,
                                                    needle: str) -> None:
    import signal

    srt = tmp_path / "sglang-0.5.12" / "sglang" / "srt" / "managers"
    srt.mkdir(parents=True)
    make(srt / "schedule_batch.py")  # type: ignore[operator]
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(tmp_path))
    from specstate import citations

    citations._index.cache_clear()
    old = signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError(what)))
    signal.alarm(20)
    try:
        code = main(["engines"])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (what, code, err)
    assert needle in err and "schedule_batch.py" in err, (what, err)


def test_a_download_is_checked_moved_into_place_and_a_killed_ones_folder_reaped(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = cache / "wheels" / f".download-{dead.stdout.strip()}-x"
    stale.mkdir()

    def fake(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        shutil.copy(_shared_wheel(), Path(cmd[cmd.index("-d") + 1]) / NAME)  # what the registry serves
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(upstream.subprocess, "run", fake)
    assert upstream.wheel(RELEASE) == cache / "wheels" / NAME
    assert sorted(p.name for p in (cache / "wheels").iterdir()) == [NAME]


# -- the oracle's bytecode (``specstate/_bytecode.py``) ------------------------------------

def _import_from(root: Path, manifest: dict[str, tuple[str, int]], secret: bytes | None, name: str) -> object:
    """``name`` imported from ``root`` through the checked-tree hook, in a clean import state."""
    import importlib

    from specstate import _bytecode

    hook = _bytecode.hook(str(root), manifest, Path(str(root) + ".bytecode"), secret)
    saved = (list(sys.path), list(sys.path_hooks), dict(sys.path_importer_cache))
    sys.path_hooks.insert(0, hook)
    sys.path.insert(0, str(root))
    sys.path_importer_cache.clear()
    try:
        sys.modules.pop(name, None)
        return importlib.import_module(name)
    finally:
        sys.modules.pop(name, None)
        sys.path[:], sys.path_hooks[:] = saved[0], saved[1]
        sys.path_importer_cache.clear()
        sys.path_importer_cache.update(saved[2])


def test_forged_bytecode_is_never_loaded_only_bytecode_this_users_key_signed(tmp_path: Path) -> None:
    import base64
    import hashlib
    import marshal

    from specstate import _bytecode

    root = tmp_path / "tree"
    root.mkdir()
    src = b"X = 'source'\n"
    (root / "h37_mod.py").write_bytes(src)
    digest = base64.urlsafe_b64encode(hashlib.sha256(src).digest()).rstrip(b"=").decode()
    manifest = {"h37_mod.py": (digest, len(src))}
    secret = b"k" * 32
    assert _import_from(root, manifest, secret, "h37_mod").X == "source"  # type: ignore[attr-defined]
    entry = tmp_path / "tree.bytecode" / "h37_mod.py.pyc"
    assert entry.is_file()  # signed and kept
    assert _import_from(root, manifest, secret, "h37_mod").X == "source"  # type: ignore[attr-defined]
    forged = marshal.dumps(compile("X = 'forged'", str(root / "h37_mod.py"), "exec"))
    entry.write_bytes(b"\0" * 32 + forged)  # a planted entry: a wrong tag
    assert _import_from(root, manifest, secret, "h37_mod").X == "source"  # type: ignore[attr-defined]
    entry.write_bytes(_bytecode._tag(b"x" * 32, "h37_mod.py", digest, forged) + forged)  # another key's tag
    assert _import_from(root, manifest, secret, "h37_mod").X == "source"  # type: ignore[attr-defined]
    (root / "__pycache__").mkdir()  # Python's own bytecode beside the source: never looked at
    import importlib.util

    pyc = Path(importlib.util.cache_from_source(str(root / "h37_mod.py")))
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(b"forged")
    assert _import_from(root, manifest, None, "h37_mod").X == "source"  # type: ignore[attr-defined]


def test_the_bytecode_key_is_made_once_private_and_outside_the_cache(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from specstate import _bytecode

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    first = _bytecode.key()
    assert first is not None and len(first) == 32 and _bytecode.key() == first
    path = tmp_path / "state" / "specstate" / "bytecode.key"
    assert path.stat().st_mode & 0o077 == 0
    path.write_bytes(b"short")
    assert _bytecode.key() is None  # a damaged key: no store, every module from source


# -- RECORD is CSV: quoted names (a comma in the name) are unpacked and checked; a tree unpacked by the
# -- comma-splitting reader before the fix is noticed and unpacked again, once -----------------------

FAKE = "0.0.37"
FAKE_FILES = {
    "sglang/__init__.py": b"",
    "sglang/srt/managers/scheduler.py": b"X = 1\n",
    "sglang/srt/layers/moe/configs/E=128,N=384,device_name=NVIDIA_H100.json": b'{"1": {"BLOCK_SIZE_M": 16}}\n',
    "sglang/srt/layers/moe/configs/E=8,N=7168,dtype=fp8_w8a8.json": b'{"2": {}}\n',
    "sglang/srt/odd,name.py": b"Y = 2\n",  # a quoted ``.py``: the citation ("source") tree's too
    'sglang/srt/say "hi".json': b"{}\n",  # a quote in the name is quoted as well
}
QUOTED = sorted(n for n in FAKE_FILES if "," in n or '"' in n)


def _old_comma_split(text: str, keep: object) -> dict[str, tuple[str, int]]:
    """``upstream._record`` before the fix: each line split on its first two commas."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(",")
        digest, _, size = rest.partition(",")
        if keep(name) and digest.startswith("sha256=") and size.isdigit():  # type: ignore[operator]
            out[name] = (digest.removeprefix("sha256="), int(size))
    return out


@pytest.fixture
def fake(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A pinned fake release ``0.0.37`` whose wheel (built here, RECORD written by ``csv``, as
    pip's and the wheel tool's are) holds names with commas and quotes."""
    import csv
    import hashlib
    import io
    import zipfile

    name = f"sglang-{FAKE}-py3-none-any.whl"
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    for rel, data in FAKE_FILES.items():
        writer.writerow([rel, "sha256=" + upstream._b64(hashlib.sha256(data).digest()), len(data)])
    writer.writerow([f"sglang-{FAKE}.dist-info/RECORD", "", ""])
    assert rows.getvalue().count('"') >= 2 * len(QUOTED)  # the quoted lines the old reader dropped
    path = cache / "wheels" / name
    with zipfile.ZipFile(path, "w") as z:
        for rel, data in FAKE_FILES.items():
            z.writestr(rel, data)
        z.writestr(f"sglang-{FAKE}.dist-info/RECORD", rows.getvalue())
    monkeypatch.setitem(upstream.PINS, FAKE, (name, hashlib.sha256(path.read_bytes()).hexdigest()))
    upstream._tree.cache_clear()
    yield cache
    upstream._tree.cache_clear()


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _fresh(kind: str = "oracle") -> Path:
    root = upstream.tree(FAKE, kind)
    upstream._tree.cache_clear()  # the next use checks it again, as a new process would
    return root


def _old_style(monkeypatch: pytest.MonkeyPatch, kind: str = "oracle") -> Path:
    """The tree the comma-splitting reader unpacked (the real unpack, that reader patched in)."""
    with monkeypatch.context() as m:
        m.setattr(upstream, "_parse_record", _old_comma_split)
        root = _fresh(kind)
        upstream._record.cache_clear()
    upstream._record.cache_clear()
    assert QUOTED[0] not in _files(root) and "sglang/srt/managers/scheduler.py" in _files(root)
    return root


def test_a_fresh_unpack_holds_every_record_member_quoted_names_too(fake: Path) -> None:
    assert sorted(upstream.manifest(FAKE)) == sorted(FAKE_FILES)
    root = _fresh()
    assert _files(root) == sorted(FAKE_FILES)
    assert all((root / n).read_bytes() == FAKE_FILES[n] for n in QUOTED)
    source = _fresh("source")
    assert _files(source) == ["sglang/srt/managers/scheduler.py", "sglang/srt/odd,name.py"]
    quoted = root / QUOTED[0]
    os.chmod(quoted, 0o644)
    quoted.write_bytes(quoted.read_bytes().replace(b"16", b"32"))  # a quoted file is checked like any other
    with pytest.raises(upstream.UpstreamUnavailable, match="sha256 differs"):
        upstream.tree(FAKE)


@pytest.mark.parametrize("kind", ["oracle", "source"])
def test_a_tree_the_comma_splitting_reader_unpacked_is_unpacked_again_once(
        fake: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    root = _old_style(monkeypatch, kind)
    unpacks: list[Path] = []
    real = upstream._extract

    def counted(release: str, kind: str, tmp: Path) -> None:
        unpacks.append(tmp)
        real(release, kind, tmp)

    monkeypatch.setattr(upstream, "_extract", counted)
    assert _fresh(kind) == root and len(unpacks) == 1
    want = sorted(FAKE_FILES) if kind == "oracle" else ["sglang/srt/managers/scheduler.py", "sglang/srt/odd,name.py"]
    assert _files(root) == want
    assert sorted(p.name for p in root.parent.iterdir() if p.name.startswith(root.name)) == [root.name]  # no leftovers
    assert (root / "sglang/srt/odd,name.py").stat().st_mode & 0o222 == 0
    assert _fresh(kind) == root and len(unpacks) == 1  # once: the new tree passes the check as it is


@pytest.mark.parametrize("damage", ["a module missing too", "one quoted name missing", "a file added"])
def test_an_old_style_tree_with_anything_else_wrong_is_refused_not_replaced(
        fake: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    if damage == "one quoted name missing":  # a fresh tree that lost one: damaged, not old-style
        root = _fresh()
        (root / QUOTED[0]).unlink()
        reason = "missing from the unpacked tree (1 files)"
    elif damage == "a module missing too":
        root = _old_style(monkeypatch)
        (root / "sglang/srt/managers/scheduler.py").unlink()
        reason = f"missing from the unpacked tree ({len(QUOTED) + 1} files)"
    else:
        root = _old_style(monkeypatch)
        (root / "sglang/srt/evil.py").write_text("raise SystemExit('ran')\n")
        reason = "not in the pinned wheel"
    before = _files(root)
    with pytest.raises(upstream.UpstreamUnavailable) as e:
        upstream.tree(FAKE)
    assert reason in str(e.value) and f"delete {root}" in str(e.value) and "\n" not in str(e.value)
    assert _files(root) == before  # left as it was, for the user to look at


def test_a_tree_another_process_replaced_meanwhile_is_kept(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _old_style(monkeypatch)
    real = upstream._extract
    theirs: list[int] = []

    def and_another_process(release: str, kind: str, tmp: Path) -> None:
        real(release, kind, tmp)
        other = root.with_name(root.name + ".other")  # what the other process's swap leaves at ``root``
        shutil.copytree(tmp, other)
        os.rename(root, root.with_name(root.name + ".gone"))
        os.rename(other, root)
        theirs.append(root.stat().st_ino)

    monkeypatch.setattr(upstream, "_extract", and_another_process)
    assert upstream.tree(FAKE) == root and [root.stat().st_ino] == theirs  # theirs kept, not moved aside
    assert _files(root) == sorted(FAKE_FILES)
    assert sorted(p.name for p in root.parent.iterdir()) == [root.name, root.name + ".gone"]  # ours removed


def test_the_oracles_private_folder_leaves_room_for_upstreams_socket_names(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A UNIX socket path holds 107 bytes: under a long ``$TMPDIR`` (pytest-xdist's folders in CI)
    upstream's ZMQ ``ipc://`` names in the oracle's private folder did not fit (``ZMQError: File
    name too long``); the private folders then go in ``/tmp``, under a short one in ``$TMPDIR``."""
    import tempfile

    from specstate.oracle._tmp import socket_base

    long = tmp_path / ("x" * 60)
    long.mkdir()
    short = Path(tempfile.mkdtemp(prefix="s", dir="/tmp"))
    try:
        for folder, expected in ((long, "/tmp"), (short, str(short))):
            monkeypatch.setattr(tempfile, "tempdir", str(folder))
            assert socket_base() == expected
    finally:
        short.rmdir()
