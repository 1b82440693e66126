"""Forward modes and hidden-state capture modes.

Mirrors ``sglang/srt/model_executor/forward_batch_info.py::ForwardMode`` and
``::CaptureHiddenMode`` (only the members the EAGLE v1 path uses, plus the v2 worker's
``DRAFT_EXTEND_V2``). The integer values of
``CaptureHiddenMode`` matter: ``CudaGraphRunner.can_run`` takes the ``max`` of the batch's
and the ``spec_info``'s capture modes.
"""

from __future__ import annotations

from enum import Enum, IntEnum

__all__ = ["ForwardMode", "CaptureHiddenMode", "Worker"]


class ForwardMode(Enum):
    """``forward_batch_info.py::ForwardMode``."""

    EXTEND = "EXTEND"
    DECODE = "DECODE"
    MIXED = "MIXED"
    IDLE = "IDLE"
    TARGET_VERIFY = "TARGET_VERIFY"
    DRAFT_EXTEND = "DRAFT_EXTEND"
    #: the v2 worker's draft extend after verify (sglang 0.5.17, ``specstate.model.sglang_0_5_17``)
    DRAFT_EXTEND_V2 = "DRAFT_EXTEND_V2"

    def is_extend(self) -> bool:
        """``ForwardMode.is_extend``: EXTEND, MIXED, DRAFT_EXTEND and TARGET_VERIFY count."""
        return self in _IS_EXTEND

    def is_decode_or_idle(self) -> bool:
        """``ForwardMode.is_decode_or_idle``."""
        return self in _IS_DECODE_OR_IDLE

    def is_cuda_graph(self) -> bool:
        """``ForwardMode.is_cuda_graph``: the modes ``ModelRunner._forward_raw`` sends to a
        graph runner (DECODE counts, which is how a plain decode reaches a runner captured
        for TARGET_VERIFY)."""
        return self in _IS_CUDA_GRAPH


# the sets the predicates test (built once: an enum member's lookup on its class is not free)
_IS_EXTEND = frozenset({ForwardMode.EXTEND, ForwardMode.MIXED, ForwardMode.DRAFT_EXTEND, ForwardMode.TARGET_VERIFY})
_IS_DECODE_OR_IDLE = frozenset({ForwardMode.DECODE, ForwardMode.IDLE})
_IS_CUDA_GRAPH = frozenset({ForwardMode.DECODE, ForwardMode.TARGET_VERIFY, ForwardMode.IDLE, ForwardMode.DRAFT_EXTEND})


class CaptureHiddenMode(IntEnum):
    """``forward_batch_info.py::CaptureHiddenMode`` (NULL < LAST < FULL)."""

    NULL = 0
    LAST = 1
    FULL = 2


class Worker(Enum):
    """Which model runner a forward goes to: the target model or the draft model."""

    TARGET = "target"
    DRAFT = "draft"
