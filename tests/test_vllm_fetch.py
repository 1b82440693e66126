"""vLLM's oracle code is fetched pinned (``specstate/upstream.py``, the ``vllm_*`` functions;
docs/trust.md): the dependencies' every wheel carries its sha256 and pip installs them in
hash-checking mode, no registry is one line (the slow oracle test skips on exactly that), and a
dependencies tree that is not the pinned one, or was changed, is refused. No network: pip is
replaced by a fake here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from specstate import upstream
from specstate.integration.vllm_0_34_0 import oracle

REQ = upstream.vllm_requirements("0.34.0")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    c = tmp_path / "cache"
    c.mkdir()
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(c))
    monkeypatch.delenv("SPECSTATE_VLLM_PATH", raising=False)
    upstream._vdeps.cache_clear()
    upstream._vtree.cache_clear()
    return c


def _pins() -> list[str]:
    return [ln for ln in REQ.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def test_every_pinned_dependency_is_one_version_and_one_sha256() -> None:
    lines = _pins()
    assert len(lines) == 70
    for ln in lines:
        assert re.fullmatch(r"[A-Za-z0-9_.]+==[0-9A-Za-z.]+ --hash=sha256:[0-9a-f]{64}", ln), ln
    assert oracle.WHEEL_SHA256 == upstream.VLLM_PINS["0.34.0"][1]


def test_no_registry_is_one_line_and_leaves_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream.subprocess, "run",
                        lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution"))
    with pytest.raises(upstream.UpstreamOffline) as e:
        oracle.oracle_paths()
    assert len(str(e.value).splitlines()) == 1 and str(e.value).startswith("vllm 0.34.0: ")
    assert "No matching distribution" in str(e.value)
    assert not oracle.available()
    assert [p.name for p in (cache / "wheels").iterdir()] == []  # the download folder removed


def _fake_install(tree: dict[str, bytes], extra: dict[str, bytes] | None = None) -> tuple[list[list[str]], object]:
    """A pip that installs one file per pinned distribution (with its RECORD), plus ``extra``."""
    seen: list[list[str]] = []

    def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        target = Path(cmd[cmd.index("--target") + 1])
        for rel, data in {**tree, **(extra or {})}.items():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).write_bytes(data)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return seen, run


def _pinned_tree() -> dict[str, bytes]:
    out = {}
    for ln in _pins():
        name, _, version = ln.split()[0].partition("==")
        mod, data = f"{name.lower()}_mod.py", f"# {name}\n".encode()
        digest = upstream._b64(upstream.hashlib.sha256(data).digest())
        info = f"{name}-{version}.dist-info"
        out[mod] = out[f"{info}/METADATA"] = data
        out[f"{info}/RECORD"] = (f"{mod},sha256={digest},{len(data)}\n{info}/METADATA,sha256={digest},{len(data)}\n"
                                 f"{info}/RECORD,,\n").encode()
    return out


def test_the_dependencies_install_hash_pinned_and_a_changed_tree_is_refused(cache: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    seen, run = _fake_install(_pinned_tree())
    monkeypatch.setattr(upstream.subprocess, "run", run)
    deps = upstream.vllm_deps()
    cmd = seen[0]
    assert {"install", "--no-deps", "--require-hashes", "--only-binary=:all:", "--target"} <= set(cmd)
    assert Path(cmd[cmd.index("-r") + 1]) == REQ and "manylinux_2_28_x86_64" in cmd
    assert deps.parent == cache and deps.name.startswith("vllm-0.34.0-deps-")
    (deps / "openai_mod.py").chmod(0o644)
    (deps / "openai_mod.py").write_bytes(b"# OPENAI\n")  # the same size
    upstream._vdeps.cache_clear()
    with pytest.raises(upstream.UpstreamUnavailable, match="sha256 differs"):
        upstream.vllm_deps()
    (deps / "openai_mod.py").write_bytes(b"# openai\n")
    (deps / "__pycache__").mkdir()
    (deps / "__pycache__" / "openai_mod.cpython-311.pyc").write_bytes(b"forged")
    upstream._vdeps.cache_clear()
    with pytest.raises(upstream.UpstreamUnavailable, match="added to the tree"):
        upstream.vllm_deps()


def test_an_install_that_is_not_exactly_the_pins_is_not_kept(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _pinned_tree()
    extra = {"evil-1.0.dist-info/RECORD": b"evil-1.0.dist-info/RECORD,,\n"}
    monkeypatch.setattr(upstream.subprocess, "run", _fake_install(tree, extra)[1])
    with pytest.raises(upstream.UpstreamUnavailable, match="not exactly the pinned"):
        upstream.vllm_deps()
    assert list(cache.iterdir()) == []  # the .partial folder removed, nothing renamed into place
