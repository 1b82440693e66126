"""What sglang reads from the machine and the model at start, as specstate reads it from two
options: ``--gpu NAME`` and ``--model-config PATH``.

Owns: the GPUs a user can name (``GPUS``: the memory ``nvidia-smi --query-gpu=memory.total``
reports, in MiB, which sglang reads through ``utils/common.py::get_nvgpu_memory_capacity``,
and the compute capability its backend choice tests: ``is_hopper_with_cuda_12_3`` is sm 9.x,
``is_sm100_supported`` sm 10.x, ``is_blackwell_supported`` sm 10.x or 12.x), and the few
fields of a model's ``config.json`` the derivation reads (``ModelFacts``): the architecture
(``hf_config.architectures[0]``), the text sub-config sglang takes from a multimodal config
(``get_hf_text_config``: ``thinker_config``, ``llm_config``, ``language_config``, ``text_config``,
in that order), whether sglang runs it as MLA (``ModelConfig._derive_model_shapes``' list of
architectures), DeepSeek's sparse attention (``configs/model_config.py::is_deepseek_nsa``: an
``index_topk``), and the context length (``get_context_length``: the first of
``CONTEXT_LENGTH_KEYS``, times the rope scaling factor unless the scaling names its
``original_max_position_embeddings`` or is llama3's; 2048 when none is set).

A ``Deployment`` carries both (either may be ``None``: the verdict then names what it assumed).
No weights are read: a ``config.json`` of a few kilobytes is enough (tests/data/model-configs/).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from specstate.errors import UsageError

__all__ = ["Gpu", "GPUS", "gpu_named", "ModelFacts", "read_model_config", "Deployment", "MLA_ARCHITECTURES"]


@dataclass(frozen=True)
class Gpu:
    name: str  #: as the user names it (``H200``)
    memory_mib: int  #: ``nvidia-smi --query-gpu=memory.total`` in MiB (sglang's ``gpu_mem``)
    sm: tuple[int, int]  #: compute capability (``torch.cuda.get_device_capability()``)

    @property
    def hopper(self) -> bool:
        """``is_hopper_with_cuda_12_3``: sm 9.x (a CUDA of 12.3 or newer assumed, as sglang's wheels ship)."""
        return self.sm[0] == 9

    @property
    def sm100(self) -> bool:
        """``is_sm100_supported``: sm 10.x (CUDA 12.8 or newer assumed)."""
        return self.sm[0] == 10

    @property
    def blackwell(self) -> bool:
        """``is_blackwell_supported``: sm 10.x or 12.x."""
        return self.sm[0] in (10, 12)

    def describe(self) -> str:
        return f"{self.name} ({self.memory_mib} MiB, sm{self.sm[0]}{self.sm[1]})"


#: the GPUs ``--gpu`` takes: total memory as nvidia-smi reports it, and compute capability
GPUS: dict[str, Gpu] = {g.name.upper(): g for g in (
    Gpu("H200", 143771, (9, 0)), Gpu("H100", 81559, (9, 0)), Gpu("H20", 97871, (9, 0)),
    Gpu("A100", 81920, (8, 0)), Gpu("A100-40GB", 40960, (8, 0)), Gpu("B200", 183359, (10, 0)),
    Gpu("L40S", 46068, (8, 9)), Gpu("L4", 23034, (8, 9)), Gpu("A10", 23028, (8, 6)),
)}


def gpu_named(name: str) -> Gpu:
    """The ``Gpu`` of ``--gpu NAME`` (case-insensitive), or a ``UsageError`` naming the choices."""
    gpu = GPUS.get(name.strip().upper())
    if gpu is None:
        raise UsageError(f"--gpu: expected one of {', '.join(g.name for g in GPUS.values())} but got {name[:40]!r}")
    return gpu


#: architectures sglang runs with multi-head latent attention (``ModelConfig._derive_model_shapes``;
#: ``PixtralForConditionalGeneration`` and ``DeepseekVL2ForCausalLM`` only with their MLA fields)
MLA_ARCHITECTURES = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN",
    "DotsVLMForCausalLM", "MistralLarge3ForCausalLM", "MistralLarge3ForCausalLMEagle",
    "KimiK25ForConditionalGeneration", "Eagle3DeepseekV2ForCausalLM", "MiniCPM3ForCausalLM",
    "KimiVLForConditionalGeneration", "KimiLinearForCausalLM", "BailingMoeV2_5ForCausalLM", "SarvamMLAForCausalLM",
})
#: architectures whose sparse attention (an ``index_topk``) sglang detects (``is_deepseek_nsa``)
_DSA_ARCHITECTURES = frozenset({"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN",
                                "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM"})
