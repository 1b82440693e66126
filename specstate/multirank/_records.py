"""What one multi-rank iteration did: the MLP-sync records every rank gathered, the path each
rank took, and every collective each rank entered with its per-rank row counts.

Plain frozen data, one comment per field. The invariants (``_invariants.py``) read these; the
trace report prints them.

Mirrors (sglang 0.5.12):
- ``scheduler_dp_attn_mixin.py::MLPSyncBatchInfo`` / ``prepare_mlp_sync_batch_raw``: each rank's
  row of the gathered tensor (``num_tokens``, ``num_tokens_for_logprob``, ``can_cuda_graph``,
  ``is_extend_in_batch``, the forward mode), and what every rank reads back from it
  (``global_num_tokens``, ``can_cuda_graph = min``, ``is_extend_in_batch = max``);
- ``forward_batch_info.py::ForwardBatch.prepare_mlp_sync_batch`` and
  ``cuda_graph_runner.py::CudaGraphRunner.replay_prepare``: the rows each rank lays out for the
  DP gather of a target forward (``layers/dp_attention.py::DpPaddingMode``: MAX_LEN, every rank
  the same padded length; SUM_LEN, the list itself).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SyncEntry", "SyncRecord", "Collective", "RankPath", "RankIteration"]


@dataclass(frozen=True)
class SyncEntry:
    """One rank's row of ``MLPSyncBatchInfo`` as ``prepare_mlp_sync_batch_raw`` fills it."""

    num_tokens: int  #: decode: ``batch_size()``; extend: ``extend_num_tokens``; none: 0
    num_tokens_for_logprob: int  #: decode: ``num_tokens``; extend: one per request (no logprobs asked)
    can_cuda_graph: bool  #: ``local_batch is None or forward_mode.is_decode_or_idle()``
    is_extend_in_batch: bool  #: ``local_batch.forward_mode.is_extend()``
    forward_mode: str  #: ``EXTEND``, ``DECODE`` or ``NONE`` (no local batch)


@dataclass(frozen=True)
class SyncRecord:
    """One ``MLPSyncBatchInfo.all_gather``: what every rank sent and reads back."""

    purpose: str  #: ``prefill-first`` (``get_next_batch_to_run``'s first sync under spec) or ``decode``
    entries: tuple[SyncEntry, ...]  #: per rank, in rank order

    @property
    def global_num_tokens(self) -> tuple[int, ...]:
        return tuple(e.num_tokens for e in self.entries)

    @property
    def is_extend_in_batch(self) -> bool:
        """``tp0_info[:, 3].max()``."""
        return any(e.is_extend_in_batch for e in self.entries)

    @property
    def can_cuda_graph(self) -> bool:
        """``tp0_info[:, 2].min()``: the batch's ``can_run_dp_cuda_graph``."""
        return all(e.can_cuda_graph for e in self.entries)

    @property
    def need_idle_batch(self) -> bool:
        """``max(global_num_tokens) > 0``: ranks without a batch run ``get_idle_batch``."""
        return max(self.global_num_tokens) > 0


@dataclass(frozen=True)
class Collective:
    """One collective a rank entered, as that rank lays it out."""

    kind: str  #: ``mlp-sync:<purpose>`` or ``target:dp-gather`` (each MoE / dense layer's gather)
    mode: str  #: ``MAX_LEN`` / ``SUM_LEN`` (``DpPaddingMode``), ``ALL_GATHER`` for the sync itself
    sizes: tuple[int, ...]  #: rows per rank as this rank believes them (MAX_LEN: every rank the same)
    own: int  #: the rows this rank puts in
    graph: str | None = None  #: ``TARGET_VERIFY@bs`` when a CUDA graph was replayed, ``None``: eager

    def signature(self) -> tuple[str, str, tuple[int, ...]]:
        """What must agree across ranks: kind, padding mode, the sizes."""
        return (self.kind, self.mode, self.sizes)

    def describe(self) -> str:
        how = f"graph {self.graph}" if self.graph else "eager"
        return f"{self.kind} {self.mode} sizes {list(self.sizes)} own {self.own} ({how})"


@dataclass(frozen=True)
class RankPath:
    """The path one rank's worker took in one iteration."""

    path: str  #: ``extend``, ``spec`` (draft + verify), ``plain`` (the fallback), ``naive``, ``none``
    batch: str  #: the local batch: ``prefill``, ``decode``, ``idle`` (``get_idle_batch``), ``none``
    rows: int  #: the local batch size
    width: int  #: tokens per request of the target forward's spec input (``get_spec_adjust_token_coefficient``)
    #: rows of ``input_ids`` the target forward carries (copied into ``rows * num_tokens_per_bs``
    #: graph rows on a replay: ``GraphInputBuffers.populate_from_forward_batch``)
    source_rows: int = 0


@dataclass(frozen=True)
class RankIteration:
    """One iteration of every rank."""

    step: int  #: 1-based index of the action
    syncs: tuple[SyncRecord, ...]  #: the MLP syncs of ``get_next_batch_to_run``, in order
    paths: tuple[RankPath, ...]  #: per rank
    collectives: tuple[tuple[Collective, ...], ...]  #: per rank, in the order entered
    decision: str | None = None  #: the agreed decision, when the policy takes one (``speculate`` / ``plain``)
