"""One backend interface for the model, a recorded run and the real SGLang worker.

The boundary is one method, ``observe(workload) -> list[Observation]`` (httpx's
``BaseTransport.handle_request`` is the pattern): one ``Observation`` per scheduler
iteration that ran a batch, in the same normalised vocabulary for every backend, so that
conformance is a plain comparison of two lists.

- :class:`ModelBackend` replays actions on the model (no sglang, no GPU).
- :class:`RecordedBackend` reads the recorder's JSON lines (``sglang_recorder.py``), e.g.
  the files the real worker wrote on the H200 (``tests/data/gpu``).
- The real worker itself is the driver (``sglang_driver.py``) writing those lines on a GPU
  host; a recorded run *is* its observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

__all__ = ["Fwd", "Observation", "Backend", "head", "is_drafting"]


def head(xs: list[int] | None) -> int | None:
    """The first of a recorded list (a forward's ``input_ids`` / ``out_cache_loc`` length), ``None`` where empty."""
    return xs[0] if xs else None


def is_drafting(worker: str | None, mode: str | None) -> bool:
    """A step of the draft loop: a ``draft`` forward in ``DECODE`` mode. SGLang leaves its
    batch's ``input_ids``, ``out_cache_loc`` and ``seq_lens`` as the verify set them, so a
    :class:`Fwd` of it keeps only mode, batch size and graph (conformance compares nothing
    else, and the compact recorder modes record nothing else)."""
    return worker == "draft" and mode == "DECODE"


@dataclass(frozen=True)
class Fwd:
    """One forward, normalised: which model, which mode, how many rows, graph or eager."""

    worker: str | None  #: ``target`` or ``draft`` (``None``: a recorded forward that does not say)
    mode: str | None  #: ``EXTEND``, ``DECODE``, ``TARGET_VERIFY``, ``DRAFT_EXTEND`` (``None``: as ``worker``)
    bs: int
    tokens: int | None  #: ``input_ids`` length (None where SGLang leaves it stale: drafting)
    graph: int | None  #: padded batch size of a graph replay; ``None``: eager
    loc: int | None = None  #: ``out_cache_loc`` length (None: drafting, or not recorded)
    seq_lens: tuple[int, ...] | None = None  #: ``seq_lens`` the forward attends over (None: drafting)


@dataclass(frozen=True)
class Observation:
    """What one scheduler iteration with a batch did (rids are arrival indices)."""

    kind: str  #: ``prefill`` or ``decode``
    rids: tuple[int, ...]
    path: str  #: ``extend``, ``spec`` or ``fallback`` (v2: ``extend``, ``spec``, ``trivial``, ``none``)
    accept_lens: tuple[int, ...] = ()
    seq_lens_after: tuple[int, ...] = ()
    out_lens_after: tuple[int, ...] = ()
    spec_after: tuple[Any, ...] = ()  #: (class, topk_p, topk_index, hidden_states, bonus_tokens) shapes
    forwards: tuple[Fwd, ...] = ()
    crash: tuple[str, tuple[int, ...]] | None = None  #: (error class, sizes) of a crash
    # Scheduler state after ``process_batch_result`` (the recorder's ``post`` line); ``None`` on
    # the recorded side means "not in this recording" and is not compared.
    extend_lens: tuple[int, ...] | None = None  #: a prefill's per-request extend lengths
    prefix_lens: tuple[int, ...] | None = None  #: a prefill's per-request radix match (``len(prefix_indices)``; v2)
    kv_after: tuple[int | None, ...] | None = None  #: (available, evictable, protected)
    req_kv_after: tuple[tuple[int, int | None], ...] | None = None  #: (committed, allocated) per unfinished row
    spec_rows_after: tuple[int, ...] | None = None  #: owner rid of each ``EagleDraftInput`` row
    retracted: tuple[int, ...] | None = None  #: rids ``retract_decode`` took back before this iteration
    aborted: tuple[int, ...] | None = None  #: rids ``retract_decode`` aborted out of memory (v2 recordings)
    waiting_after: tuple[int, ...] | None = None  #: ``Scheduler.waiting_queue``
    chunked_after: int | None | str = "?"  #: ``Scheduler.chunked_req`` ("?": not recorded)
    ratio_after: float | None = None  #: ``Scheduler.new_token_ratio`` (12 decimals)
    batch_is_full_after: bool | None = None  #: ``running_batch.batch_is_full``
    # the v2 family (sglang 0.5.17, overlap scheduler): ``None`` on the recorded side: not compared
    steps: int | None = None  #: the runtime state's step count the launched batch ran with
    processed: tuple[int, ...] | None = None  #: rows of last iteration's batch whose result was processed
    running_after: tuple[int, ...] | None = None  #: ``running_batch.reqs`` at the end of the iteration
    adaptive_after: tuple[Any, ...] | None = None  #: (active steps, ((slot, current, ema, count), ...))
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


class Backend(Protocol):
    name: str

    def observe(self, workload: Any) -> Sequence[Observation]: ...
