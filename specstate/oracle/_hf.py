"""The model config without transformers: ``config.json`` read into an object with the
attributes sglang's ``ModelConfig`` reads (``transformers.PretrainedConfig`` is stubbed)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

__all__ = ["HFConfig", "patch_get_config", "prepare_process"]


class HFConfig:
    """A ``config.json`` as ``PretrainedConfig`` exposes it (attributes, ``to_dict``)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.__dict__.update(data)
        self._data = dict(data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def get_text_config(self, *args: Any, **kwargs: Any) -> "HFConfig":
        return self


def patch_get_config(overrides: dict[str, Any]) -> None:
    """Every module's reference to sglang's ``get_config`` / ``get_generation_config`` now
    reads ``config.json`` (plus ``overrides``) / returns no generation config."""
    try:
        from sglang.srt.utils.hf_transformers import config as hc
    except ModuleNotFoundError:  # before the package: one module (0.5.9's ``utils/hf_transformers_utils.py``)
        from sglang.srt.utils import hf_transformers_utils as hc

    def get_config(model: str, *args: Any, **kwargs: Any) -> HFConfig:
        with open(os.path.join(model, "config.json")) as f:
            return HFConfig({**json.load(f), **overrides})

    swap: dict[Any, Any] = {hc.get_config: get_config}
    if hasattr(hc, "get_generation_config"):
        swap[hc.get_generation_config] = lambda *a, **k: None
    for mod in list(sys.modules.values()):
        for name, value in list(getattr(mod, "__dict__", {}).items()):
            try:
                new = swap.get(value)
            except TypeError:  # unhashable
                continue
            if new is not None:
                setattr(mod, name, new)


def prepare_process(marker: Any, steps: "list[Any]") -> None:
    """Once per process (``marker.ready``): upstream's own invariant checks on, strict, as far as
    the release declares them (``_core.enable_strict_checks``: the leak check after busy
    iterations too, the page-level checks, ``SGLANG_INVARIANT_CHECK=STRICT``), the model config
    read without transformers (the tokens' vocabulary and EOS), then a release's own ``steps`` in
    order."""
    if getattr(marker, "ready", False):
        return
    from specstate.oracle._core import enable_strict_checks

    enable_strict_checks()
    import sglang.srt.server_args  # noqa: F401  (imports the config readers to patch)

    from specstate.oracle.tokens import EOS, VOCAB

    patch_get_config({"vocab_size": VOCAB, "eos_token_id": EOS})
    for step in steps:
        step()
    marker.ready = True
