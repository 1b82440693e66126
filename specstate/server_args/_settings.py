"""The settings sglang derives itself from the model and the GPU, per release: the attention
backend, the page size it forces, the context length, the chunk and CUDA-graph defaults, and
the draft shape EAGLE picks when the launch leaves it out.

Owns ``derive_settings(values, release, deployment) -> Settings``: each derived value a
``Setting`` with its source (the flag that set it, or the rule and what it read). The rules, each
mirrored from the release's own code (``tests/test_derived_settings_source.py`` checks the
tables against 0.5.12's, 0.5.17's and 0.5.23's source):

- chunk and graph defaults from GPU memory: ``server_args.py::ServerArgs._handle_gpu_memory_settings``
  (0.5.23: ``handle_gpu_memory_settings`` of ``arg_groups/memory_hook.py``, where the 20-35 GB row grew to 4096 tokens and 48 / 160
  graphs); without ``--gpu`` an H200's row, named as assumed;
- the backend: for the DeepSeek V3 family (Kimi K2.5 among them) on sm100, ``trtllm_mla``
  (``server_args.py::ServerArgs._handle_model_specific_adjustments``; 0.5.17: ``arg_groups/overrides.py``,
  ``_deepseek_family_overrides``; 0.5.23: ``arg_groups/model_overrides/deepseek_v2.py``), DSA models
  ``nsa`` (0.5.17 on: ``dsa``) at page size 64 (0.5.23: 64 x ``index_kpool``); otherwise ``server_args.py::ServerArgs._get_default_attn_backend``
  (0.5.23: ``model_override_base.py``, ``get_default_attn_backend``): MLA on Hopper ``fa3``, on
  sm100 ``flashinfer``, else ``triton``; MHA on Hopper ``fa3`` while speculation is off or topk 1
  at page size 1, on sm100 ``trtllm_mha`` likewise, else ``flashinfer``. Architectures with their
  own adjustments that specstate does not read get no derived backend (said so);
- the page size: the backend's constraint (``server_args.py::ServerArgs._handle_attention_backend_compatibility``;
  0.5.17 on: ``_mla_backend_page_constraints``): ``flashmla`` 64, ``cutlass_mla`` 128, ``trtllm_mla``
  32 or 64 (else 64), ``trtllm_mha`` 16 / 32 / 64 (0.5.17 on: or 128; else 64), then
  ``server_args.py::ServerArgs._handle_page_size``: 1;
- the context length: ``configs/model_config.py::ModelConfig._derive_context_length`` (a larger
  ``--context-length`` is refused unless ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN``);
- the draft shape when ``--speculative-num-steps`` is absent: ``server_args.py::auto_choose_speculative_params``
  (0.5.17 on: ``_auto_choose_speculative_params`` of ``arg_groups/speculative_hook.py``): (5, 4, 8)
  for Llama and Grok 1, (3, 1, 4) otherwise;
- refusals sglang raises: ``trtllm_mla`` off Blackwell, and topk > 1 at a page size > 1 on a backend
  that cannot draft a tree over pages (``server_args.py::ServerArgs._handle_speculative_decoding``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from specstate.errors import UsageError
from specstate.server_args._hardware import Deployment, Gpu, ModelFacts
from specstate.server_args._tables import DEPLOYMENTS, deployment

__all__ = ["Setting", "Settings", "derive_settings", "GPU_DEFAULTS", "DEEPSEEK_FAMILY", "GENERIC_ARCHITECTURES",
           "H200"]

#: each release's rules (its folder's ``launch.DEPLOYMENT``, ``DeploymentRules`` of ``model/launch_flags.py``),
#: as tables by release (``tests/test_derived_settings_source.py`` checks them against each release's source)
GPU_DEFAULTS: dict[str, tuple[tuple[int | None, int, tuple[int, int]], ...]] = {
    r: d.gpu_rows for r, d in DEPLOYMENTS.items()}
#: the architectures each release sends through its DeepSeek branch (sm100: ``trtllm_mla``; DSA: page 64)
DEEPSEEK_FAMILY: dict[str, frozenset[str]] = {r: d.deepseek_family for r, d in DEPLOYMENTS.items()}
#: architectures no release adjusts by name (checked against each release's model-specific code):
#: the generic default backend is theirs
GENERIC_ARCHITECTURES = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"})
#: draft shape ``auto_choose_speculative_params`` picks (every other architecture: (3, 1, 4))
_AUTO_SPEC = {"LlamaForCausalLM": (5, 4, 8), "Grok1ForCausalLM": (5, 4, 8), "Grok1VForCausalLM": (5, 4, 8)}
#: backends that draft a topk > 1 tree over pages (else sglang refuses topk > 1 at page size > 1)
_PAGE_TREE: dict[str, tuple[str, ...]] = {r: d.page_tree for r, d in DEPLOYMENTS.items()}
#: the GPU assumed without ``--gpu``
H200 = "H200"


@dataclass(frozen=True)
class Setting:
    name: str  #: the ``ServerArgs`` field
    value: Any
    source: str  #: the flag that set it, or the rule that derived it and from what
    derived: bool = True  #: from the model or the GPU (``False``: the launch's own flag)

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.name, "value": self.value, "source": self.source}


@dataclass(frozen=True)
class Settings:
    """What sglang derives for one launch on one deployment (``None``: not derived, assumed)."""

    deployment: Deployment = field(default_factory=Deployment)
    chunked_prefill_size: Setting | None = None
    cuda_graph_max_bs: Setting | None = None
    attention_backend: Setting | None = None
    page_size: Setting | None = None
    context_length: Setting | None = None
    draft_shape: Setting | None = None  #: (steps, topk, draft tokens) auto-chosen
    #: why the backend and page size are not derived (no model or GPU given; an architecture not read)
    backend_unknown: str = ""

    def derived(self) -> list[Setting]:
        """The settings derived from the model or the GPU (not the launch's own flags)."""
        fields = (self.attention_backend, self.page_size, self.context_length, self.chunked_prefill_size,
                  self.cuda_graph_max_bs, self.draft_shape)
        return [s for s in fields if s is not None and s.derived]


def _gpu_row(release: str, gpu: Gpu | None) -> tuple[int, tuple[int, int], str]:
    from specstate.server_args._hardware import GPUS

    g = gpu or GPUS[H200]
    low = 0
    for below, chunk, graphs in GPU_DEFAULTS[release]:
        if below is None or g.memory_mib < below:
            bound = f"{low // 1024} GB and up" if below is None else f"{low // 1024}-{below // 1024} GB"
            return chunk, graphs, f"{deployment(release).gpu_cite}: its {bound} row, for {g.describe()}"
        low = below
    raise AssertionError("the last row has no bound")


def _gpu_settings(values: Mapping[str, Any], release: str, gpu: Gpu | None, tp: int) -> dict[str, Setting]:
    chunk, graphs, why = _gpu_row(release, gpu)
    top = graphs[0] if tp < 4 else graphs[1]
    assumed = "" if gpu is not None else " (no --gpu: an H200 assumed)"
    out = {}
    if values.get("chunked_prefill_size") is None:
        out["chunked_prefill_size"] = Setting("chunked_prefill_size", chunk, why + assumed, gpu is not None)
    graph_flags = ("cuda_graph_max_bs", "cuda_graph_bs", "cuda_graph_max_bs_decode", "cuda_graph_bs_decode")
    if all(values.get(k) is None for k in graph_flags):
        out["cuda_graph_max_bs"] = Setting("cuda_graph_max_bs", top, f"{why}, --tp-size {tp}{assumed}", gpu is not None)
    return out


def _topk_one(values: Mapping[str, Any]) -> bool:
    """``is_no_spec_infer_or_topk_one`` on the launch's own values (the backend is chosen before
    ``_handle_speculative_decoding`` fills the draft shape in)."""
    topk, page = values.get("speculative_eagle_topk"), values.get("page_size")
    return topk is None or (topk == 1 and page in (None, 1))


def _default_backend(values: Mapping[str, Any], model: ModelFacts, gpu: Gpu, release: str) -> tuple[str, str]:
    """``_get_default_attn_backend``: (backend, why)."""
    rule = "server_args.py::ServerArgs._get_default_attn_backend"
    if model.mla:
        backend = "fa3" if gpu.hopper else "flashinfer" if gpu.sm100 else "triton"
        return backend, f"{rule}: an MLA model on sm{gpu.sm[0]}{gpu.sm[1]}"
    spec_ok = _topk_one(values) and (values.get("speculative_algorithm") is None
                                     or values.get("speculative_eagle_topk") is not None)
    if gpu.hopper and _topk_one(values):
        return "fa3", f"{rule}: an MHA model on Hopper, speculation off or topk 1 at page size 1"
    if gpu.sm100 and spec_ok:
        return "trtllm_mha", f"{rule}: an MHA model on sm100, topk 1 given"
    return "flashinfer", f"{rule}: an MHA model, no Hopper / sm100 rule applies (topk > 1 or not given, or the GPU)"


def _backend(values: Mapping[str, Any], release: str, d: Deployment) -> tuple[Setting | None, str]:
    """(the backend, or ``None`` with why it is not derived)."""
    given, prefill, decode = (values.get(k) for k in ("attention_backend", "prefill_attention_backend",
                                                       "decode_attention_backend"))
    if given is None and prefill is not None and prefill == decode:
        given = prefill  # ``_handle_attention_backend_compatibility``: both alike set the backend
    if given is not None:
        return Setting("attention_backend", given, "--attention-backend", False), ""
    model, gpu = d.model, d.gpu
    if model is None or gpu is None:
        return None, "no --model-config and --gpu: sglang picks it from the architecture and GPU"
    arch = model.architecture
    if arch in DEEPSEEK_FAMILY[release]:
        if model.dsa:
            return Setting("attention_backend", deployment(release).dsa_backend, f"{deployment(release).ds_cite}: {arch} with DSA "
                           "(index_topk)"), ""
        if gpu.sm100 and prefill is None and decode is None:
            return Setting("attention_backend", "trtllm_mla", f"{deployment(release).ds_cite}: {arch} on sm100 "
                           f"({gpu.name})"), ""
    elif arch not in GENERIC_ARCHITECTURES:
        return None, (f"architecture {arch}: sglang may set its own backend for it (_handle_model_specific_"
                      f"adjustments), which specstate reads only for the DeepSeek V3 family and "
                      f"{', '.join(sorted(GENERIC_ARCHITECTURES))}")
    backend, why = _default_backend(values, model, gpu, release)
    return Setting("attention_backend", backend, f"{why} ({gpu.name}, {model.describe()})"), ""


def _constrained(page: int | None, backend: str | None, release: str) -> tuple[int | None, str]:
    """The page size a backend forces (``_handle_attention_backend_compatibility``; 0.5.17 on
    ``_mla_backend_page_constraints``): (page, why; empty: unchanged)."""
    rules_ = deployment(release)
    fixed, snapping = dict(rules_.fixed_pages), dict(rules_.snapped_pages)
    if backend in fixed:
        return fixed[backend], f"{backend} supports page size {fixed[backend]} only"
    if backend in snapping and page not in snapping[backend]:
        return 64, f"{backend} supports page sizes {list(snapping[backend])}: 64"
    return page, ""


def _page_size(values: Mapping[str, Any], release: str, d: Deployment,
               backend: Setting | None) -> Setting:
    """The page size and its source; ``derived`` is false where a flag decided it (``--page-size``,
    or a backend given as a flag: ``_coverage.AFFECTING`` judges those)."""
    page = values.get("page_size")
    why, from_flag = ("--page-size", True) if page is not None else ("", False)
    if d.model is not None and d.model.dsa and d.model.architecture in DEEPSEEK_FAMILY[release]:
        kpool = int(d.model.text.get("index_kpool", 1) or 1) if deployment(release).dsa_index_kpool else 1
        page, why, from_flag = 64 * kpool, f"{deployment(release).ds_cite}: DeepSeek DSA sets page size 64 x index_kpool {kpool}", \
            False
    for b in dict.fromkeys((backend.value if backend else None, values.get("decode_attention_backend"))):
        page, forced = _constrained(page, b, release)
        if forced:
            flagged = backend is None or b != backend.value or not backend.derived
            origin = backend.source if backend is not None and b == backend.value else "--decode-attention-backend"
            why = (f"server_args.py::ServerArgs._handle_attention_backend_compatibility: {forced} (backend {b}: "
                   f"{origin})")
            from_flag = flagged
    if page is None:
        page, why = 1, "server_args.py::ServerArgs._handle_page_size: 1 (no backend constraint)"
    return Setting("page_size", page, why, not from_flag)


def _context(values: Mapping[str, Any], env: Mapping[str, str], model: ModelFacts | None) -> Setting | None:
    if model is None:
        return None
    given = values.get("context_length")
    src = (f"configs/model_config.py::ModelConfig._derive_context_length: {model.context_key or 'none set: 2048'}"
           f" of {model.path}")
    if given is None:
        return Setting("context_length", model.context_len, src)
    if given > model.context_len and env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() not in (
            "1", "true", "yes", "y"):
        raise UsageError(f"--context-length {given}: expected at most the model's {model.context_len} ({src}); "
                         "sglang raises ValueError unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    return Setting("context_length", given, "--context-length", False)


def _draft_shape(values: Mapping[str, Any], model: ModelFacts | None) -> Setting | None:
    """``auto_choose_speculative_params``, which sglang calls when ``--speculative-num-steps`` is
    absent (0.5.17 on: and ``--speculative-adaptive`` is off; its own defaults apply then)."""
    given = any(values.get(k) is not None for k in ("speculative_num_steps", "speculative_eagle_topk",
                                                   "speculative_num_draft_tokens"))
    if model is None or values.get("speculative_adaptive") or given:  # one given without steps: sglang asserts
        return None
    shape = _AUTO_SPEC.get(model.architecture, (3, 1, 4))
    return Setting("speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens", shape,
                   f"server_args.py::auto_choose_speculative_params: {model.architecture}")


def _refusals(values: Mapping[str, Any], release: str, d: Deployment, s: Settings) -> None:
    backend = s.attention_backend.value if s.attention_backend else None
    if d.gpu is not None and not d.gpu.blackwell and "trtllm_mla" in (backend, values.get("decode_attention_backend")):
        raise UsageError(f"--gpu {d.gpu.name}: sglang {release} raises ValueError: the trtllm_mla backend runs on "
                         "Blackwell only (ServerArgs._handle_attention_backend_compatibility)")
    topk = values.get("speculative_eagle_topk")
    if topk is None and s.draft_shape is not None:
        topk = s.draft_shape.value[1]
    page, chosen = s.page_size, s.attention_backend
    if chosen is None or page is None or topk is None or topk <= 1 or page.value <= 1 \
            or chosen.value in _PAGE_TREE[release]:
        return
    raise UsageError(f"--speculative-eagle-topk {topk}: sglang {release} raises ValueError: topk > 1 with page "
                     f"size {page.value} runs only on {', '.join(_PAGE_TREE[release])}, not {chosen.value} "
                     f"(ServerArgs._handle_speculative_decoding); page size {page.value}: {page.source}; "
                     f"backend {chosen.value}: {chosen.source}")


def derive_settings(values: Mapping[str, Any], release: str, deployment: Deployment | None = None, *,
                    env: Mapping[str, str] | None = None) -> Settings:
    """What sglang ``release`` derives for a launch's ``values`` (``ParsedFlags.values``) on a
    deployment, or the ``UsageError`` it raises."""
    d = deployment or Deployment()
    tp = values.get("tp_size") or values.get("tensor_parallel_size") or 1
    backend, unknown = _backend(values, release, d)
    page = _page_size(values, release, d, backend) if backend is not None or values.get("page_size") is not None \
        or values.get("decode_attention_backend") else None
    s = Settings(d, **_gpu_settings(values, release, d.gpu, tp), attention_backend=backend, page_size=page,
                 context_length=_context(values, env or {}, d.model), draft_shape=_draft_shape(values, d.model),
                 backend_unknown=unknown)
    _refusals(values, release, d, s)
    return s
