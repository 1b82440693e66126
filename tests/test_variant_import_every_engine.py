"""One guard for importing a user's variant module, every engine's (issue 38; the permission rule itself:
``tests/test_variant_import_guard.py``): the SGLang families'
``get_variant`` and vLLM's ``load_variant`` both go through ``variant_registry.import_object``
(the spec's form, the current directory as a last resort, the module's own failure a
``VariantLoadError``), and a variant a trace file names is imported only with permission on both."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from specstate.errors import UsageError, VariantLoadError
from specstate.model.variant_registry import get_variant
from specstate.model.vllm_0_34_0.variants import load_variant as load_vllm_variant

LOADERS: dict[str, Callable[[str], Any]] = {"sglang": get_variant, "vllm": load_vllm_variant}

SGLANG_MODULE = '''
from specstate.variant import Variant
MINE = Variant("mine", "a user's variant", overrides={}, family="sglang-0.5.12")
'''
VLLM_MODULE = '''
from specstate.model.vllm_0_34_0.variants import VllmVariant
MINE = VllmVariant("mine", "a user's variant", {})
'''


@pytest.fixture()
def in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory the user runs in, taken off ``sys.path`` again afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("guardmod_")]:
        del sys.modules[name]


@pytest.mark.parametrize("engine", sorted(LOADERS))
def test_a_module_in_the_working_directory_is_found(engine: str, in_cwd: Path) -> None:
    (in_cwd / f"guardmod_{engine}.py").write_text(SGLANG_MODULE if engine == "sglang" else VLLM_MODULE)
    assert LOADERS[engine](f"guardmod_{engine}:MINE").name == "mine"


@pytest.mark.parametrize("engine", sorted(LOADERS))
@pytest.mark.parametrize("spec", ["./guardmod.py:MINE", ".guardmod:MINE", "guardmod:MINE:x", "a/b:MINE"])
def test_a_path_or_a_relative_name_is_refused_before_any_import(engine: str, spec: str) -> None:
    with pytest.raises(VariantLoadError, match="absolute package.module:Object"):
        LOADERS[engine](spec)


@pytest.mark.parametrize("engine", sorted(LOADERS))
def test_a_module_that_exits_is_a_variant_load_error(engine: str, in_cwd: Path) -> None:
    (in_cwd / f"guardmod_exit_{engine}.py").write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(VariantLoadError, match="SystemExit"):
        LOADERS[engine](f"guardmod_exit_{engine}:MINE")


def test_a_vllm_trace_naming_a_module_is_not_imported_without_permission(in_cwd: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The vLLM trace replay asks the same permission as the SGLang one (``require_variant_import``)."""
    from specstate.integration.vllm_0_34_0.check import replay_trace, reproduce_vllm

    monkeypatch.delenv("SPECSTATE_ALLOW_VARIANT_IMPORT", raising=False)
    (in_cwd / "guardmod_marker.py").write_text("open('imported', 'w').close()\n" + VLLM_MODULE)
    from specstate.cli import main

    spec = ('{"method": "eagle3", "num_speculative_tokens": 3, '
            '"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 4096, 0]]}')
    assert main(["check", "--max-examples", "10", "--failures", str(in_cwd / "traces"), "--", "vllm", "serve", "M",
                 "--speculative-config", spec]) == 1
    trace = next((in_cwd / "traces").glob("*.json"))
    data = json.loads(trace.read_text())
    trace.write_text(json.dumps({**data, "variant": "guardmod_marker:MINE"}))
    for replay in (lambda: replay_trace(trace), lambda: reproduce_vllm(trace)):
        with pytest.raises(UsageError, match="guardmod_marker"):
            replay()
    assert not (in_cwd / "imported").exists()
