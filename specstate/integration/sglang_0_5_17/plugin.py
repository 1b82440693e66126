"""The sglang plugin's hooks for sglang 0.5.17 (``sglang_plugin.register`` calls ``register``)."""

from __future__ import annotations

from typing import Any

from specstate.integration.sglang_plugin import _safe_after_load_model, agree_requested, load_user_plugin, recording_requested

__all__ = ["register"]


def register(registry: Any, kinds: Any) -> None:
    """The agree weights (guarded), the seed's switch on ``EAGLEWorkerV2`` when
    ``SPECSTATE_PATCH`` names one of its forms (``switch_patch.py``: static launches; upstream's
    own adaptive speculation switches otherwise), a user plugin, the 0.5.17 recorder
    (``recorder.py``, registered last: its AROUND hooks are the outer ones)."""
    from specstate.integration.sglang_0_5_12.plugin import AGREE_TARGET
    from specstate.integration.sglang_0_5_17 import recorder, switch_patch

    if agree_requested():
        registry.register(AGREE_TARGET, _safe_after_load_model, kinds.AFTER)
    switch_patch.install(registry.register, kinds)
    load_user_plugin()
    if recording_requested():
        recorder.install(registry.register, kinds)
