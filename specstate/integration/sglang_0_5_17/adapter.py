"""sglang 0.5.17 as the integration core sees it (``integration/adapter.py``)."""

from __future__ import annotations

from specstate.integration.adapter import ReleaseAdapter

__all__ = ["FAMILY", "ADAPTER"]

FAMILY = "sglang-0.5.17"

#: upstream's own adaptive speculation switches, as ``upstream-adaptive`` models; a recording of a
#: static launch, or of the switch patch on one (``switch_patch.py``), names its variant in its header
ADAPTER = ReleaseAdapter(FAMILY, __package__, ("specstate-sglang17-rec/1",), "upstream-adaptive", patch="none",
                         parts={"header_variant": f"{__package__}.conformance:variant_from_header",
                                "fuzz_workloads": f"{__package__}.engine:fuzz_v2_workloads"},
                         patches=("v2-switch-naive", "v2-switch"),
                         engine_variant="upstream-adaptive", header_agrees=(("max_prefill_tokens", "max_prefill_tokens"),),
                         adaptive_header=True, record_counter="loop", takes_threshold=False)
