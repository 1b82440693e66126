"""The sglang plugin's hooks for sglang 0.5.12 (``sglang_plugin.register`` calls ``register``)."""

from __future__ import annotations

from typing import Any

from specstate.integration.sglang_plugin import _after_load_model, agree_requested, load_user_plugin, recording_requested

__all__ = ["register", "AGREE_TARGET"]

#: where the agree weights are applied (an AFTER hook)
AGREE_TARGET = "sglang.srt.model_executor.model_runner.ModelRunner.load_model"


def register(registry: Any, kinds: Any) -> None:
    """The agree weights, the switching patch (``sglang_patch``; or a user plugin instead), the
    0.5.12 recorder (``sglang_recorder``), in that order: the recorder's AROUND hook is the outer one;
    then the DP breadcrumb trace when ``SPECSTATE_DP_TRACE`` names a folder (``dp_patch``)."""
    from specstate.integration import dp_patch, sglang_patch, sglang_recorder

    if agree_requested():
        registry.register(AGREE_TARGET, _after_load_model, kinds.AFTER)
    if not load_user_plugin():
        sglang_patch.install()
    if recording_requested():
        sglang_recorder.install()
    dp_patch.install_trace(registry.register, kinds)  # SPECSTATE_DP_TRACE: where each DP rank stopped
