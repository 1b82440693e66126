"""sglang general plugin (entry-point group ``sglang.srt.plugins``) of specstate.

Discovery: ``sglang_assets/plugin_path/specstate_sglang-0.1.dist-info`` (METADATA +
entry_points.txt) makes ``importlib.metadata`` see a distribution ``specstate-sglang`` with
the entry point ``specstate = specstate.integration.sglang_plugin:register`` when that folder
(and the repository root, for the ``specstate`` package) is on ``PYTHONPATH``. sglang 0.5.12
calls ``sglang.srt.plugins.load_plugins()`` when the Engine starts (engine process) and
again at the top of ``run_scheduler_process`` (the spawned scheduler process, which runs
the ``EAGLEWorker``); ``load_plugins`` runs every plugin's function, then
``HookRegistry.apply_hooks()`` monkey-patches the registered targets.

``register()`` (environment read in each process):

- ``SPECSTATE_AGREE=1``: AFTER hook on ``ModelRunner.load_model`` that rewrites the target
  and draft weights so that they agree (``specstate.integration.agree``);
- ``SPECSTATE_PATCH=naive|fixed``: the threshold patch (``sglang_patch``), registered
  before the recorder so that the recorder's AROUND hook is the outer one;
- ``SPECSTATE_USER_PLUGIN=MODULE:FUNC``: instead of the built-in patch, the user's own
  plugin function (``specstate replay --engine sglang --plugin MODULE:FUNC``);
- ``SPECSTATE_REC_CTL`` / ``SPECSTATE_REC_OUT``: the recorder (``sglang_recorder``).

What it registers is the release's (``integration/catalog.py``: the adapter named by
``SPECSTATE_ENGINE``, the default release without it): ``sglang_0_5_12/plugin.py`` registers the
above; ``sglang_0_5_17/plugin.py`` no patch, the agree hook guarded (a model it cannot rewrite
keeps its random weights), a user plugin if named, and the 0.5.17 recorder.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["register", "agree_requested", "recording_requested", "load_user_plugin", "PLUGIN_PATH", "ENTRY_POINT_GROUP"]

PLUGIN_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sglang_assets", "plugin_path")
ENTRY_POINT_GROUP = "sglang.srt.plugins"

_registered = False


def _after_load_model(result: Any, runner: Any, *args: Any, **kwargs: Any) -> None:
    from specstate.integration.agree import apply_agree

    cfg = runner.model_config.hf_config
    vocab = int(cfg.vocab_size)
    hidden = int(cfg.hidden_size)
    is_draft = bool(getattr(runner, "is_draft_worker", False))
    num_aux = 3
    eagle_cfg = getattr(cfg, "eagle_config", None) or {}
    if isinstance(eagle_cfg, dict) and eagle_cfg.get("eagle_aux_hidden_state_layer_ids"):
        num_aux = len(eagle_cfg["eagle_aux_hidden_state_layer_ids"])
    changed = apply_agree(runner.model, is_draft=is_draft, vocab=vocab, hidden=hidden, num_aux=num_aux)
    print(
        f"[specstate] agree weights applied to {'draft' if is_draft else 'target'} "
        f"({len(changed)} tensors) in pid {os.getpid()}",
        file=sys.stderr,
        flush=True,
    )
    return None


def _load_user_plugin(spec: str) -> Any:
    """``MODULE:FUNC`` -> the function (a user's own sglang plugin, entry-point style: it
    registers its hooks with ``HookRegistry`` when called)."""
    import importlib

    mod, _, func = spec.partition(":")
    if not mod or not func:
        raise ValueError(f"Expected a plugin as MODULE:FUNC but got {spec!r}")
    fn = getattr(importlib.import_module(mod), func)
    print(f"[specstate] user plugin {spec} loaded in pid {os.getpid()}", file=sys.stderr, flush=True)
    return fn


def _safe_after_load_model(result: Any, runner: Any, *args: Any, **kwargs: Any) -> None:
    """``_after_load_model`` that never stops the engine: a model it cannot rewrite keeps its
    random weights (and says so)."""
    try:
        _after_load_model(result, runner, *args, **kwargs)
    except Exception as e:  # noqa: BLE001
        print(f"[specstate] agree weights NOT applied in pid {os.getpid()}: {type(e).__name__}: {e}", file=sys.stderr,
              flush=True)
    return None


def register() -> None:
    """Entry point called by ``sglang.srt.plugins.load_plugins()`` in every process."""
    global _registered
    if _registered:
        return
    _registered = True
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from specstate.integration.catalog import adapter_for

    adapter_for(os.environ.get("SPECSTATE_ENGINE") or None).register(HookRegistry, HookType)


def agree_requested() -> bool:
    """``SPECSTATE_AGREE`` asks for the agree weights."""
    return os.environ.get("SPECSTATE_AGREE", "0") not in ("", "0", "false", "no")


def recording_requested() -> bool:
    """The driver asked for a recording (a control file, an output or a crash file)."""
    return bool(os.environ.get("SPECSTATE_REC_CTL") or os.environ.get("SPECSTATE_REC_OUT")
                or os.environ.get("SPECSTATE_REC_CRASH"))


def load_user_plugin() -> bool:
    """``SPECSTATE_USER_PLUGIN=MODULE:FUNC``: the user's plugin, called now; whether there was one."""
    user = os.environ.get("SPECSTATE_USER_PLUGIN")
    if user:
        _load_user_plugin(user)()
    return bool(user)
