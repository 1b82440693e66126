"""A multi-rank failure as text and as a trace file; the shortest burst that fails; delta debugging.

The text of a rank disagreement (what ``specstate check`` prints) reads, for the failing step,
the gathered record and, per group of ranks that agree, the path they took and the collective they
entered::

    step 43 (decode): MLP sync gathered num_tokens [6, 5, 5, 5, 5, 5, 5, 5]
      rank 0: plain (decode, 6 rows) -> target:dp-gather MAX_LEN sizes [6, ...] own 6 (eager)
      ranks 1-7: spec (decode, 5 rows) -> target:dp-gather MAX_LEN sizes [96, ...] own 96 (graph TARGET_VERIFY@6)

The trace file is JSON (``{"format": 1, "multirank": {...}, "config", "variant", "actions",
"violation"}``), written atomically beside the single-rank traces; ``load_multi_trace`` reads it
back and ``specstate reproduce`` replays it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from specstate.model import Action, Arrive, SpecConfig, Step
from specstate.multirank._config import RankConfig
from specstate.multirank._invariants import grouped
from specstate.multirank._routing import multi_action_from_data, multi_action_to_json
from specstate.multirank._run import MultiResult, make_model, run_multi
from specstate.multirank._step import MultiModel, MultiOutcome

__all__ = ["format_iteration", "format_multi_result", "save_multi_trace", "load_multi_trace", "shortest_burst",
           "ddmin_multi", "is_multi_trace"]


def format_iteration(o: MultiOutcome) -> str:
    it = o.iteration
    if it is None:
        return f"  step {o.state.step_index}: {multi_action_to_json(o.action)}"
    sync = it.syncs[-1]
    kind = "extend" if sync.is_extend_in_batch else "decode"
    lines = [f"  step {it.step} ({kind}): MLP sync ({sync.purpose}) gathered num_tokens {list(sync.global_num_tokens)}"
             + (f", decision {it.decision}" if it.decision else "")]
    texts = []
    for p, cs in zip(it.paths, it.collectives):
        target = [c for c in cs if c.kind.startswith("target:")]
        texts.append(f"{p.path} ({p.batch}, {p.rows} rows) -> " + (target[0].describe() if target else "no target forward"))
    lines += [f"    {part}" for part in grouped(texts).split("; ")]
    return "\n".join(lines)


def _compact(actions: Sequence[Action]) -> list[str]:
    """Runs of equal actions as ``N x action``."""
    out: list[str] = []
    i = 0
    while i < len(actions):
        j = i
        while j < len(actions) and actions[j] == actions[i]:
            j += 1
        text = json.dumps(multi_action_to_json(actions[i]))
        out.append(f"{i + 1}-{j}: {j - i} x {text}" if j - i > 1 else f"{i + 1}: {text}")
        i = j
    return out


def format_multi_result(r: MultiResult, *, title: str, trace_path: Path | None = None) -> str:
    if r.ok:
        return f"{title}: PASS ({len(r.actions)} actions; " + ", ".join(f"{k} {v}" for k, v in r.stats.items()) + ")"
    lines = [f"{title}: FAIL after {len(r.actions)} actions", f"  {r.violations[0].describe()}"]
    lines += [f"  also: {v.describe()}" for v in r.violations[1:4]]
    if r.outcomes:
        lines.append(format_iteration(r.outcomes[-1]))
    lines.append("  actions:")
    lines += [f"    {a}" for a in _compact(r.actions)]
    if trace_path is not None:
        lines.append(f"  trace: {trace_path}\n  reproduce with: specstate reproduce {trace_path}")
    return "\n".join(lines)


def _trace_data(r: MultiResult, config: SpecConfig) -> dict[str, Any]:
    return {"format": 1, "multirank": r.ranks.to_json(), "variant": r.policy, "config": config.to_json(),
            "actions": [multi_action_to_json(a) for a in r.actions],
            "violation": r.violations[0].to_json() if r.violations else None}


def save_multi_trace(r: MultiResult, config: SpecConfig, folder: Path | str | None = None) -> Path:
    """Write the trace of ``r`` (``config``: before the variant's changes) atomically."""
    from specstate.fuzz.trace import failure_dir

    d = failure_dir(folder)
    text = json.dumps(_trace_data(r, config), indent=1, sort_keys=True)
    name = f"multirank-{r.policy}-dp{r.ranks.dp_size}-{hashlib.sha256(text.encode()).hexdigest()[:10]}.json"
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".trace-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, d / name)
    return d / name


def load_multi_trace(path: Path | str) -> tuple[MultiModel, list[Action], dict[str, Any]]:
    """The model (config, ranks, variant) and actions of a multi-rank trace file."""
    from specstate.errors import FileFormatError
    from specstate.schema import config_from_data
    from specstate.schema._files import read_data

    data = read_data(path, what="trace", max_bytes=1 << 24)
    try:
        ranks = RankConfig(**data["multirank"])
        model = make_model(config_from_data(data["config"]), ranks, data["variant"])
        return model, [multi_action_from_data(a) for a in data["actions"]], data
    except (KeyError, TypeError) as e:
        raise FileFormatError(f"{path}: not a multi-rank trace (expected the keys multirank, config, variant and "
                              f"actions, each of its type): {type(e).__name__}: {e}") from None


def _burst(c: int, steps: int) -> list[Action]:
    return [Arrive(8, 64)] * c + [Step()] * steps


def shortest_burst(model: MultiModel, max_c: int, steps: int = 4) -> MultiResult | None:
    """The fewest requests arriving at once (round robin over the ranks; prompts of 8 tokens, 64
    new tokens, no draft accepted) that break an invariant within ``steps`` iterations, cut after
    the failing step."""
    for c in range(1, max_c + 1):
        r = run_multi(model, _burst(c, steps))
        if not r.ok:
            return r
    return None


def ddmin_multi(model: MultiModel, actions: list[Action], same: Callable[[MultiResult], bool],
                max_runs: int = 400) -> list[Action]:
    """Delta debugging: drop chunks of actions while ``same`` still holds of the run."""
    n, runs = 2, 0
    while len(actions) >= 2 and runs < max_runs:
        size = max(1, len(actions) // n)
        reduced = False
        for start in range(0, len(actions), size):
            cand = actions[:start] + actions[start + size:]
            runs += 1
            r = run_multi(model, cand)
            if not r.ok and same(r):
                actions, n, reduced = list(r.actions), max(n - 1, 2), True
                break
        if not reduced:
            if size == 1:
                break
            n = min(len(actions), n * 2)
    return actions
