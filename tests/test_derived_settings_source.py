"""The derivation tables of ``specstate/server_args/_settings.py`` and ``_hardware.py`` against each
release's own source (``ast`` and text, no import of sglang): the GPU-memory rows of
``_handle_gpu_memory_settings``, the DeepSeek family that gets ``trtllm_mla`` on sm100, the MLA
default backends of ``_get_default_attn_backend``, the page sizes backends force, the backends that
draft a topk > 1 tree over pages, the architectures sglang runs as MLA, the context-length keys,
and that the "generic" architectures have no model-specific adjustments by name."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from specstate.server_args._hardware import CONTEXT_LENGTH_KEYS, MLA_ARCHITECTURES
from specstate.server_args._settings import _AUTO_SPEC, _PAGE_TREE, DEEPSEEK_FAMILY, GENERIC_ARCHITECTURES, GPU_DEFAULTS
from tests.sglang_source import sglang_source

pytestmark = pytest.mark.sglang_source

RELEASES = ("0.5.12", "0.5.17", "0.5.23")


def _srt(release: str) -> Path:
    try:
        return sglang_source(release)
    except OSError as e:
        pytest.skip(f"sglang {release} source not available offline: {e}")


@functools.cache
def _functions(path: Path) -> dict[str, str]:
    """Every function (and method) of a file: name -> its source text (its lines)."""
    lines = path.read_text().splitlines()
    return {n.name: "\n".join(lines[n.lineno - 1:n.end_lineno]) for n in ast.walk(ast.parse("\n".join(lines)))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _func(release: str, rel: str, name: str) -> str:
    return _functions(_srt(release) / rel)[name]


def _gpu_function(release: str) -> str:
    if release == "0.5.23":
        return _func(release, "arg_groups/memory_hook.py", "handle_gpu_memory_settings")
    return _func(release, "server_args.py", "_handle_gpu_memory_settings")


@pytest.mark.parametrize("release", RELEASES)
def test_the_gpu_memory_rows_are_the_releases(release: str) -> None:
    body = _gpu_function(release).split("# Fallback defaults")[0]
    bounds = [int(b) * 1024 for b in re.findall(r"gpu_mem < (\d+) \* 1024", body)]
    assert bounds == [b for b, _, _ in GPU_DEFAULTS[release] if b is not None]
    rows = re.split(r"\n\s*(?:elif gpu_mem < \d+ \* 1024:|else:\n\s*# B200[^\n]*)\n", body.split("gpu_mem < 20 * 1024:", 1)[1])
    got = []
    for row in rows[:len(GPU_DEFAULTS[release])]:
        chunk = int(re.findall(r"chunked_prefill_size\s*=\s*(\d+)", row)[0])
        graphs = [int(x) for x in re.findall(r"max_bs = (\d+)", row)]
        got.append((chunk, (graphs[0], graphs[-1])))
    assert got == [(c, g) for _, c, g in GPU_DEFAULTS[release]]


def _deepseek_source(release: str) -> str:
    if release == "0.5.12":
        return _func(release, "server_args.py", "_handle_model_specific_adjustments")
    rel = "arg_groups/overrides.py" if release == "0.5.17" else "arg_groups/model_overrides/deepseek_v2.py"
    text = (_srt(release) / rel).read_text()
    head = text.split("def _deepseek_family_overrides")[0].rsplit("@_register_for(", 1)[1]
    return head + _func(release, rel, "_deepseek_family_overrides")


@pytest.mark.parametrize("release", RELEASES)
def test_the_deepseek_family_gets_trtllm_mla_on_sm100(release: str) -> None:
    text = _deepseek_source(release)
    names = set(re.findall(r'"(\w+For\w+)"', text.split(")\ndef ")[0] if release != "0.5.12" else
                           text.split("# Set attention backend for DeepSeek")[0].rsplit("if model_arch in [", 1)[1]))
    assert names == DEEPSEEK_FAMILY[release]
    assert re.search(r'attention_backend"?\]? = "trtllm_mla"', text) and ("is_sm100" in text)
    dsa_page = {"0.5.12": "self.page_size = 64", "0.5.17": 'overrides["page_size"] = 64',
                "0.5.23": "page_size = 64 * index_kpool"}[release]
    dsa_text = text if release != "0.5.17" else (_srt(release) / "arg_groups/overrides.py").read_text()
    assert dsa_page in dsa_text


@pytest.mark.parametrize("release", RELEASES)
def test_mla_models_default_to_fa3_on_hopper_flashinfer_on_sm100_else_triton(release: str) -> None:
    rel = "arg_groups/model_override_base.py" if release == "0.5.23" else "server_args.py"
    name = "get_default_attn_backend" if release == "0.5.23" else "_get_default_attn_backend"
    mla = _func(release, rel, name).split("# MLA architecture")[1]
    returns = re.findall(r'return "(\w+)"', mla)
    assert returns[:2] == ["fa3", "flashinfer"] and returns[-1] == "triton"
    assert mla.index("hopper_with_cuda_12_3") < mla.index("sm100")


@pytest.mark.parametrize("release", RELEASES)
def test_the_page_sizes_backends_force(release: str) -> None:
    if release == "0.5.12":
        text = _func(release, "server_args.py", "_handle_attention_backend_compatibility")
        assert re.search(r'== "flashmla"\s*\):\s*logger\.warning\([^)]*\)\s*self\.page_size = 64', text)
        assert re.search(r'== "cutlass_mla"\s*\):\s*logger\.warning\([^)]*\)\s*self\.page_size = 128', text)
        assert "if self.page_size not in [16, 32, 64]:" in text and "if self.page_size not in [32, 64]:" in text
    else:
        text = _func(release, "arg_groups/overrides.py", "_mla_backend_page_constraints")
        assert re.search(r'== "flashmla"\s*\):\s*logger\.warning\([^)]*\)\s*page_size = 64', text)
        assert ("page_size = 128" in text) == (release == "0.5.17")  # cutlass_mla: gone in 0.5.23
        assert "if page_size not in [16, 32, 64, 128]:" in text and "if page_size not in [32, 64]:" in text


@pytest.mark.parametrize("release", RELEASES)
def test_topk_above_1_at_pages_above_1_runs_on_these_backends_only(release: str) -> None:
    if release == "0.5.12":
        text = _func(release, "server_args.py", "_handle_speculative_decoding")
        assert 'and self.attention_backend not in ["flashinfer", "fa3"]' in text
    else:
        text = (_srt(release) / "arg_groups/speculative_hook.py").read_text()
        assert f"_PAGE_TREE_SPEC_BACKENDS = {_PAGE_TREE[release]!r}".replace("'", '"') in text
    assert _PAGE_TREE[release][:2] == ("flashinfer", "fa3")


@pytest.mark.parametrize("release", RELEASES)
def test_sglang_runs_these_architectures_as_mla(release: str) -> None:
    shapes = _func(release, "configs/model_config.py", "_derive_model_shapes")
    named = set(re.findall(r'"(\w+)" in self\.hf_config\.architectures', shapes))
    assert MLA_ARCHITECTURES <= named | {"PixtralForConditionalGeneration"}
    assert "KimiK25ForConditionalGeneration" in named


@pytest.mark.parametrize("release", RELEASES)
def test_the_context_length_keys(release: str) -> None:
    text = (_srt(release) / "utils/hf_transformers/common.py").read_text()
    keys = re.search(r"CONTEXT_LENGTH_KEYS = \[(.*?)\]", text, re.S)
    assert keys is not None and tuple(re.findall(r'"(\w+)"', keys.group(1))) == CONTEXT_LENGTH_KEYS
    assert '"original_max_position_embeddings" in rope_scaling' in text


def _model_specific(release: str) -> str:
    srt = _srt(release)
    parts = [_functions(srt / "server_args.py").get("_handle_model_specific_adjustments", "")]
    if release != "0.5.12":
        parts.append((srt / "arg_groups/overrides.py").read_text())
    if release == "0.5.23":
        parts += [p.read_text() for p in sorted((srt / "arg_groups/model_overrides").glob("*.py"))]
        parts.append((srt / "arg_groups/model_hook.py").read_text())
    return "\n".join(parts)


@pytest.mark.parametrize("release", RELEASES)
def test_the_generic_architectures_have_no_adjustments_by_name(release: str) -> None:
    text = _model_specific(release)
    assert "KimiK25ForConditionalGeneration" in text  # the text searched is the model-specific code
    assert [a for a in sorted(GENERIC_ARCHITECTURES) if f'"{a}"' in text] == []


@pytest.mark.parametrize("release", RELEASES)
def test_the_auto_chosen_draft_shapes(release: str) -> None:
    srt = _srt(release)
    if release == "0.5.12":
        text = _func(release, "server_args.py", "auto_choose_speculative_params")
    else:
        text = _func(release, "arg_groups/speculative_hook.py", "_auto_choose_speculative_params")
    for branch in text.split("elif")[1:]:
        names = re.findall(r'"(\w+For\w+)"', branch)
        shape = tuple(int(x) for x in re.findall(r"return \((\d+), (\d+), (\d+)\)", branch)[0])
        assert all(_AUTO_SPEC.get(n, (3, 1, 4)) == shape for n in names), (names, shape)
    assert re.search(r'\["LlamaForCausalLM"\]:\s*(#[^\n]*\n\s*)?return \(5, 4, 8\)', text) and srt.exists()
