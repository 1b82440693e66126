"""Batch-size-aware adaptive speculation: which step count a decode batch runs with.

Owns: the adaptive controller's parameters (``AdaptiveParams``): one slot per batch-size key of
``--speculative-adaptive-config``, each with its candidate step counts, its EMA of accepted
drafts and its batch counter, plus the capture list the controller pads batch sizes to.

Mirrors sglang 0.5.17 ``speculative/adaptive_spec_params.py``:

- ``_load_adaptive_config`` / ``DEFAULT_ADAPTIVE_CONFIG`` (``config_from_json``): integer-string
  keys are slots, every other key a knob shared by all slots (a slot's own keys win);
- ``AdaptiveStepSlot`` (``Slot``): ``update`` (EMA, warm-up, update interval) and
  ``_recompute_params`` (drop / rise thresholds with hysteresis, the zero-step probe, the EMA
  ceiling), float operations in sglang's order so EMA values agree bit for bit;
- ``AdaptiveSpeculativeParams`` (``AdaptiveParams``): ``_route`` = pad the batch size to the
  CUDA-graph capture list, then the closest slot at or below it (``_find_closest_bs``);
  ``cuda_graph_bs_for_step``; the union of candidate steps.

The routing key is the raw batch size unless the controller was given a capture list:
``EAGLEWorkerV2.init_cuda_graphs`` passes ``get_exec().graph.cuda_graph_bs_decode``, which is
the *explicit* ``--cuda-graph-bs-decode`` list (``None`` when only ``--cuda-graph-max-bs-decode``
is set), so only an explicit list pads (``routing_capture_list``).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from specstate.errors import InvalidConfig
from specstate.model.bs_compare import floor_key, padded
from specstate.model.values import cached_hash, evolve

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig

__all__ = ["DEFAULT_ADAPTIVE_CONFIG", "H200_ADAPTIVE_CONFIG", "Slot", "AdaptiveParams", "config_from_json", "initial_params",
           "candidate_steps", "max_draft_tokens", "candidate_steps_of", "max_draft_tokens_of"]

#: ``adaptive_spec_params.py::DEFAULT_ADAPTIVE_CONFIG`` (used when no config file is given)
DEFAULT_ADAPTIVE_CONFIG: dict[str, dict[str, Any]] = {
    "1": {"candidate_steps": [1, 3, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}

#: ``../shared/gpu/sglang-0.5.17/adaptive_config.json``, the config replayed on the H200: 3 steps up
#: to batch size 5, drafting off (steps 0, the trivial verify) from 6
H200_ADAPTIVE_CONFIG = '{"1": {"candidate_steps": [3]}, "6": {"candidate_steps": [0]}}'


@cached_hash
@dataclass(frozen=True)
class Slot:
    """``AdaptiveStepSlot``: one batch-size key's step choice and its acceptance EMA."""

    candidates: tuple[int, ...]  #: ``candidate_steps`` (sorted, unique)
    current_steps: int
    ema_accept_len: float  #: EMA of accepted drafts per request (bonus excluded)
    batch_count: int = 0  #: ``_batch_count``
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    down_hysteresis: float = -0.25
    up_hysteresis: float = 0.0
    ceiling_coeff: float = 0

    def update(self, num_correct_drafts_per_req: tuple[int, ...]) -> "Slot":
        """``AdaptiveStepSlot.update``: the EMA (only while drafting), then a recompute on
        every ``update_interval``-th batch after ``warmup_batches``."""
        if not num_correct_drafts_per_req:
            return self
        ema = self.ema_accept_len
        if self.current_steps > 0:
            batch_avg = sum(num_correct_drafts_per_req) / len(num_correct_drafts_per_req)
            ema = (1 - self.ema_alpha) * ema + self.ema_alpha * batch_avg
        s = evolve(self, ema_accept_len=ema, batch_count=self.batch_count + 1)
        if s.batch_count <= s.warmup_batches or (s.batch_count - s.warmup_batches) % s.update_interval != 0:
            return s
        return s.recompute()

    def recompute(self) -> "Slot":
        """``AdaptiveStepSlot._recompute_params``."""
        cands, old = self.candidates, self.current_steps
        idx = cands.index(old)
        if old == 0:  # probe the smallest positive step after a zero-step interval
            idx = min(idx + 1, len(cands) - 1)
            ema = self.ema_accept_len
            if cands[idx] > 0 and ema < 0:
                ema = float(cands[idx] - 1)
            return evolve(self, current_steps=cands[idx], ema_accept_len=ema)
        start = idx
        while idx > 0:
            prev = cands[idx - 1]
            drop = (0.5 if prev == 0 else prev - 0.5) + self.down_hysteresis
            if self.ema_accept_len > drop:
                break
            idx -= 1
        if idx == start:
            while idx < len(cands) - 1 and self.ema_accept_len > cands[idx] - 0.5 + self.up_hysteresis:
                idx += 1
        return evolve(self, current_steps=self._ceiling(idx, old))

    def _ceiling(self, idx: int, old: int) -> int:
        """The EMA ceiling (``ceiling_coeff > 0``): caps a step that did not rise."""
        cands = self.candidates
        target = cands[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if old >= target > ceiling:
                while idx > 0 and cands[idx] > ceiling:
                    idx -= 1
                target = cands[idx]
        return target


@cached_hash
@dataclass(frozen=True)
class AdaptiveParams:
    """``AdaptiveSpeculativeParams``: the slots by batch-size key and the routing list."""

    slots: tuple[tuple[int, Slot], ...]  #: (batch-size key, slot), keys ascending
    #: ``_cuda_graph_bs``: the capture list batch sizes are padded to (``None``: no padding)
    cuda_graph_bs: tuple[int, ...] | None = None

    @property
    def keys(self) -> tuple[int, ...]:
        return tuple(k for k, _ in self.slots)

    def slot_key(self, batch_size: int) -> int:
        """``_route``: pad to the capture list (``_pad_to_cuda_graph_bs``), then
        ``_find_closest_bs``."""
        bs = batch_size
        if self.cuda_graph_bs is not None:
            bs = padded(self.cuda_graph_bs, batch_size) or batch_size
        return floor_key(self.keys, bs)

    def slot(self, key: int) -> Slot:
        return dict(self.slots)[key]

    def steps_for_batch(self, batch_size: int) -> int:
        """``get_steps_for_batch``."""
        return self.slot(self.slot_key(batch_size)).current_steps

    def on_verify_complete(self, num_correct_drafts_per_req: tuple[int, ...],
                           batch_size: int) -> tuple["AdaptiveParams", int | None]:
        """``on_verify_complete``: feed the routed slot; the new step count if it changed."""
        key = self.slot_key(batch_size)
        old = self.slot(key)
        new = old.update(num_correct_drafts_per_req)
        params = evolve(self, slots=tuple((k, new if k == key else s) for k, s in self.slots))
        changed = new.current_steps if new.current_steps != old.current_steps else None
        return params, changed

    def cuda_graph_bs_for_step(self, step: int) -> tuple[int, ...] | None:
        """``cuda_graph_bs_for_step``: the capture sizes whose slot can choose ``step``."""
        if self.cuda_graph_bs is None:
            return None
        return tuple(v for v in self.cuda_graph_bs if step in self.slot(self.slot_key_unpadded(v)).candidates)

    def slot_key_unpadded(self, bs: int) -> int:
        return floor_key(self.keys, bs)

    def restored(self, slots: Mapping[int, tuple[int, float, int]]) -> "AdaptiveParams":
        """The slots as a running engine left them (key -> ``current_steps``, ``ema_accept_len``,
        ``_batch_count``): ``AdaptiveController`` lives as long as the worker
        (``Scheduler.flush_cache`` does not reset it), so a later workload starts from them."""
        if set(slots) != set(self.keys):
            raise InvalidConfig(f"Expected adaptive slots {list(self.keys)} but got {sorted(slots)}")
        out = []
        for k, s in self.slots:
            steps, ema, count = slots[k]
            if steps not in s.candidates:
                raise InvalidConfig(f"Expected slot {k}'s current_steps in {list(s.candidates)} but got {steps}")
            out.append((k, evolve(s, current_steps=int(steps), ema_accept_len=float(ema), batch_count=int(count))))
        return evolve(self, slots=tuple(out))


#: the knobs a slot reads (``AdaptiveStepSlot.__init__``) and what each must be for its arithmetic
#: (``update``, ``_recompute_params``) to run: sglang reads them unchecked, so ``update_interval: 0``
#: is its ``ZeroDivisionError`` and ``ema_alpha: "x"`` its ``TypeError`` at the first verify; here
#: they are refused where the config is read. ``(integer only, lowest, highest)``, bools refused.
KNOBS: dict[str, tuple[bool, float, float]] = {
    "ema_alpha": (False, 0.0, 1.0),
    "update_interval": (True, 1, 1 << 31),
    "warmup_batches": (True, 0, 1 << 31),
    "down_hysteresis": (False, -1e6, 1e6),
    "up_hysteresis": (False, -1e6, 1e6),
    "ceiling_coeff": (False, -1e6, 1e6),
}
MAX_STEPS = 64  #: the largest candidate step (sglang takes any int; the model's configs stop far below)
MAX_KEY_DIGITS = 9  #: a batch-size key's digits (``int()`` of a 4,300-digit key raises)


def _knob(where: str, name: str, value: Any) -> None:
    integer, lo, hi = KNOBS[name]
    kinds = (int,) if integer else (int, float)
    if type(value) not in kinds or not (math.isfinite(value) and lo <= value <= hi):
        kind = "an int" if integer else "a finite number"
        bounds = f"[{int(lo)}, {int(hi)}]" if integer else f"[{lo:g}, {hi:g}]"
        raise InvalidConfig(f"Expected {where}{name} {kind} in {bounds} but got {value!r}"[:300])


def _entry(key: str, entry: Any, shared: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(entry, dict):
        raise InvalidConfig(f"Expected BS {key[:20]}: an object with candidate_steps but got {type(entry).__name__}")
    steps = entry.get("candidate_steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
        raise InvalidConfig(f"Expected BS {key}: candidate_steps as a list of non-negative ints but got {steps!r}"[:300])
    if max(steps) > MAX_STEPS:
        raise InvalidConfig(f"Expected BS {key}: candidate_steps of at most {MAX_STEPS} but got {max(steps)}")
    merged = {**shared, **entry}
    for name in KNOBS:
        if name in merged:
            _knob(f"BS {key}: ", name, merged[name])
    return merged


@functools.lru_cache(maxsize=64)
def config_from_json(text: str | None) -> tuple[tuple[int, Mapping[str, Any]], ...]:
    """``_load_adaptive_config``: (batch-size key, merged slot config) pairs, keys ascending; every
    knob a slot's arithmetic reads checked too (``KNOBS``), and nesting bounded before parsing."""
    cfg = config_raw(text)
    shared = {k: v for k, v in cfg.items() if not str(k).isdigit()}
    out = []
    for key, entry in cfg.items():
        if not str(key).isdigit():
            continue
        if len(key) > MAX_KEY_DIGITS or not key.isascii():
            raise InvalidConfig(f"Expected a batch-size key of at most {MAX_KEY_DIGITS} ASCII digits but got "
                                f"{key[:20]!r}{'...' if len(key) > 20 else ''}")
        out.append((int(key), _entry(key, entry, shared)))
    if not out:
        raise InvalidConfig(f"Expected speculative_adaptive_config with at least one integer-string BS key, "
                            f"e.g. {{\"1\": {{\"candidate_steps\": [1, 3, 7]}}}}, but got keys {list(cfg)[:8]}")
    return tuple(sorted(out))


def ignored_keys(text: str | None) -> tuple[str, ...]:
    """The keys of an adaptive config that sglang reads past without a word
    (``adaptive_spec_params.py::_load_adaptive_config`` skips every key that is not all digits as a
    slot, and each slot is ``AdaptiveStepSlot(cfg={**cfg, **entry})``, whose ``__init__`` reads
    ``candidate_steps`` and the ``KNOBS`` only): a top-level key that is neither a batch size nor a
    knob (a top-level ``candidate_steps`` too: every slot's own overrides it), and a slot's key
    other than those. Each is accepted, as sglang accepts it, and listed by whoever reads it."""
    cfg = config_raw(text)
    out = [k for k in cfg if not str(k).isdigit() and k not in KNOBS]
    for key, entry in cfg.items():
        if str(key).isdigit() and isinstance(entry, dict):
            out += [f"{key}.{k}" for k in entry if k != "candidate_steps" and k not in KNOBS]
    return tuple(out)


def config_raw(text: str | None) -> Mapping[str, Any]:
    """The adaptive config's JSON object as written (the release's default for ``None``)."""
    from specstate._parsing import parse_json

    cfg = DEFAULT_ADAPTIVE_CONFIG if text is None else parse_json(text, "speculative_adaptive_config",
                                                                   what="a JSON object", error=InvalidConfig)
    if not isinstance(cfg, dict):
        raise InvalidConfig(f"Expected speculative_adaptive_config as a JSON object but got {type(cfg).__name__}")
    return cfg


def _slot(initial_steps: int, cfg: Mapping[str, Any]) -> Slot:
    cands = tuple(sorted(set(cfg["candidate_steps"])))
    current = initial_steps if initial_steps in cands else cands[len(cands) // 2]
    return Slot(cands, current, float(current - 1), 0, cfg.get("ema_alpha", 0.2), cfg.get("update_interval", 5),
                cfg.get("warmup_batches", 10), cfg.get("down_hysteresis", -0.25), cfg.get("up_hysteresis", 0.0),
                cfg.get("ceiling_coeff", 0))


def initial_params(text: str | None, initial_steps: int, routing_bs: tuple[int, ...] | None) -> AdaptiveParams:
    """``AdaptiveSpeculativeParams(initial_steps, cfg_path)`` + ``set_cuda_graph_bs``."""
    slots = tuple((k, _slot(initial_steps, c)) for k, c in config_from_json(text))
    return AdaptiveParams(slots, tuple(sorted(routing_bs)) if routing_bs else None)


def candidate_steps(text: str | None) -> tuple[int, ...]:
    """``resolve_candidate_steps_from_config``: the union of every slot's candidates."""
    return tuple(sorted({s for _, c in config_from_json(text) for s in c["candidate_steps"]}))


def max_draft_tokens(text: str | None) -> int:
    """``ServerArgs.max_speculative_num_draft_tokens`` under adaptive (topk 1): max step + 1."""
    return max(candidate_steps(text)) + 1


def candidate_steps_of(config: "SpecConfig") -> tuple[int, ...]:
    """The step counts a config's worker runs with: the adaptive candidates (``candidate_steps``),
    or, for a static launch (no ``--speculative-adaptive``), the launch's step count alone
    (``EAGLEWorkerV2.__init__`` builds no ``AdaptiveController`` then, and
    ``eagle_worker_v2.py::EAGLEWorkerV2.init_cuda_graphs`` registers and builds no runtime state)."""
    if not config.speculative_adaptive:
        return (config.speculative_num_steps,)
    return candidate_steps(config.speculative_adaptive_config)


def max_draft_tokens_of(config: "SpecConfig") -> int:
    """``ServerArgs.max_speculative_num_draft_tokens``: ``speculative_num_draft_tokens`` without
    ``--speculative-adaptive``, the largest candidate + 1 with it (``max_draft_tokens``)."""
    if not config.speculative_adaptive:
        return config.speculative_num_draft_tokens
    return max_draft_tokens(config.speculative_adaptive_config)
