"""The ``ServerArgs`` fields the model reads, one table per release, as that release spells them.

Owns: for sglang 0.5.12 and 0.5.17, every flag whose value reaches a ``SpecConfig`` field (or
decides whether the launch is one the model covers): its flag and aliases, the ``ServerArgs``
field, the value type (the ``type=`` / ``action=`` that release's ``add_cli_args`` gives it),
the ``ServerArgs`` default, literal choices, and the ``file::symbol`` it is read from.
``tests/test_server_args_source.py`` parses each release's ``server_args.py`` (``ast``) and checks
names, defaults, types and choices against these rows.

Value types: ``int`` / ``float`` / ``str`` (argparse ``type=``), ``human_readable_int``
(``utils/common.py::human_readable_int``: ``16k``, ``1Mi``), ``bool`` (``action="store_true"``),
``int+`` (``type=int, nargs="+"``).

Flags a release declares that are not in its table change nothing the model holds: they are
accepted and listed once as "not modelled" (every one is in ``flags-<release>.json``, read from
the release's ``add_cli_args`` by ``_extract.py``), except the few in ``UNSUPPORTED``, which change
the batch state in ways the model does not cover and are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ModelledFlag", "TABLES", "RELEASE_OF_FAMILY", "UNSUPPORTED", "table"]


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


_SA = "server_args.py::ServerArgs"

#: rows both releases spell alike (cited from ``ServerArgs``'s fields and ``add_cli_args``)
_COMMON = (
    ModelledFlag(("--speculative-algorithm",), "speculative_algorithm", "str", None, f"{_SA}.speculative_algorithm"),
    ModelledFlag(("--speculative-num-steps",), "speculative_num_steps", "int", None, f"{_SA}.speculative_num_steps"),
    ModelledFlag(("--speculative-eagle-topk",), "speculative_eagle_topk", "int", None, f"{_SA}.speculative_eagle_topk"),
    ModelledFlag(("--speculative-num-draft-tokens",), "speculative_num_draft_tokens", "int", None,
                 f"{_SA}.speculative_num_draft_tokens"),
    ModelledFlag(("--max-running-requests",), "max_running_requests", "int", None, f"{_SA}.max_running_requests"),
    ModelledFlag(("--max-total-tokens",), "max_total_tokens", "human_readable_int", None, f"{_SA}.max_total_tokens"),
    ModelledFlag(("--chunked-prefill-size",), "chunked_prefill_size", "int", None, f"{_SA}.chunked_prefill_size"),
    ModelledFlag(("--max-prefill-tokens",), "max_prefill_tokens", "human_readable_int", 16384,
                 f"{_SA}.max_prefill_tokens"),
    ModelledFlag(("--schedule-conservativeness",), "schedule_conservativeness", "float", 1.0,
                 f"{_SA}.schedule_conservativeness"),
    ModelledFlag(("--page-size",), "page_size", "int", None, f"{_SA}.page_size"),
    ModelledFlag(("--context-length",), "context_length", "human_readable_int", None, f"{_SA}.context_length"),
    ModelledFlag(("--disable-radix-cache",), "disable_radix_cache", "bool", False, f"{_SA}.disable_radix_cache"),
    ModelledFlag(("--enable-mixed-chunk",), "enable_mixed_chunk", "bool", False, f"{_SA}.enable_mixed_chunk"),
    ModelledFlag(("--disable-overlap-schedule",), "disable_overlap_schedule", "bool", False,
                 f"{_SA}.disable_overlap_schedule"),
    ModelledFlag(("--speculative-adaptive",), "speculative_adaptive", "bool", False, f"{_SA}.speculative_adaptive"),
    ModelledFlag(("--speculative-adaptive-config",), "speculative_adaptive_config", "str", None,
                 f"{_SA}.speculative_adaptive_config"),
)

#: sglang 0.5.12: ``cuda_graph_max_bs`` / ``cuda_graph_bs`` (one graph runner setting for all phases)
_V0512 = _COMMON + (
    ModelledFlag(("--cuda-graph-max-bs",), "cuda_graph_max_bs", "int", None, f"{_SA}.cuda_graph_max_bs"),
    ModelledFlag(("--cuda-graph-bs",), "cuda_graph_bs", "int+", None, f"{_SA}.cuda_graph_bs"),
)
#: sglang 0.5.17: per-phase graph settings; ``--cuda-graph-max-bs`` / ``--cuda-graph-bs`` are
#: ``DeprecatedAliasStoreAction`` aliases of the decode ones (``add_cli_args``)
_V0517 = _COMMON + (
    ModelledFlag(("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"), "cuda_graph_max_bs_decode", "int", None,
                 f"{_SA}.cuda_graph_max_bs_decode"),
    ModelledFlag(("--cuda-graph-bs-decode", "--cuda-graph-bs"), "cuda_graph_bs_decode", "int+", None,
                 f"{_SA}.cuda_graph_bs_decode"),
)

TABLES: dict[str, tuple[ModelledFlag, ...]] = {"0.5.12": _V0512, "0.5.17": _V0517}
#: the release each engine family models (``specstate.model.families``)
RELEASE_OF_FAMILY = {"sglang-0.5.12": "0.5.12", "sglang-0.5.17": "0.5.17"}

#: declared by the release, change the batch the model holds, not modelled: refused (field -> why)
UNSUPPORTED = {
    "disable_cuda_graph": "the model replays every decode through its CUDA-graph runners",
    "disable_cuda_graph_padding": "the model pads every batch to its capture size",
    "enable_dp_attention": "DP attention splits the batch across ranks",
    "enable_two_batch_overlap": "two-batch overlap splits the batch",
}


def table(release: str) -> tuple[ModelledFlag, ...]:
    from specstate.errors import UsageError

    if release not in TABLES:
        raise UsageError(f"Expected an sglang release from {sorted(TABLES)} but got {release!r}")
    return TABLES[release]
