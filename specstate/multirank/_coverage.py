"""What a multi-rank verdict covers: the coverage block (``check_result.coverage_block``) of a
DP-attention launch, as every single-rank verdict carries one.

The launch without its DP flags is the single-rank parser's (``server_args.parse_launch``: its
modelled, unaffected, not-examined flags, assumed settings, environment); the DP flags
(``_config.RankConfig``) are modelled here, except where the multi-rank model only counts what
a rank exchanges: an all-to-all MoE backend (``--moe-a2a-backend deepep`` & co). Its dispatch /
combine collectives are not shaped (``_collectives.py``: without ``require_mlp_tp_gather`` they
are ``target:a2a``, compared by count only), so the collective sizes are **not judged** and the
verdict cannot pass (exit 4). The paths reached are the sweep's iteration counts (``MultiRun``'s
stats): extend, speculative and plain decodes, idle ranks.
"""

from __future__ import annotations

from typing import Any, Mapping

from specstate.check_result import coverage_block
from specstate.multirank._config import RankConfig

__all__ = ["dp_modelled", "dp_not_judged", "multi_coverage"]

_PARTS = "sweep, burst, fuzz (the collective sizes of rank-collectives-agree)"


def dp_modelled(ranks: RankConfig) -> list[str]:
    """The DP flags the multi-rank model reads and shapes, as sglang spells them (an a2a backend
    is ``dp_not_judged``'s)."""
    out = ["--enable-dp-attention", f"--dp-size {ranks.dp_size}", f"--tp-size {ranks.tp_size}"]
    out += ["--enable-dp-lm-head"] if ranks.enable_dp_lm_head else []
    out += [f"--moe-dense-tp-size {ranks.moe_dense_tp_size}"] if ranks.moe_dense_tp_size is not None else []
    out += [f"--load-balance-method {ranks.load_balance_method}"] if ranks.load_balance_method != "round_robin" else []
    return out


def dp_not_judged(ranks: RankConfig) -> list[dict[str, str]]:
    """The DP flags whose effect the multi-rank model counts but does not shape."""
    if ranks.moe_a2a_backend == "none":
        return []
    if ranks.require_mlp_tp_gather:
        why = ("the MoE layers exchange tokens by all-to-all under this backend; the multi-rank model shapes the DP "
               "gather only (utils/common.py::require_mlp_tp_gather holds), not the backend's dispatch / combine sizes")
    else:
        why = ("without require_mlp_tp_gather (utils/common.py::require_mlp_tp_gather) the MoE layers exchange tokens "
               "by all-to-all: the multi-rank model records them as target:a2a and compares each rank's count of "
               "them, not their sizes (specstate/multirank/_collectives.py)")
    return [{"flag": f"--moe-a2a-backend {ranks.moe_a2a_backend}", "parts": _PARTS, "reason": why}]


def _reached(stats: Mapping[str, int] | None, threshold: int | None) -> tuple[list[str], list[dict[str, str]]]:
    if stats is None:  # a fuzz or a BFS: no path counts kept
        return [], []
    names = {"extend": "extend (prefill) iterations", "spec": "speculative decode iterations",
             "plain": "plain decode iterations (the switch off)", "idle_rank_iterations": "idle-rank iterations"}
    reached = [f"{names[k]} ({stats[k]})" for k in names if stats.get(k)]
    why = ("no --speculative-disable-batch-threshold: the switch never fires" if threshold is None
           else "the sweep did not steer a rank below the threshold")
    not_reached = [{"path": names[k], "why": why if k == "plain" else "not steered to by the sweep"}
                   for k in names if not stats.get(k)]
    return reached, not_reached


def multi_coverage(judged: str, launch: Any, ranks: RankConfig, stats: Mapping[str, int] | None,  # noqa: ANN401
                   threshold: int | None) -> dict[str, Any]:
    """The coverage block of a multi-rank verdict (``launch``: the single-rank ``Launch`` of the
    rest of the line; ``stats``: the sweep's counts, ``None`` where none were kept)."""
    c = dict(getattr(launch, "coverage", None) or {})
    reached, not_reached = _reached(stats, threshold)
    return coverage_block(judged=f"{judged} on {ranks.describe()}",
                          modelled=[*dp_modelled(ranks), *c.get("modelled", ())],
                          not_judged=[*c.get("not_judged", ()), *dp_not_judged(ranks)],
                          unaffected=c.get("unaffected"), not_examined=c.get("not_examined"),
                          assumed=c.get("assumed"), environment=c.get("environment"),
                          reached=reached, not_reached=not_reached, derived=c.get("derived"))
