"""The seed's switch written against sglang 0.5.17's ``EAGLEWorkerV2``, for real: an AROUND hook on
``eagle_worker_v2.py::EAGLEWorkerV2.activate_step_by_batch`` (installed by ``plugin.py`` in the
scheduler process, before the recorder), the model's ``v2-static-switch-naive`` and
``v2-static-switch`` (``specstate/model/sglang_0_5_17/static.py``).

Upstream calls ``self.activate_step_by_batch(batch.seq_lens.shape[0])`` first in every
non-extend ``EAGLEWorkerV2.forward_batch_generation`` (decode and idle batches); without
``--speculative-adaptive`` (``adaptive_controller is None``, ``EAGLEWorkerV2.__init__``) it does
nothing, and the same method then branches on ``self.speculative_num_steps == 0`` to
``_build_trivial_verify_input`` (a 1-token verify built from ``EagleDraftInput.bonus_tokens``,
no controller read) and ``EagleDraftWorker._draft_extend_for_decode`` (which reads the *draft*
worker's ``speculative_num_draft_tokens``). The patch, selected in the scheduler process by
environment (written by ``sglang_driver --patch ... --threshold N``):

- ``SPECSTATE_PATCH=v2-switch-naive``: ``self.speculative_num_steps = 0`` above the threshold,
  the launch's steps at or below it; nothing else (the draft extend keeps the launch's width);
- ``SPECSTATE_PATCH=v2-switch``: steps 0 and 1 draft token above the threshold (the launch's
  steps and draft tokens at or below it), on the worker and on its draft worker
  (``EAGLEWorkerV2._draft_worker``): the fields ``apply_runtime_state`` sets besides the runners;
- ``SPECSTATE_THRESHOLD`` (default 5): a batch of more requests takes steps 0.

With an adaptive controller (an ``--speculative-adaptive`` launch) the hook leaves upstream's
own switch alone (it calls the original and says so once): the patch is for static launches.
The launch's counts are read from ``EAGLEWorkerV2.server_args`` (``speculative_num_steps``,
``speculative_num_draft_tokens``), which nothing changes on a static launch.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["V2_PATCHES", "MODEL_VARIANT", "SwitchConfig", "config_from_env", "switch_counts", "around_activate_step_by_batch",
           "TARGET", "install"]

#: the driver's ``--patch`` names of this module's two forms
V2_PATCHES = ("v2-switch-naive", "v2-switch")
#: each form's model variant (``model/sglang_0_5_17/static.py``)
MODEL_VARIANT = {"v2-switch-naive": "v2-static-switch-naive", "v2-switch": "v2-static-switch"}
TARGET = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.activate_step_by_batch"


@dataclass(frozen=True)
class SwitchConfig:
    patch: str  #: one of ``V2_PATCHES``
    threshold: int

    @property
    def naive(self) -> bool:
        return self.patch == "v2-switch-naive"

    def header(self) -> dict[str, Any]:
        """What the recording's header says of the patch (conformance picks variant and threshold from it)."""
        return {"name": self.patch, "threshold": self.threshold, "variant": MODEL_VARIANT[self.patch]}


def config_from_env(env: Any = None) -> SwitchConfig | None:
    """The patch the environment asks for (``None``: none of this module's)."""
    env = os.environ if env is None else env
    patch = env.get("SPECSTATE_PATCH", "none")
    if patch not in V2_PATCHES:
        return None
    return SwitchConfig(patch, int(env.get("SPECSTATE_THRESHOLD") or 5))


def switch_counts(cfg: SwitchConfig, batch_size: int, launch_steps: int, launch_draft_tokens: int) -> tuple[int, int]:
    """(steps, draft tokens) the patch activates for a batch of ``batch_size`` (the model's
    ``static.switch_steps``: ``SpecConfig.speculation_allowed``, i.e. ``batch_size <= threshold``)."""
    if batch_size <= cfg.threshold:
        return launch_steps, launch_draft_tokens
    return 0, 1


_warned: list[bool] = []


def around_activate_step_by_batch(original: Callable[..., Any], worker: Any, batch_size: int, *a: Any, **k: Any) -> Any:
    """The patched ``EAGLEWorkerV2.activate_step_by_batch`` (module doc)."""
    cfg = config_from_env()
    if cfg is None or getattr(worker, "adaptive_controller", None) is not None:
        if cfg is not None and not _warned:
            _warned.append(True)
            print("[specstate] v2 switch patch: an adaptive controller decides on this launch; the patch stays out",
                  file=sys.stderr, flush=True)
        return original(worker, batch_size, *a, **k)
    sa = worker.server_args
    steps, draft_tokens = switch_counts(cfg, int(batch_size), int(sa.speculative_num_steps),
                                        int(sa.speculative_num_draft_tokens))
    worker.speculative_num_steps = steps
    if not cfg.naive:
        worker.speculative_num_draft_tokens = draft_tokens
        dw = worker._draft_worker
        dw.speculative_num_steps, dw.speculative_num_draft_tokens = steps, draft_tokens
    return None


def install(register: Callable[..., Any], kinds: Any) -> SwitchConfig | None:
    """Register the hook when the environment asks for one of the two forms (from ``plugin.py``)."""
    cfg = config_from_env()
    if cfg is not None:
        register(TARGET, around_activate_step_by_batch, kinds.AROUND)
        print(f"[specstate] v2 switch patch {cfg.patch} (threshold {cfg.threshold}) registered in pid {os.getpid()}",
              file=sys.stderr, flush=True)
    return cfg
