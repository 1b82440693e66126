"""The ranks of a DP-attention launch: how many, how their MLP input is gathered, and the
launch flags that say so.

Owns ``RankConfig`` (``--dp-size``, ``--tp-size``, ``--enable-dp-attention``,
``--enable-dp-lm-head``, ``--moe-dense-tp-size``, ``--moe-a2a-backend``, ``--load-balance-method``) and the reading of
those flags out of a launch (``dp_launch``): the rest of the launch goes through the
single-rank parser unchanged (``server_args.parse_launch``), then sglang 0.5.12's DP post-init
is applied to the config every rank runs (``server_args.py::ServerArgs._handle_data_parallelism``:
``chunked_prefill_size // dp_size``, ``schedule_conservativeness * 0.3``).

Mirrors (sglang 0.5.12):
- ``utils/common.py::require_mlp_tp_gather``: whether the MLP input is the gathered batch of
  every DP rank (the scheduler then keeps every rank's count; else only its own,
  ``scheduler_dp_attn_mixin.py::_update_gather_batch``);
- ``server_args.py::ServerArgs._handle_data_parallelism``: ``dp_size == 1`` turns DP attention off;
  ``tp_size % dp_size == 0``;
- ``dp_attention.py::compute_dp_attention_world_info``: attention-TP size ``tp_size // dp_size``;
- ``model_runner_kv_cache_mixin.py::ModelRunnerKVCacheMixin._resolve_max_num_reqs``: each DP worker
  runs at most ``max_running_requests // dp_size`` requests (``ModelRunner.dp_size`` is ``dp_size``
  under DP attention), which also caps its CUDA-graph capture list
  (``cuda_graph_runner.py::get_batch_sizes_to_capture``: ``req_to_token_pool.size``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from specstate.errors import UsageError

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig

__all__ = ["RankConfig", "DpLaunch", "dp_launch", "dp_flags", "per_rank_config"]

#: dest -> the flags sglang 0.5.12 declares for it (``server_args.py::ServerArgs.add_cli_args``)
_DP_FLAGS = {
    "dp_size": ("--dp-size", "--data-parallel-size", "--dp"),
    "tp_size": ("--tp-size", "--tensor-parallel-size", "--tp"),
    "enable_dp_attention": ("--enable-dp-attention",),
    "enable_dp_lm_head": ("--enable-dp-lm-head",),
    "moe_dense_tp_size": ("--moe-dense-tp-size",),
    "moe_a2a_backend": ("--moe-a2a-backend",),
    "load_balance_method": ("--load-balance-method",),
}
_SWITCHES = ("enable_dp_attention", "enable_dp_lm_head")


@dataclass(frozen=True)
class RankConfig:
    """The DP layout every rank agrees on at start."""

    dp_size: int = 1  #: ``ServerArgs.dp_size``: attention-DP ranks (one scheduler each)
    tp_size: int = 1  #: ``ServerArgs.tp_size``: all GPUs of the MLP TP group
    enable_dp_attention: bool = False  #: ``ServerArgs.enable_dp_attention``
    enable_dp_lm_head: bool = False  #: ``ServerArgs.enable_dp_lm_head``
    moe_dense_tp_size: int | None = None  #: ``ServerArgs.moe_dense_tp_size``
    moe_a2a_backend: str = "none"  #: ``ServerArgs.moe_a2a_backend`` (DeepEP & co: sizes counted, not shaped)
    #: ``ServerArgs.load_balance_method`` (``_routing.py``: ``round_robin`` or ``total_requests``)
    load_balance_method: str = "round_robin"

    def __post_init__(self) -> None:
        if self.dp_size < 1 or self.tp_size < 1:
            raise UsageError(f"--dp-size / --tp-size: expected >= 1 but got dp {self.dp_size}, tp {self.tp_size}")
        if self.enable_dp_attention and self.dp_size > 1 and self.tp_size % self.dp_size:
            raise UsageError(f"--tp-size: expected a multiple of --dp-size {self.dp_size} under DP attention "
                             f"but got {self.tp_size} (ServerArgs._handle_data_parallelism asserts it)")
        from specstate.multirank._routing import LOAD_BALANCE_METHODS

        if self.load_balance_method not in LOAD_BALANCE_METHODS:
            raise UsageError(f"--load-balance-method: the multi-rank model runs {' and '.join(LOAD_BALANCE_METHODS)} "
                             f"(auto is round_robin outside PD disaggregation) but got {self.load_balance_method!r}")

    @property
    def ranks(self) -> int:
        """Schedulers that hold a batch of their own: ``dp_size`` under DP attention, else 1."""
        return self.dp_size if self.multi else 1

    @property
    def multi(self) -> bool:
        """DP attention with more than one rank (``_handle_data_parallelism``: dp 1 turns it off)."""
        return self.enable_dp_attention and self.dp_size > 1

    @property
    def attn_tp_size(self) -> int:
        """``compute_dp_attention_world_info``: ``tp_size // dp_size``."""
        return max(1, self.tp_size // self.dp_size) if self.multi else self.tp_size

    @property
    def require_mlp_tp_gather(self) -> bool:
        """``utils/common.py::require_mlp_tp_gather`` (0.5.12)."""
        if not self.multi:
            return False
        if self.moe_dense_tp_size is None or not self.enable_dp_lm_head or self.moe_a2a_backend == "none":
            return True
        return self.moe_dense_tp_size > self.tp_size // self.dp_size

    def describe(self) -> str:
        gather = "every rank's counts" if self.require_mlp_tp_gather else "local counts only"
        route = "" if self.load_balance_method == "round_robin" else f", routing {self.load_balance_method}"
        return (f"DP attention over {self.dp_size} ranks (TP {self.tp_size}, attention TP {self.attn_tp_size}, "
                f"MLP sync: {gather}{route})")

    def to_json(self) -> dict[str, object]:
        return {"dp_size": self.dp_size, "tp_size": self.tp_size, "enable_dp_attention": self.enable_dp_attention,
                "enable_dp_lm_head": self.enable_dp_lm_head, "moe_dense_tp_size": self.moe_dense_tp_size,
                "moe_a2a_backend": self.moe_a2a_backend, "load_balance_method": self.load_balance_method}


@dataclass(frozen=True)
class DpLaunch:
    ranks: RankConfig
    rest: tuple[str, ...]  #: the launch without its DP flags (read by the single-rank parser)


def _dest(name: str) -> str | None:
    for dest, names in _DP_FLAGS.items():
        if name in names:
            return dest
    return None


def dp_flags(tokens: Sequence[str]) -> DpLaunch:
    """The DP flags of ``tokens`` (flags only, a pasted prefix already stripped) and the rest."""
    values: dict[str, object] = {}
    rest: list[str] = []
    it = list(tokens)
    while it:
        token = it.pop(0)
        name, eq, inline = token.partition("=")
        dest = _dest(name)
        if dest is None:
            rest.append(token)
            continue
        if dest in _SWITCHES:
            values[dest] = True
            continue
        text = inline if eq else (it.pop(0) if it else "")
        values[dest] = _value(dest, name, text)
    return DpLaunch(RankConfig(**values), tuple(rest))  # type: ignore[arg-type]


def _value(dest: str, flag: str, text: str) -> object:
    if dest == "moe_a2a_backend":
        return text
    if dest == "load_balance_method":  # server_args.py::ServerArgs._handle_load_balance_method: auto -> round_robin
        return "round_robin" if text == "auto" else text
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"argument {flag}: expected an integer but got {text[:40]!r}") from None
    return value


def dp_launch(tokens: Sequence[str]) -> DpLaunch | None:
    """``dp_flags`` when the launch runs DP attention on more than one rank, else ``None`` (the
    single-rank commands judge it as they always have)."""
    got = dp_flags(tokens)
    return got if got.ranks.multi else None


def per_rank_config(config: "SpecConfig", ranks: RankConfig) -> "SpecConfig":
    """What each DP rank runs of the launch's ``config``: sglang 0.5.12's
    ``ServerArgs._handle_data_parallelism`` (``chunked_prefill_size // dp``,
    ``schedule_conservativeness * 0.3``) and ``_resolve_max_num_reqs`` (``max_running_requests // dp``)."""
    if not ranks.multi:
        return config
    dp = ranks.dp_size
    return config.with_(chunked_prefill_size=max(1, config.chunked_prefill_size // dp),
                        schedule_conservativeness=config.schedule_conservativeness * 0.3,
                        max_running_requests=max(1, config.max_running_requests // dp))
