"""The rows each rank lays out for the DP gather of one target forward.

Every MoE / dense layer of the target gathers the hidden states of every DP rank
(``layers/dp_attention.py::dp_gather_partial`` over ``all_gather_into_tensor`` in MAX_LEN mode,
an ``all_reduce`` of a SUM_LEN buffer otherwise). The sizes are not exchanged again at the
forward: each rank derives them from the list it gathered at scheduling time, scaled by the
width of *its own* spec input. So two ranks agree only if they scaled the same list by the same
width and took the same graph-or-eager path. sglang 0.5.12:

- ``forward_batch_info.py::ForwardBatch.init_new``: ``global_num_tokens_cpu`` =
  ``spec_info.get_spec_adjusted_global_num_tokens`` (the gathered list times the spec input's
  coefficient: ``EagleVerifyInput`` ``draft_token_num``; no spec input: the list as gathered);
- ``cuda_graph_runner.py::CudaGraphRunner.can_run`` under ``require_mlp_tp_gather``:
  ``max(global_num_tokens_cpu) // num_tokens_per_bs <= max_bs`` and ``can_run_dp_cuda_graph``;
  ``replay_prepare``: the bucket ``capture_bs[bisect_left(capture_bs, max / num_tokens_per_bs)]``,
  every rank ``bucket * num_tokens_per_bs`` rows (``DpPaddingMode.get_default_mode_in_cuda_graph``:
  MAX_LEN); the copy ``input_ids[:raw_bs * num_tokens_per_bs].copy_(source)`` uses the *local*
  ``raw_bs`` (a 1-row source broadcasts silently);
- ``forward_batch_info.py::ForwardBatch.prepare_mlp_sync_batch`` (eager): ``ceil_align`` to the
  attention-TP size, ``DpPaddingMode.get_dp_padding_mode`` (SUM_LEN when ``is_extend_in_batch``
  and dp > 1; else MAX_LEN iff ``sum * 2 >= max * dp_size``), MAX_LEN pads every rank to the max.

Without ``require_mlp_tp_gather`` (``--enable-dp-lm-head`` + ``--moe-dense-tp-size 1`` + an a2a
backend) the list holds the local count only and the MoE layers exchange tokens by all-to-all:
those collectives are recorded as ``target:a2a`` and compared by count, not by size.
"""

from __future__ import annotations

import bisect

from specstate.model.config import SpecConfig
from specstate.multirank._config import RankConfig
from specstate.multirank._records import Collective, RankPath, SyncRecord

__all__ = ["target_collective", "sync_collective", "GRAPH_PATHS"]

GRAPH_PATHS = ("spec", "naive")  #: paths whose target forward is a TARGET_VERIFY (or IDLE) graph candidate


def _ceil_align(x: int, k: int) -> int:
    return -(-x // k) * k


def sync_collective(sync: SyncRecord, rank: int) -> Collective:
    """``MLPSyncBatchInfo.all_gather``: fixed-size rows, every rank the same."""
    n = len(sync.entries)
    return Collective(f"mlp-sync:{sync.purpose}", "ALL_GATHER", (1,) * n, 1)


def _graph_bucket(cfg: SpecConfig, rc: RankConfig, sync: SyncRecord, scaled: list[int], rows: int) -> int | None:
    """``can_run`` then ``replay_prepare``'s bucket, or ``None`` when the graph cannot run."""
    ndt = cfg.speculative_num_draft_tokens
    capture = cfg.cuda_graph_bs
    wanted = max(scaled) / ndt if rc.require_mlp_tp_gather else rows
    if int(wanted) > max(capture) or not sync.can_cuda_graph:
        return None
    return capture[bisect.bisect_left(capture, wanted)]


def target_collective(cfg: SpecConfig, rc: RankConfig, sync: SyncRecord, path: RankPath, rank: int) -> Collective | None:
    """The DP gather of ``rank``'s target forward on ``path``, as that rank lays it out."""
    if path.path == "none":
        return None
    raw = list(sync.global_num_tokens) if rc.require_mlp_tp_gather else [path.rows]
    scaled = [x * path.width for x in raw]
    kind = "target:dp-gather" if rc.require_mlp_tp_gather else "target:a2a"
    if path.path in GRAPH_PATHS:
        bucket = _graph_bucket(cfg, rc, sync, scaled, path.rows)
        if bucket is not None:
            rows = bucket * cfg.speculative_num_draft_tokens
            return Collective(kind, "MAX_LEN", (rows,) * len(raw), rows, graph=f"TARGET_VERIFY@{bucket}")
    return _eager(rc, sync, scaled, rank, kind)


def _eager(rc: RankConfig, sync: SyncRecord, scaled: list[int], rank: int, kind: str) -> Collective:
    lst = [_ceil_align(x, rc.attn_tp_size) for x in scaled]
    if sync.is_extend_in_batch and rc.dp_size > 1:
        mode = "SUM_LEN"
    else:
        mode = "MAX_LEN" if sum(lst) * 2 >= max(lst) * rc.dp_size else "SUM_LEN"
    if mode == "MAX_LEN":
        top = max(lst)
        return Collective(kind, mode, (top,) * len(lst), top)
    own = lst[rank] if len(lst) > 1 else lst[0]
    return Collective(kind, mode, tuple(lst), own)
