"""The measurements in ``docs/fuzzing.md``: ``python -m specstate.fuzz.bench [VARIANT] [SEEDS]``.

For each Hypothesis seed, from a cold start (no example database): seconds to the first
violating example, its length, the length after delta debugging, and the BFS verdict
(the shortest counterexample over the minimised trace's alphabet).
"""

from __future__ import annotations

import sys

from hypothesis import settings

from specstate.fuzz.minimize import minimize_failure
from specstate.fuzz.profiles import profile_settings
from specstate.fuzz.runner import fuzz_variant

__all__ = ["seed_table"]


def seed_table(variant: str, seeds: range, *, shrink: bool = False) -> list[str]:
    base = profile_settings("dev" if shrink else "ci")
    s = settings(base, derandomize=False, database=None, max_examples=2000)
    rows = ["| seed | first violation (s) | invariant | found length | after ddmin | BFS minimum | proven |",
            "|---:|---:|---|---:|---:|---:|---|"]
    for seed in seeds:
        r = fuzz_variant(variant, s, seed=seed)
        if r.result is None or r.config is None:
            rows.append(f"| {seed} | - | none found | - | - | - | - |")
            continue
        first = r.result.first
        assert first is not None, "a fuzz run with a result stopped at a violation"
        m = minimize_failure(r.config, variant, r.result.actions)
        bfs_min = len(m.actions) if m.bfs_exhaustive else "?"
        rows.append(f"| {seed} | {r.first_violation_s:.2f} | {first.invariant} | {len(r.result.actions)} | "
                    f"{m.ddmin_length} | {bfs_min} | {'yes' if m.proven_minimal else 'no'} |")
        print(rows[-1], file=sys.stderr)
    return rows


if __name__ == "__main__":  # pragma: no cover
    v = sys.argv[1] if len(sys.argv) > 1 else "naive-threshold"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    print("\n".join(seed_table(v, range(n), shrink="--shrink" in sys.argv)))