#: ``CONTEXT_LENGTH_KEYS`` of ``utils/hf_transformers/common.py``, in its order of preference
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")
_TEXT_CONFIG_KEYS = ("thinker_config", "llm_config", "language_config", "text_config")


@dataclass(frozen=True)
class ModelFacts:
    path: str  #: the ``config.json`` read
    architecture: str  #: ``architectures[0]`` of the top-level config
    text: Mapping[str, Any] = field(repr=False)  #: the text sub-config (``get_hf_text_config``), or the config
    context_len: int = 2048  #: ``get_context_length(text config)``
    context_key: str = ""  #: which key gave it (``max_position_embeddings``; empty: the 2048 default)

    @property
    def mla(self) -> bool:
        arch = self.architecture
        if arch == "PixtralForConditionalGeneration":
            return self.text.get("kv_lora_rank") is not None
        if arch == "DeepseekVL2ForCausalLM":
            return bool(self.text.get("use_mla", True))
        return arch in MLA_ARCHITECTURES

    @property
    def dsa(self) -> bool:
        """``is_deepseek_nsa``: a DeepSeek-family architecture with an ``index_topk`` (V3.2, GLM 5)."""
        return self.architecture in _DSA_ARCHITECTURES and self.text.get("index_topk") is not None

    def describe(self) -> str:
        return f"{self.architecture} ({'MLA' if self.mla else 'MHA'}{', DSA' if self.dsa else ''})"


@dataclass(frozen=True)
class Deployment:
    """The user's model and GPU, where given (``--model-config``, ``--gpu``)."""

    model: ModelFacts | None = None
    gpu: Gpu | None = None


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``get_hf_text_config``: the first sub-config a multimodal model carries, else the config."""
    for key in _TEXT_CONFIG_KEYS:
        sub = config.get(key)
        if isinstance(sub, Mapping):
            inner = sub.get("text_config") if key == "thinker_config" else None
            return inner if isinstance(inner, Mapping) else sub
    return config


def context_length(text: Mapping[str, Any]) -> tuple[int, str]:
    """``get_context_length``: (tokens, the key read; empty for the 2048 default)."""
    scaling = text.get("rope_scaling") or {}
    factor = scaling.get("factor", 1) if isinstance(scaling, Mapping) else 1
    if isinstance(scaling, Mapping) and ("original_max_position_embeddings" in scaling
                                         or scaling.get("rope_type") == "llama3"):
        factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        if text.get(key) is not None:
            return int(factor * text[key]), key
    return 2048, ""


def _load(path: Path) -> Mapping[str, Any]:
    from specstate.schema import read_text

    target = path / "config.json" if path.is_dir() else path
    text = read_text(target, what="model config (--model-config: a config.json or a folder holding one)",
                     max_bytes=1 << 22, error=UsageError)
    try:
        data = json.loads(text)
    except ValueError as e:
        raise UsageError(f"--model-config {target}: expected JSON but got {str(e)[:120]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--model-config {target}: expected a JSON object but got {type(data).__name__}")
    return data


def read_model_config(path: Path | str) -> ModelFacts:
    """The facts sglang reads from a model's ``config.json`` (``path``: the file, or a model folder)."""
    path = Path(path)
    data = _load(path)
    archs = data.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise UsageError(f"--model-config {path}: expected \"architectures\": [\"...ForCausalLM\", ...] (sglang reads "
                         f"architectures[0]) but got {archs!r:.80}")
    text = _text_config(data)
    tokens, key = context_length(text)
    if tokens < 2:
        raise UsageError(f"--model-config {path}: {key} gives a context length of {tokens}: expected >= 2")
    return ModelFacts(str(path), archs[0], text, tokens, key)
