"""The vLLM 0.34.0 engine configuration the model runs under, and DSD's batch-size lookup.

Every field is the vLLM config field it stands for (``vllm/config/...``); the defaults are a small
CPU-sized engine, not vLLM's defaults, except where a field says so.

- ``config/speculative.py::SpeculativeConfig.num_speculative_tokens_per_batch_size``: the DSD
  schedule, ``[[start, end, K], ...]`` (``schedule`` here; ``None``: static K).
- ``v1/spec_decode/dynamic/utils.py::build_dynamic_sd_schedule_lookup``: mirrored line by line in
  :func:`build_dynamic_sd_schedule_lookup` (with its validation,
  ``v1/spec_decode/dynamic/utils.py::validate_and_normalize_dynamic_sd_schedule``).
- ``config/vllm.py::VllmConfig.get_decode_cudagraph_query_lens``: :func:`decode_cudagraph_query_lens`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from specstate.errors import InvalidConfig

__all__ = ["VllmEngineConfig", "build_dynamic_sd_schedule_lookup", "validate_and_normalize_dynamic_sd_schedule",
           "decode_cudagraph_query_lens", "cdiv", "DEFAULT_CAPTURE_SIZES"]

Schedule = tuple[tuple[int, int, int], ...]

#: vLLM's default graph sizes (``config/compilation.py::CompilationConfig.cudagraph_capture_sizes``'s
#: default list: 1, 2, 4, then every 8 up to 512), cut to the engine's limits at ``start``
DEFAULT_CAPTURE_SIZES: tuple[int, ...] = (1, 2, 4) + tuple(range(8, 513, 8))


def cdiv(a: int, b: int) -> int:
    """``vllm/utils/math_utils.py::cdiv``."""
    return -(a // -b)


@dataclass(frozen=True)
class VllmEngineConfig:
    """One ``vllm serve`` launch as the model holds it."""

    #: ``config/scheduler.py::SchedulerConfig.max_num_seqs``
    max_num_seqs: int = 8
    #: ``config/scheduler.py::SchedulerConfig.max_num_batched_tokens``
    max_num_batched_tokens: int = 64
    #: ``config/model.py::ModelConfig.max_model_len``
    max_model_len: int = 256
    #: ``config/cache.py::CacheConfig.block_size``
    block_size: int = 16
    #: ``config/cache.py::CacheConfig.num_gpu_blocks`` (the block pool; one of them is the null block)
    num_gpu_blocks: int = 64
    #: ``config/speculative.py::SpeculativeConfig.num_speculative_tokens`` (0: no speculation)
    num_speculative_tokens: int = 3
    #: ``config/speculative.py::SpeculativeConfig.num_speculative_tokens_per_batch_size``
    schedule: Schedule | None = ((1, 4, 3), (5, 4096, 0))
    #: ``config/speculative.py::SpeculativeConfig.method``
    method: str = "eagle3"
    #: ``config/scheduler.py::SchedulerConfig.async_scheduling`` (``AsyncScheduler``)
    async_scheduling: bool = False
    #: ``config/parallel.py::ParallelConfig.data_parallel_size``
    data_parallel_size: int = 1
    #: ``config/scheduler.py::SchedulerConfig.long_prefill_token_threshold``
    long_prefill_token_threshold: int = 0
    #: ``config/scheduler.py::SchedulerConfig.enable_chunked_prefill``
    enable_chunked_prefill: bool = True
    #: ``config/compilation.py::CompilationConfig.cudagraph_mode``: FULL_AND_PIECEWISE, PIECEWISE, FULL, NONE
    cudagraph_mode: str = "FULL_AND_PIECEWISE"
    #: ``config/compilation.py::CompilationConfig.cudagraph_capture_sizes`` (``None``: the default list)
    capture_sizes: tuple[int, ...] | None = None

    def with_(self, **kw: Any) -> "VllmEngineConfig":
        return replace(self, **kw)

    @property
    def num_lookahead_tokens(self) -> int:
        """``config/vllm.py::VllmConfig.num_lookahead_tokens``: EAGLE's speculator reserves K slots
        (``v1/worker/gpu/spec_decode/eagle/config.py::EagleSpeculatorConfig.num_lookahead_tokens``)."""
        return self.num_speculative_tokens if self.num_speculative_tokens > 0 else 0

    def validate(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size", "num_gpu_blocks"):
            if getattr(self, name) < 1:
                raise InvalidConfig(f"Expected {name} >= 1 but got {getattr(self, name)}")
        if self.num_speculative_tokens < 0:
            raise InvalidConfig(f"Expected num_speculative_tokens >= 0 but got {self.num_speculative_tokens}")
        if self.cudagraph_mode not in ("FULL_AND_PIECEWISE", "PIECEWISE", "FULL", "NONE", "FULL_DECODE_ONLY"):
            raise InvalidConfig(f"Expected a cudagraph_mode from FULL_AND_PIECEWISE, PIECEWISE, FULL, "
                                f"FULL_DECODE_ONLY, NONE but got {self.cudagraph_mode!r}")
        if self.schedule is not None:
            validate_and_normalize_dynamic_sd_schedule([list(e) for e in self.schedule])


def validate_and_normalize_dynamic_sd_schedule(value: object) -> list[tuple[int, int, int]]:
    """``v1/spec_decode/dynamic/utils.py::validate_and_normalize_dynamic_sd_schedule`` (its
    ``ValueError`` messages, raised as :class:`InvalidConfig`, a ``ValueError``)."""
    if value is None:
        raise InvalidConfig("num_speculative_tokens_per_batch_size is required for dynamic speculative decoding.")
    if not isinstance(value, (list, tuple)):
        raise InvalidConfig("num_speculative_tokens_per_batch_size must be a non-empty list of "
                            "(range_start, range_end, num_speculative_tokens) entries.")
    if not value:
        raise InvalidConfig("num_speculative_tokens_per_batch_size must not be empty.")
    parsed: list[tuple[int, int, int]] = []
    for entry in value:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise InvalidConfig("Each num_speculative_tokens_per_batch_size entry must be a 3-item sequence: "
                                "(range_start, range_end, num_speculative_tokens).")
        try:
            start, end, k = int(entry[0]), int(entry[1]), int(entry[2])
        except (TypeError, ValueError) as e:
            raise InvalidConfig(f"num_speculative_tokens_per_batch_size entry {entry!r}: {e}") from None
        if start <= 0 or end <= 0:
            raise InvalidConfig(f"Batch-size range ({start}, {end}) must be positive.")
        if start > end:
            raise InvalidConfig(f"Batch-size range start must be <= end for ({start}, {end}, {k}).")
        if k < 0:
            raise InvalidConfig("num_speculative_tokens_per_batch_size values must be >= 0.")
        parsed.append((start, end, k))
    parsed.sort(key=lambda e: e[0])
    previous_end = 0
    for start, end, _ in parsed:
        if start <= previous_end:
            raise InvalidConfig("Batch-size ranges must be non-overlapping and sorted.")
        previous_end = end
    if parsed[0][0] != 1:
        raise InvalidConfig("The first batch-size range must start at 1 so every runtime batch size has a "
                            "defined schedule.")
    return parsed


def build_dynamic_sd_schedule_lookup(schedule: object, vllm_max_batch_size: int,
                                     vllm_num_speculative_tokens: int) -> tuple[int, ...]:
    """``v1/spec_decode/dynamic/utils.py::build_dynamic_sd_schedule_lookup``: the dense, 1-indexed
    batch size -> K table (index 0 unused); gaps carry the previous K forward, every K is capped at
    ``num_speculative_tokens``."""
    if vllm_max_batch_size <= 0:
        raise InvalidConfig("vllm_max_batch_size must be > 0.")
    if vllm_num_speculative_tokens <= 0:
        raise InvalidConfig("vllm_num_speculative_tokens must be > 0.")
    parsed = validate_and_normalize_dynamic_sd_schedule(schedule)
    dense = [0] * (vllm_max_batch_size + 1)
    next_bs = 1
    last_k: int | None = None
    for start, end, k in parsed:
        if start > next_bs and last_k is not None:
            for bs in range(next_bs, min(start, vllm_max_batch_size + 1)):
                dense[bs] = min(vllm_num_speculative_tokens, last_k)
        for bs in range(max(start, next_bs), min(end, vllm_max_batch_size) + 1):
            dense[bs] = min(vllm_num_speculative_tokens, k)
        next_bs = max(next_bs, end + 1)
        last_k = k
        if next_bs > vllm_max_batch_size:
            break
    assert last_k is not None  # validate_and_normalize_dynamic_sd_schedule refuses an empty schedule
    for bs in range(next_bs, vllm_max_batch_size + 1):
        dense[bs] = min(vllm_num_speculative_tokens, last_k)
    return tuple(dense)


def decode_cudagraph_query_lens(config: VllmEngineConfig, decode_query_len: int, *,
                                guard: bool = True) -> dict[int, int]:
    """``config/vllm.py::VllmConfig.get_decode_cudagraph_query_lens``: each uniform decode query length
    of a runner whose widest is ``decode_query_len`` -> the most requests its batches have. With DSD,
    ``k + num_new_sampled_tokens`` for every K of the lookup. ``guard=False`` drops upstream's
    ``num_new_sampled_tokens <= 0`` early return (the width formula applied to a one-token draft
    runner: vllm#48494's class)."""
    num_new_sampled = decode_query_len - config.num_speculative_tokens
    if config.schedule is None or (guard and num_new_sampled <= 0):
        return {decode_query_len: config.max_num_seqs}
    dense = build_dynamic_sd_schedule_lookup([list(e) for e in config.schedule], config.max_num_seqs,
                                             config.num_speculative_tokens)
    return {k + num_new_sampled: bs for bs, k in enumerate(dense) if bs > 0}
