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

__all__ = ["Fwd", "Observation", "Backend"]


@dataclass(frozen=True)
class Fwd:
    """One forward, normalised: which model, which mode, how many rows, graph or eager."""

    worker: str  #: ``target`` or ``draft``
    mode: str  #: ``EXTEND``, ``DECODE``, ``TARGET_VERIFY``, ``DRAFT_EXTEND``
    bs: int
    tokens: int | None  #: ``input_ids`` length (None where SGLang leaves it stale: drafting)
    graph: int | None  #: padded batch size of a graph replay; ``None``: eager


@dataclass(frozen=True)
class Observation:
    """What one scheduler iteration with a batch did (rids are arrival indices)."""

    kind: str  #: ``prefill`` or ``decode``
    rids: tuple[int, ...]
    path: str  #: ``extend``, ``spec`` or ``fallback``
    accept_lens: tuple[int, ...] = ()
    seq_lens_after: tuple[int, ...] = ()
    out_lens_after: tuple[int, ...] = ()
    spec_after: tuple[Any, ...] = ()  #: (class, topk_p, topk_index, hidden_states, bonus_tokens) shapes
    forwards: tuple[Fwd, ...] = ()
    crash: tuple[str, tuple[int, ...]] | None = None  #: (error class, sizes) of a crash
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


class Backend(Protocol):
    name: str

    def observe(self, workload: Any) -> Sequence[Observation]: ...
