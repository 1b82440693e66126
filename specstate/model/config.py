"""The server configuration the model runs under.

Mirrors the ``sglang/srt/server_args.py::ServerArgs`` fields that size the EAGLE batch
state, and the derived values SGLang computes from them:

- ``cuda_graph_bs`` is built as ``ServerArgs._generate_cuda_graph_batch_sizes`` builds it
  for speculative decoding and filtered as ``cuda_graph_runner.py::get_batch_sizes_to_capture``
  filters it (``<= max_running_requests``).
- The target runner captures TARGET_VERIFY with ``num_tokens_per_bs = num_draft_tokens``
  (``CudaGraphRunner.__init__``); the draft runner DECODE with ``topk`` tokens per request
  (``eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner.__init__``); the draft-extend
  runner DRAFT_EXTEND with ``num_steps + 1`` (``EAGLEDraftExtendCudaGraphRunner.__init__``).

Target and draft share one token-slot allocator and one ``req_to_token`` pool in v1
(``EAGLEWorker.__init__`` passes the target's ``req_to_token_pool`` and
``token_to_kv_pool_allocator`` to the draft worker); each has its own KV pool of the same
size. ``target_kv_pool_size`` and ``draft_kv_pool_size`` are both kept so that a config
that would give them different sizes is rejected with a clear error.
"""

from __future__ import annotations

import functools
import json

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from specstate._deprecation import moved_function
from specstate.errors import InvalidConfig
from specstate.model.bs_compare import at_most

__all__ = ["SpecConfig", "spec_cuda_graph_batch_sizes", "check_changes", "check_fields", "BOUNDS", "MAX_CAPTURE_SIZES"]

#: Inclusive bounds of every numeric field: what SGLang accepts and the model can run at a
#: cost bounded by the input (the capture list, graph buffers and the tiny tensors of a step
#: grow with these). One table, read by ``SpecConfig._check`` and by the file schema
#: (``specstate.schema``), so a Python caller and a config file meet the same limits.
BOUNDS: dict[str, tuple[float, float]] = {
    "speculative_num_steps": (1, 32),
    "speculative_eagle_topk": (1, 32),
    "speculative_num_draft_tokens": (1, 512),
    "disable_batch_threshold": (0, 4096),
    "cuda_graph_max_bs": (1, 1024),
    "max_running_requests": (1, 4096),
    "target_kv_pool_size": (1, 1 << 26),
    "draft_kv_pool_size": (1, 1 << 26),
    "chunked_prefill_size": (1, 1 << 24),
    "page_size": (1, 1024),
    "target_hidden_size": (1, 16384),
    "num_aux_hidden_states": (1, 16),
    "draft_hidden_size": (1, 16384),
    "seq_len_fill_value": (0, 1 << 20),
    "context_len": (2, 1 << 22),
    "max_prefill_tokens": (1, 1 << 26),
    "schedule_conservativeness": (0.0, 100.0),
}
#: most entries of ``cuda_graph_bs_override`` (each within ``cuda_graph_max_bs``'s bounds)
MAX_CAPTURE_SIZES = 256


def spec_cuda_graph_batch_sizes(cuda_graph_max_bs: int) -> tuple[int, ...]:
    """``ServerArgs._generate_cuda_graph_batch_sizes`` for a speculative algorithm."""
    capture = (
        list(range(1, 9))
        + list(range(10, 33, 2))
        + list(range(40, 65, 4))
        + list(range(72, 257, 8))
        + list(range(272, cuda_graph_max_bs + 1, 16))
    )
    capture = [bs for bs in capture if bs <= cuda_graph_max_bs]
    if cuda_graph_max_bs not in capture:
        capture.append(cuda_graph_max_bs)
    return tuple(capture)


