"""The operations 0.5.12 gives the shared ``Ops`` table as its defaults: the v1 ``EAGLEWorker``
(``sglang/srt/speculative/eagle_worker.py::EAGLEWorker``, ``worker.py`` here) and the corrected
fallback (``fallback_decode``). The table's catalog (``specstate/model/ops.py``) asks every release
for its ``DEFAULTS`` (``Release.defaults``) and names none.
"""

from __future__ import annotations

from typing import Any, Callable

from specstate.model.sglang_0_5_12 import worker as _w

__all__ = ["DEFAULTS"]

#: operation name -> function: this release's part of ``DEFAULT_OPS``
DEFAULTS: dict[str, Callable[..., Any]] = dict(
    # worker (eagle_worker.py, eagle_info.py, model runners)
    graph_runners=_w.graph_runners,
    forward_batch_generation=_w.forward_batch_generation,
    forward_target_extend=_w.forward_target_extend,
    forward_draft_extend=_w.forward_draft_extend,
    decide_speculation=_w.decide_speculation,
    decode=_w.decode,
    speculative_decode=_w.speculative_decode,
    draft=_w.draft,
    verify=_w.verify,
    free_rejected_slots=_w.free_rejected_slots,
    forward_draft_extend_after_decode=_w.forward_draft_extend_after_decode,
    fallback_decode=_w.fallback_decode,
    new_draft_input=_w.make_draft_input,
)
