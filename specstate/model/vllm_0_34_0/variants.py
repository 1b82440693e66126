"""The vLLM family's variants: sets of operation overrides over :data:`engine.UPSTREAM_OPS`.

| variant | what | status |
| --- | --- | --- |
| ``dsd-as-shipped`` | upstream 0.34.0: K = ``lookup[len(num_scheduled_tokens)]`` | fails ``vllm_dsd_k_keyed_on_decode_rows`` (vllm#49548) |
| ``dsd-corrected`` | K keyed on the requests that draft after the step | passes |
| ``stale-columns-47014`` | the corrected DSD with the draft buffer's columns kept at ``num_speculative_tokens`` when K is smaller | known bug: torch's ``The size of tensor a (5) must match the size of tensor b (7)`` |
| ``prompt-rows-verify-graph-49918`` | the corrected DSD with ``decode_graph_eligible`` always set | known bug: ``vllm_decode_graph_rows`` |
| ``capture-width-48494`` | the corrected DSD with the capture plan's width formula applied to the one-token draft runner unguarded | known bug: the engine does not start (``InputBatch.make_dummy`` asserts) |

A user's own switch policy: an object with ``name`` and ``overrides`` (a dict of :class:`VOps`
fields), named ``package.module:Object`` (``load_variant``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from specstate.errors import UnknownName, VariantLoadError
from specstate.model.vllm_0_34_0.engine import UPSTREAM_OPS, VOps, choose_k_decode_rows
from specstate.model.vllm_0_34_0.state import StepRecord, VState
from specstate.model.variant_registry import import_object

__all__ = ["VllmVariant", "VARIANTS", "get_vllm_variant", "vllm_variant_names", "load_variant", "DEFAULT_VARIANT"]


@dataclass(frozen=True)
class VllmVariant:
    name: str
    summary: str
    overrides: dict[str, Any] = field(default_factory=dict)
    known_bug: str | None = None  #: the upstream issue it reproduces (a variant expected to fail)
    expected: str = "pass"  #: ``pass``, or the invariant / error it is expected to fail with

    @property
    def ops(self) -> VOps:
        return replace(UPSTREAM_OPS, **self.overrides)


def _stale_columns(state: VState, rec: StepRecord, rid: int) -> int:
    """vllm#47014's class: the draft-token buffer's columns stay at ``num_speculative_tokens`` (the
    widest K) after DSD picks a smaller one, so the rejection sampler meets stale columns."""
    return max(state.lookup) if state.lookup else dict(rec.spec).get(rid, 0)


def _always_eligible(state: VState, rec: StepRecord) -> bool:
    """The #49918 class: ``decode_graph_eligible`` without the prompt-row check."""
    return True


DEFAULT_VARIANT = "dsd-as-shipped"

VARIANTS: dict[str, VllmVariant] = {v.name: v for v in (
    VllmVariant("dsd-as-shipped", "vLLM 0.34.0 as shipped: K keyed on every scheduled request, prefill chunks "
                "included (vllm#49548)", {}, known_bug="vllm#49548", expected="vllm_dsd_k_keyed_on_decode_rows"),
    VllmVariant("dsd-corrected", "K keyed on the requests that draft after the step (the #49548 correction)",
                {"choose_k": choose_k_decode_rows}),
    VllmVariant("stale-columns-47014", "dsd-corrected with the draft buffer kept at the widest K (vllm#47014's class)",
                {"choose_k": choose_k_decode_rows, "verify_columns": _stale_columns}, known_bug="vllm#47014",
                expected="RuntimeError"),
    VllmVariant("prompt-rows-verify-graph-49918", "dsd-corrected with every batch decode-graph eligible "
                "(vllm#49918's class)", {"choose_k": choose_k_decode_rows, "decode_graph_eligible": _always_eligible},
                known_bug="vllm#49918", expected="vllm_decode_graph_rows"),
    VllmVariant("capture-width-48494", "dsd-corrected with the draft runner's capture widths from the unguarded "
                "formula (vllm#48494's class)", {"choose_k": choose_k_decode_rows, "capture_guard": False},
                known_bug="vllm#48494", expected="start"),
)}


def vllm_variant_names() -> list[str]:
    return list(VARIANTS)


def load_variant(name: str) -> VllmVariant:
    """A built-in variant by name, or ``package.module:Object`` (a :class:`VllmVariant`, or any object
    with ``name`` and ``overrides``)."""
    if name in VARIANTS:
        return VARIANTS[name]
    if ":" not in name:
        raise UnknownName(f"Expected a vLLM variant from {sorted(VARIANTS)} or package.module:Object but got {name!r}")
    obj = import_object(name)  # the one guard for a user's variant module, every engine's
    if isinstance(obj, VllmVariant):
        return obj
    overrides = dict(getattr(obj, "overrides", {}) or {})
    unknown = set(overrides) - set(VOps.__dataclass_fields__)
    if unknown:
        raise VariantLoadError(f"Expected overrides of {sorted(VOps.__dataclass_fields__)} but got {sorted(unknown)}")
    return VllmVariant(str(getattr(obj, "name", name)), str(getattr(obj, "summary", "a user's policy")), overrides)


def get_vllm_variant(name: str) -> VllmVariant:
    return load_variant(name)
