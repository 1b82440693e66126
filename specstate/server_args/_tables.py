"""The ``ServerArgs`` fields the model reads, one table per release, as that release spells them.

Owns: for sglang 0.5.12, 0.5.17 and 0.5.23, every flag whose value reaches a ``SpecConfig`` field (or
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

``RULES``: what differs between releases in how a launch becomes a config (``ReleaseRules``),
read by ``_derive.py`` as properties, never as tests of the release string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ModelledFlag", "ReleaseRules", "TABLES", "RULES", "release_of_family", "UNSUPPORTED", "table", "rules"]


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


def _ns(module: str, cls: str, name: str) -> str:
    """A 0.5.23 field's citation: ``arg_groups/fields/<module>.py::<Namespace>.<field>`` (0.5.23
    declares ``ServerArgs``' fields in namespace classes, merged by ``_INPUT_NAMESPACES``)."""
    return f"arg_groups/fields/{module}.py::{cls}.{name}"


_V0523_WHERE = {  # field -> (module, namespace class), as 0.5.23 declares them
    "speculative_algorithm": ("spec", "Spec"), "speculative_num_steps": ("spec", "Spec"),
    "speculative_eagle_topk": ("spec", "Spec"), "speculative_num_draft_tokens": ("spec", "Spec"),
    "speculative_adaptive": ("spec", "Spec"), "speculative_adaptive_config": ("spec", "Spec"),
    "max_running_requests": ("schedule", "Schedule"), "max_total_tokens": ("schedule", "Schedule"),
    "chunked_prefill_size": ("schedule", "Schedule"), "max_prefill_tokens": ("schedule", "Schedule"),
    "schedule_conservativeness": ("schedule", "Schedule"), "page_size": ("schedule", "Schedule"),
    "enable_mixed_chunk": ("schedule", "Schedule"), "disable_overlap_schedule": ("schedule", "Schedule"),
    "context_length": ("model", "Model"), "disable_radix_cache": ("memory", "Memory"),
}
#: sglang 0.5.23: 0.5.17's rows, each re-read in 0.5.23's namespace classes (same names, types,
#: defaults); the ``--cuda-graph-max-bs`` / ``--cuda-graph-bs`` aliases are gone (``add_cli_args``
#: no longer declares them: argparse then reads them as ambiguous abbreviations of the decode and
#: prefill flags)
_V0523 = tuple(ModelledFlag(m.names, m.field, m.type, m.default, _ns(*_V0523_WHERE[m.field], m.field), m.choices)
               for m in _COMMON) + (
    ModelledFlag(("--cuda-graph-max-bs-decode",), "cuda_graph_max_bs_decode", "int", None,
                 _ns("exec_", "ExecGraph", "cuda_graph_max_bs_decode")),
    ModelledFlag(("--cuda-graph-bs-decode",), "cuda_graph_bs_decode", "int+", None,
                 _ns("exec_", "ExecGraph", "cuda_graph_bs_decode")),
)

TABLES: dict[str, tuple[ModelledFlag, ...]] = {"0.5.12": _V0512, "0.5.17": _V0517, "0.5.23": _V0523}


def release_of_family(family: str) -> str | None:
    """The release whose launch flags a variant of ``family`` takes: the family's own
    (``Family.source_release``) where it has a table here, else its base's (a family derived from
    a release, as a test-only one); ``None``: none."""
    from specstate.model.families import get_family

    name: str | None = family
    while name is not None:
        fam = get_family(name)
        if fam.source_release in TABLES:
            return fam.source_release
        name = fam.base
    return None


@dataclass(frozen=True)
class ReleaseRules:
    """How one release turns a launch into a config, where releases differ (``_derive.py``)."""

    release: str  #: the sglang release (``family``: the engine family that models it)
    per_phase_graphs: bool  #: ``cuda_graph_max_bs_decode`` / ``cuda_graph_bs_decode`` (0.5.17 on)
    adaptive_v2: bool  #: the family models spec v2 with ``--speculative-adaptive`` (0.5.17 on)
    #: EAGLE keeps ``--enable-mixed-chunk`` on (0.5.23: ``SpeculativeAlgorithm.supports_mixed_chunk``)
    mixed_chunk_with_eagle: bool = False
    #: ``(field, value)`` that turn the decode CUDA graph off (0.5.17 on: ``--disable-decode-cuda-graph``,
    #: ``--cuda-graph-backend-decode disabled``): refused as ``UNSUPPORTED``'s ``disable_cuda_graph`` is
    decode_graph_off: tuple[tuple[str, object], ...] = ()
    #: no ``--speculative-adaptive-config``: where this release's ``DEFAULT_ADAPTIVE_CONFIG`` is
    #: modelled (``module:NAME``, imported when read: the family imports the model); ``None``:
    #: 0.5.17's, which ``specstate.model.sglang_0_5_17.adaptive.candidate_steps(None)`` reads itself
    default_adaptive_config: str | None = None

    @property
    def family(self) -> str:
        from specstate.model.releases import family_of_release

        return family_of_release(self.release)

    def default_adaptive_json(self) -> str | None:
        """The release's default adaptive config as JSON text (``None``: 0.5.17's)."""
        if self.default_adaptive_config is None:
            return None
        import importlib
        import json

        module, name = self.default_adaptive_config.split(":")
        return json.dumps(getattr(importlib.import_module(module), name))


_DECODE_OFF = (("disable_decode_cuda_graph", True), ("cuda_graph_backend_decode", "disabled"))
RULES: dict[str, ReleaseRules] = {
    "0.5.12": ReleaseRules("0.5.12", per_phase_graphs=False, adaptive_v2=False),
    "0.5.17": ReleaseRules("0.5.17", per_phase_graphs=True, adaptive_v2=True, decode_graph_off=_DECODE_OFF),
    "0.5.23": ReleaseRules("0.5.23", per_phase_graphs=True, adaptive_v2=True, mixed_chunk_with_eagle=True,
                           decode_graph_off=_DECODE_OFF,
                           default_adaptive_config="specstate.model.sglang_0_5_23.family:DEFAULT_ADAPTIVE_CONFIG_0_5_23"),
}


def rules(release: str) -> ReleaseRules:
    from specstate.errors import UsageError

    if release not in RULES:
        raise UsageError(f"Expected an sglang release from {sorted(RULES)} but got {release!r}")
    return RULES[release]


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