@dataclass(frozen=True)
class SpecConfig:
    """One scheduler process's speculative-decoding configuration (``ServerArgs``)."""

    #: ``--speculative-num-steps``: draft forward steps per decode iteration.
    speculative_num_steps: int = 3
    #: ``--speculative-eagle-topk``: branching factor of the draft tree.
    speculative_eagle_topk: int = 4
    #: ``--speculative-num-draft-tokens``: tree nodes verified per request (incl. the root).
    speculative_num_draft_tokens: int = 16
    #: The seed's ``--speculative-disable-batch-threshold``: speculate only while the decode
    #: batch has at most this many requests. ``None``: never switch off (upstream v1).
    disable_batch_threshold: int | None = 5
    #: ``--cuda-graph-max-bs``.
    cuda_graph_max_bs: int = 16
    #: ``--max-running-requests`` (SGLang resets it to 48 for the tiny models on the H200).
    max_running_requests: int = 48
    #: Token slots of the target KV pool (``TokenToKVPoolAllocator.size``).
    target_kv_pool_size: int = 65536
    #: Token slots of the draft KV pool (same allocator in v1, so it must equal the target's).
    draft_kv_pool_size: int = 65536
    #: ``--chunked-prefill-size``: most prompt tokens one prefill batch takes.
    chunked_prefill_size: int = 8192
    #: ``--page-size``: tokens per KV page (``PagedTokenToKVPoolAllocator`` when > 1; sglang's
    #: default 1, ``ServerArgs._handle_page_size``). Pools hold whole pages
    #: (``model_runner.py``: ``max_total_num_tokens // page_size * page_size``).
    page_size: int = 1
    #: ``hidden_size`` of the target model config.
    target_hidden_size: int = 8
    #: EAGLE-3 aux hidden states the target captures (``eagle_aux_hidden_state_layer_ids``).
    num_aux_hidden_states: int = 3
    #: ``hidden_size`` of the draft model (``model_config.spec_hidden_size``).
    draft_hidden_size: int = 6
    #: ``--enable-mixed-chunk``. SGLang 0.5.12 refuses it with speculation
    #: (``ServerArgs.check_server_args``); only the ``mixed-reuses-spec-loc`` bug turns it on.
    enable_mixed_chunk: bool = False
    #: ``seq_len_fill_value`` the graph runners write into padded rows.
    seq_len_fill_value: int = 1
    #: Explicit capture list; ``None`` derives it from ``cuda_graph_max_bs``.
    cuda_graph_bs_override: tuple[int, ...] | None = field(default=None)
    #: ``ModelConfig.context_len`` of the target (4096 for the tiny models on the H200).
    context_len: int = 4096
    #: ``--disable-radix-cache`` (sglang's default: the radix cache is on).
    disable_radix_cache: bool = False
    #: ``--max-prefill-tokens``: ``PrefillAdder.rem_input_tokens``.
    max_prefill_tokens: int = 16384
    #: ``--schedule-conservativeness``: scales ``SGLANG_INIT_NEW_TOKEN_RATIO`` (0.7).
    schedule_conservativeness: float = 1.0
    #: ``SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK`` (``environ.py``, default true): a row-count
    #: mismatch in ``EagleDraftInput.filter_batch`` raises ``ValueError`` instead of warning.
    strict_filter_check: bool = True
    #: ``--disable-overlap-schedule``. The v1 family (sglang 0.5.12 ``EAGLEWorker``) runs with it
    #: set; the v2 family (sglang 0.5.17 ``EAGLEWorkerV2``) runs the overlap scheduler
    #: (``specstate.model.sglang_0_5_17``; ``server_args.py::ServerArgs`` of 0.5.17).
    disable_overlap_schedule: bool = True
    #: v2 only: the JSON text of ``--speculative-adaptive-config`` (batch size -> candidate step
    #: counts, sglang 0.5.17 ``adaptive_spec_params.py`` ``_load_adaptive_config``); ``None``: sglang's
    #: ``DEFAULT_ADAPTIVE_CONFIG`` (``--speculative-adaptive`` without a config file).
    speculative_adaptive_config: str | None = None
    #: v2 only: ``--speculative-adaptive`` (``ServerArgs.speculative_adaptive`` of sglang 0.5.17 on). The v2
    #: families model it on by default (their configs carry an adaptive config, or sglang's default);
    #: ``False``: static speculation on ``EAGLEWorkerV2``, the step count, topk and draft tokens of
    #: the launch with no ``AdaptiveController`` (``speculative_adaptive_config`` and the seed's
    #: threshold are then read by no upstream operation: only a user's patch reads the threshold).
    speculative_adaptive: bool = True

    def __post_init__(self) -> None:
        self._check()

    # -- derived values -------------------------------------------------------------
    @functools.cached_property
    def cuda_graph_bs(self) -> tuple[int, ...]:
        """Capture list after ``get_batch_sizes_to_capture``'s ``<= max_running_requests``
        (computed once per config: configs are frozen)."""
        base = self.cuda_graph_bs_override or spec_cuda_graph_batch_sizes(self.cuda_graph_max_bs)
        capture = sorted({bs for bs in base if bs <= self.max_running_requests})
        if max(base) > self.max_running_requests:
            capture = sorted(set(capture) | {self.max_running_requests})
        return tuple(capture)

    # ``Scheduler.init_new_token_ratio`` etc. (``environ.py``: SGLANG_INIT_NEW_TOKEN_RATIO 0.7,
    # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600), computed
    # with the same float operations in the same order as sglang
    @property
    def init_new_token_ratio(self) -> float:
        return min(0.7 * self.schedule_conservativeness, 1.0)

    @property
    def min_new_token_ratio(self) -> float:
        return min(self.init_new_token_ratio * 0.14, 1.0)

    @property
    def new_token_ratio_decay(self) -> float:
        return (self.init_new_token_ratio - self.min_new_token_ratio) / 600

    @property
    def max_req_len(self) -> int:
        """``TpModelWorker.max_req_len``: ``min(context_len - 1, max_token_pool_size - 1)``."""
        return min(self.context_len - 1, self.kv_pool_size - 1)

    @property
    def max_req_input_len(self) -> int:
        """``TpModelWorker`` / ``Scheduler.max_req_input_len``: ``max_req_len - 5``; a prompt this
        long or longer is cut at arrival (``managers/utils.py::validate_input_length``)."""
        return self.max_req_len - 5

    @property
    def req_to_token_row_width(self) -> int:
        """``ReqToTokenPool``'s row (``req_to_token.shape[1]``): ``context_len`` plus the headroom,
        ``4 + num_draft_tokens`` at page size 1 with EAGLE (sglang 0.5.12: ``extra_max_context_len``
        of ``ModelRunnerKVCacheMixin._init_pools`` in ``model_executor/model_runner_kv_cache_mixin.py``;
        0.5.17 / 0.5.23: ``get_req_to_token_extra_context_len`` in ``mem_cache/allocation_sizing.py``,
        of ``max_speculative_num_draft_tokens``, which is the startup count: 0.5.17 refuses a larger
        candidate at start; its wider headroom, ``get_alloc_reserve_per_decode() + page_size - 1``
        (sglang PR #26972), is taken at page size > 1 only, and on 0.5.23 for UNO too). Under
        adaptive speculation the headroom is of the largest candidate's draft tokens
        (``max_speculative_num_draft_tokens``): 0.5.23 starts at the middle candidate and sizes the
        row for the largest. Paged under the overlap worker (``disable_overlap_schedule`` off), the
        headroom is at least the decode reservation plus ``page_size - 1`` ("kv_allocated_len is
        page-aligned ... near the context limit the aligned reserve can overshoot by page_size - 1"):
        twice ``max(steps * topk, max draft tokens)`` (topk 1, the overlap families' only topk)."""
        extra = 4 + self.max_speculative_num_draft_tokens
        if self.page_size > 1 and not self.disable_overlap_schedule:
            reserve = 2 * max((self.speculative_num_steps or 1) * self.speculative_eagle_topk,
                              self.max_speculative_num_draft_tokens)
            extra = max(extra, reserve + self.page_size - 1)
        return self.context_len + extra

    @property
    def max_speculative_num_draft_tokens(self) -> int:
        """``ServerArgs.max_speculative_num_draft_tokens`` (sglang 0.5.17's ``server_args.py``, 0.5.23's
        ``arg_groups/overrides.py``): the launch's draft tokens; under adaptive speculation (topk 1)
        at least the largest candidate step count of the adaptive config's slots + 1
        (``resolve_candidate_steps_from_config``). A v1 config carries no adaptive config."""
        text = self.speculative_adaptive_config
        if not self.speculative_adaptive or text is None:
            return self.speculative_num_draft_tokens
        return max(self.speculative_num_draft_tokens, _largest_candidate_step(text) + 1)

    @property
    def kv_pool_size(self) -> int:
        return self.target_kv_pool_size

    @property
    def max_accept_len(self) -> int:
        """Tokens one verify can accept for a request: ``spec_steps + 1``."""
        return self.speculative_num_steps + 1

    @property
    def extend_hidden_size(self) -> int:
        """``EagleDraftExtendInput.hidden_size_for``: target hidden x aux layers (EAGLE-3)."""
        return self.target_hidden_size * self.num_aux_hidden_states

    @property
    def draft_slots_per_req(self) -> int:
        """``_draft_preprocess_decode``: ``alloc_len_per_decode = num_steps * topk``."""
        return self.speculative_num_steps * self.speculative_eagle_topk

    @property
    def decode_reserve_per_req(self) -> int:
        """``ScheduleBatch.new_tokens_required_next_decode`` for spec v1: ``max(steps * topk,
        draft_tokens)``; paged, ``len_per_topk`` and ``spec_tokens`` rounded up to pages (topk > 1:
        ``ceil_align(steps + page_size)``, "last partial page and ceil alignment")."""
        page, steps, topk, ndt = (self.page_size, self.speculative_num_steps, self.speculative_eagle_topk,
                                  self.speculative_num_draft_tokens)
        if page > 1:
            steps = _ceil_align(steps + page, page) if topk > 1 else _ceil_align(steps, page)
            ndt = _ceil_align(ndt, page)
        return max(steps * topk, ndt)

    @property
    def req_to_token_width(self) -> int:
        """Columns of ``req_to_token`` (``model_runner_kv_cache_mixin.py::ModelRunnerKVCacheMixin._init_pools``:
        ``context_len + extra_max_context_len``, 4 plus ``speculative_num_draft_tokens``)."""
        return self.context_len + 4 + self.speculative_num_draft_tokens

    def speculation_allowed(self, decode_bs: int) -> bool:
        """The seed's switch rule: speculate iff the decode batch is within the threshold."""
        return self.disable_batch_threshold is None or at_most(decode_bs, self.disable_batch_threshold)

    # -- validation and (de)serialisation ------------------------------------------
    def _check(self) -> None:
        self._check_types()
        steps, topk, ndt = (
            self.speculative_num_steps,
            self.speculative_eagle_topk,
            self.speculative_num_draft_tokens,
        )
        _require(steps >= 1, "speculative_num_steps", ">= 1", steps)
        _require(topk >= 1, "speculative_eagle_topk", ">= 1", topk)
        _require(ndt >= 1, "speculative_num_draft_tokens", ">= 1", ndt)
        if topk == 1:
            # ServerArgs._handle_speculative_decoding: topk 1 forces num_steps + 1 draft tokens.
            _require(ndt == steps + 1, "speculative_num_draft_tokens", f"== num_steps + 1 = {steps + 1} when topk == 1", ndt)
        else:
            # organize_draft_results picks ndt - 1 of topk + (steps - 1) * topk**2 scored candidates.
            most = topk + (steps - 1) * topk * topk + 1
            _require(ndt <= most, "speculative_num_draft_tokens", f"<= topk + (steps - 1) * topk**2 + 1 = {most}", ndt)
        _require(self.page_size >= 1, "page_size", ">= 1", self.page_size)
        # ServerArgs.check_server_args (run by Engine._launch_subprocesses): "chunked_prefill_size must be
        # divisible by page_size" (chunked prefill off, the bound, is any length)
        _require(self.chunked_prefill_size % self.page_size == 0 or self.chunked_prefill_size == BOUNDS[
            "chunked_prefill_size"][1], "chunked_prefill_size", f"a multiple of page_size = {self.page_size} "
                 "(sglang asserts it)", self.chunked_prefill_size)
        _require(self.target_kv_pool_size % self.page_size == 0, "target_kv_pool_size",
                 f"a multiple of page_size = {self.page_size} (the pool holds whole pages)", self.target_kv_pool_size)
        _require(self.cuda_graph_max_bs >= 1, "cuda_graph_max_bs", ">= 1", self.cuda_graph_max_bs)
        _require(self.max_running_requests >= 1, "max_running_requests", ">= 1", self.max_running_requests)
        _require(self.chunked_prefill_size >= 1, "chunked_prefill_size", ">= 1", self.chunked_prefill_size)
        _require(
            self.target_kv_pool_size == self.draft_kv_pool_size,
            "draft_kv_pool_size",
            f"== target_kv_pool_size = {self.target_kv_pool_size} (v1 shares one allocator)",
            self.draft_kv_pool_size,
        )
        _require(self.target_kv_pool_size >= 1, "target_kv_pool_size", ">= 1", self.target_kv_pool_size)
        _require(self.target_hidden_size >= 1 and self.draft_hidden_size >= 1, "hidden sizes", ">= 1", (self.target_hidden_size, self.draft_hidden_size))
        if self.disable_batch_threshold is not None:
            _require(self.disable_batch_threshold >= 0, "disable_batch_threshold", ">= 0 or None", self.disable_batch_threshold)

    def _check_types(self) -> None:
        """Strict types (no ``bool`` for an int, no ``"3"``, no ``2.7``) and ``BOUNDS``."""
        check_fields({name: getattr(self, name) for name in self.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        """Every field; the v2 family's three (``disable_overlap_schedule``,
        ``speculative_adaptive_config``, ``speculative_adaptive``) only when not at their defaults, so
        a v1 config (and an adaptive v2 one) reads and hashes as it did before they existed."""
        out = {f: getattr(self, f) for f in self.__dataclass_fields__}
        if self.cuda_graph_bs_override is not None:
            out["cuda_graph_bs_override"] = list(self.cuda_graph_bs_override)
        for f in ("disable_overlap_schedule", "speculative_adaptive_config", "speculative_adaptive"):
            if out[f] == self.__dataclass_fields__[f].default:
                del out[f]
        return out

    #: deprecated: ``specstate.schema.config_from_data`` reads a config from JSON data (the
    #: schema owns the JSON readers; the model imports no schema)
    from_json = staticmethod(moved_function("SpecConfig.from_json", "specstate.schema:config_from_data"))

    def with_(self, **changes: Any) -> "SpecConfig":
        unknown = sorted(set(changes) - set(self.__dataclass_fields__))
        if unknown:
            raise InvalidConfig(f"Expected SpecConfig fields from {sorted(self.__dataclass_fields__)} but got {unknown}")
        return replace(self, **changes)


def check_fields(values: Mapping[str, Any]) -> None:
    """Strict types (no ``bool`` for an int, no ``"3"``, no ``2.7``) and ``BOUNDS`` of some
    ``SpecConfig`` fields (a whole config, or a variant's ``config_changes``: ``check_changes``)."""
    fields = SpecConfig.__dataclass_fields__
    for name, value in values.items():
        kind = str(fields[name].type)
        if value is None and "None" in kind:
            continue
        if kind.startswith("bool"):
            _require(type(value) is bool, name, "a bool", value)
        elif kind.startswith("float"):
            _require(type(value) in (int, float) and math.isfinite(value), name, "a finite number", value)
        elif kind.startswith("int"):
            _require(type(value) is int, name, "an integer", value)
        elif kind.startswith("str"):
            _require(type(value) is str, name, "a string", value)
        elif name == "cuda_graph_bs_override":
            _check_capture_list(value)
        if name in BOUNDS and type(value) is not bool:
            lo, hi = BOUNDS[name]
            _require(lo <= value <= hi, name, f"in [{lo}, {hi}]", value)


def check_changes(changes: Mapping[str, Any]) -> None:
    """A partial config (a variant's ``config_changes``): field names, strict types and
    ``BOUNDS``; the cross-field rules wait for the config the changes apply to."""
    unknown = sorted(set(changes) - set(SpecConfig.__dataclass_fields__))
    if unknown:
        raise InvalidConfig(f"Expected SpecConfig fields from {sorted(SpecConfig.__dataclass_fields__)} but got {unknown}")
    check_fields(changes)


def _check_capture_list(value: object) -> None:
    lo, hi = BOUNDS["cuda_graph_max_bs"]
    ok = (isinstance(value, tuple) and 1 <= len(value) <= MAX_CAPTURE_SIZES
          and all(type(b) is int and lo <= b <= hi for b in value))
    _require(ok, "cuda_graph_bs_override", f"a tuple of 1..{MAX_CAPTURE_SIZES} integers in [{lo}, {hi}] or None",
             value)


def _ceil_align(n: int, page: int) -> int:
    return -(-n // page) * page


def _require(ok: bool, name: str, expected: str, got: object) -> None:
    if not ok:
        shown = repr(got)
        raise InvalidConfig(f"Expected {name} {expected} but got {name}={shown[:80]}{'...' if len(shown) > 80 else ''}")


@functools.lru_cache(maxsize=64)
def _largest_candidate_step(text: str) -> int:
    """The largest ``candidate_steps`` entry over the adaptive config's batch-size slots (a slot
    without its own list takes the top-level one, as ``AdaptiveStepSlot(cfg={**cfg, **entry})``
    merges them); -1 where none is given. The text was validated where the config was prepared."""
    cfg = json.loads(text)
    shared = cfg.get("candidate_steps") or []
    steps = [int(x) for k, e in cfg.items() if str(k).isdigit() and isinstance(e, dict)
             for x in (e.get("candidate_steps", shared) or [])]
    return max(steps, default=-1)
