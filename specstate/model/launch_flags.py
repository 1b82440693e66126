"""The shape of a release's launch-flag table and rules (``server_args`` reads them): each release
folder's ``launch.py`` declares ``FLAGS`` (a tuple of :class:`ModelledFlag`), ``RULES`` (a
:class:`ReleaseRules`) and ``DEPLOYMENT`` (a :class:`DeploymentRules`: what it derives from the
model and the GPU), found by folder name (``Release`` (``model/releases.py``)); here the rows every
release spells alike (``COMMON``, as ``ServerArgs``' fields and ``add_cli_args`` declare them).

Kept in the model (it imports nothing above it) so that a release folder holds its flags beside
its operations; ``specstate/server_args/_tables.py`` re-exports these names.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from specstate.errors import InternalError

__all__ = ["ModelledFlag", "ReleaseRules", "DeploymentRules", "COMMON", "DECODE_OFF", "SA", "GPU_ROWS", "DEEPSEEK"]


@dataclass(frozen=True)
class ModelledFlag:
    names: tuple[str, ...]  #: the flag and its aliases, as ``add_cli_args`` declares them
    field: str  #: the ``ServerArgs`` attribute (argparse ``dest``)
    type: str  #: ``int``, ``float``, ``str``, ``human_readable_int``, ``bool`` or ``int+``
    default: Any  #: ``ServerArgs``' own default (``None``: sglang derives it, see ``_derive.py``)
    cite: str  #: ``file::symbol`` the row is read from
    choices: tuple[str, ...] | None = None  #: argparse ``choices``, if any

    @property
    def flag(self) -> str:
        return self.names[0]


SA = "server_args.py::ServerArgs"

#: rows the releases spell alike (cited from ``ServerArgs``'s fields and ``add_cli_args``)
COMMON = (
    ModelledFlag(("--speculative-algorithm",), "speculative_algorithm", "str", None, f"{SA}.speculative_algorithm"),
    ModelledFlag(("--speculative-num-steps",), "speculative_num_steps", "int", None, f"{SA}.speculative_num_steps"),
    ModelledFlag(("--speculative-eagle-topk",), "speculative_eagle_topk", "int", None, f"{SA}.speculative_eagle_topk"),
    ModelledFlag(("--speculative-num-draft-tokens",), "speculative_num_draft_tokens", "int", None,
                 f"{SA}.speculative_num_draft_tokens"),
    ModelledFlag(("--max-running-requests",), "max_running_requests", "int", None, f"{SA}.max_running_requests"),
    ModelledFlag(("--max-total-tokens",), "max_total_tokens", "human_readable_int", None, f"{SA}.max_total_tokens"),
    ModelledFlag(("--chunked-prefill-size",), "chunked_prefill_size", "int", None, f"{SA}.chunked_prefill_size"),
    ModelledFlag(("--max-prefill-tokens",), "max_prefill_tokens", "human_readable_int", 16384,
                 f"{SA}.max_prefill_tokens"),
    ModelledFlag(("--schedule-conservativeness",), "schedule_conservativeness", "float", 1.0,
                 f"{SA}.schedule_conservativeness"),
    ModelledFlag(("--page-size",), "page_size", "int", None, f"{SA}.page_size"),
    ModelledFlag(("--context-length",), "context_length", "human_readable_int", None, f"{SA}.context_length"),
    ModelledFlag(("--disable-radix-cache",), "disable_radix_cache", "bool", False, f"{SA}.disable_radix_cache"),
    ModelledFlag(("--enable-mixed-chunk",), "enable_mixed_chunk", "bool", False, f"{SA}.enable_mixed_chunk"),
    ModelledFlag(("--disable-overlap-schedule",), "disable_overlap_schedule", "bool", False,
                 f"{SA}.disable_overlap_schedule"),
    ModelledFlag(("--speculative-adaptive",), "speculative_adaptive", "bool", False, f"{SA}.speculative_adaptive"),
    ModelledFlag(("--speculative-adaptive-config",), "speculative_adaptive_config", "str", None,
                 f"{SA}.speculative_adaptive_config"),
)

#: ``(field, value)`` that turn the decode CUDA graph off where a release has per-phase graphs
#: (``--disable-decode-cuda-graph``, ``--cuda-graph-backend-decode disabled``)
DECODE_OFF: tuple[tuple[str, object], ...] = (("disable_decode_cuda_graph", True),
                                               ("cuda_graph_backend_decode", "disabled"))


@dataclass(frozen=True)
class ReleaseRules:
    """How one release turns a launch into a config, where releases differ (``server_args/_derive.py``)."""

    release: str  #: the sglang release (``family``: the engine family that models it)
    per_phase_graphs: bool  #: ``cuda_graph_max_bs_decode`` / ``cuda_graph_bs_decode`` (0.5.17 on)
    adaptive_v2: bool  #: the family models spec v2 with ``--speculative-adaptive`` (0.5.17 on)
    #: EAGLE keeps ``--enable-mixed-chunk`` on (0.5.23: ``SpeculativeAlgorithm.supports_mixed_chunk``)
    mixed_chunk_with_eagle: bool = False
    #: ``(field, value)`` that turn the decode CUDA graph off (0.5.17 on: ``DECODE_OFF``): refused as
    #: ``UNSUPPORTED``'s ``disable_cuda_graph`` is
    decode_graph_off: tuple[tuple[str, object], ...] = ()
    #: no ``--speculative-adaptive-config``: where this release's ``DEFAULT_ADAPTIVE_CONFIG`` is
    #: modelled (``module:NAME``, imported when read: the family imports the model); ``None``:
    #: 0.5.17's, which the 0.5.17 family's ``adaptive.candidate_steps(None)`` reads itself
    default_adaptive_config: str | None = None
    #: why its ``adaptive_unsupported_reason`` turns adaptive speculation off under DP attention (the
    #: warning ``_maybe_disable_adaptive`` logs: ``multirank/_start.py``); ``None``: no adaptive speculation
    dp_adaptive_unsupported: str | None = None
    #: the module that reads an adaptive config as this release does (``config_from_json``,
    #: ``candidate_steps``, ``ignored_keys``), a dotted path imported when read
    #: (``adaptive_reader_module``), so that ``server_args`` names no release; ``None``: the release
    #: has no adaptive speculation
    adaptive_reader: str | None = None
    #: with ``adaptive_v2``: what the release does with ``SGLANG_ENABLE_SPEC_V2`` on the launch line
    #: instead of applying it (``server_args/_coverage.py``'s environment entry says it)
    spec_v2_env: str = "it does not read it"

    @property
    def family(self) -> str:
        from specstate.model.releases import family_of_release

        return family_of_release(self.release)

    def adaptive_reader_module(self) -> ModuleType:
        """The module ``adaptive_reader`` names (the launch asks it only of a release with ``adaptive_v2``)."""
        if self.adaptive_reader is None:
            raise InternalError(f"Expected sglang {self.release}'s RULES to name its adaptive_reader")
        return importlib.import_module(self.adaptive_reader)

    def default_adaptive_json(self) -> str | None:
        """The release's default adaptive config as JSON text (``None``: 0.5.17's)."""
        if self.default_adaptive_config is None:
            return None
        module, name = self.default_adaptive_config.split(":")
        return json.dumps(getattr(importlib.import_module(module), name))


#: (below MiB, chunked_prefill_size, (cuda_graph_max_bs with tp < 4, with tp >= 4)): the GPU-memory rows
#: as the releases before 0.5.23 have them (``DeploymentRules.gpu_rows``)
GPU_ROWS: tuple[tuple[int | None, int, tuple[int, int]], ...] = (
    (20 * 1024, 2048, (8, 8)), (35 * 1024, 2048, (24, 80)), (60 * 1024, 4096, (32, 160)),
    (90 * 1024, 8192, (256, 512)), (160 * 1024, 8192, (256, 512)), (None, 16384, (512, 512)))
#: the architectures every release sends through its DeepSeek branch (``DeploymentRules.deepseek_family``)
DEEPSEEK: tuple[str, ...] = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
                             "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM")


@dataclass(frozen=True)
class DeploymentRules:
    """What one release derives from the model and the GPU, where releases differ
    (``server_args/_settings.py``, the module doc there says each rule's source)."""

    #: (below MiB, chunked_prefill_size, (cuda_graph_max_bs with tp < 4, with tp >= 4)), the last unbounded
    gpu_rows: tuple[tuple[int | None, int, tuple[int, int]], ...]
    gpu_cite: str  #: where the rows are read (said in the derived setting's source)
    deepseek_family: frozenset[str]  #: the architectures of its DeepSeek branch (sm100: ``trtllm_mla``; DSA: page 64)
    ds_cite: str  #: where that branch is read
    dsa_backend: str  #: the backend a DSA model gets
    page_tree: tuple[str, ...]  #: backends that draft a topk > 1 tree over pages
    fixed_pages: tuple[tuple[str, int], ...]  #: backend -> the one page size it supports
    snapped_pages: tuple[tuple[str, tuple[int, ...]], ...]  #: backend -> its page sizes (else 64)
    dsa_index_kpool: bool = False  #: a DSA model's page size is 64 x ``index_kpool`` (``get_dsa_index_kpool``)
