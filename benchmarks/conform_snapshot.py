"""``python -m benchmarks.conform_snapshot OUT.json [--compare BEFORE.json] [--root tests/data/gpu]``

The verdicts of ``specstate conform`` on every stored recording (``tests/data/gpu/**/*.jsonl[.gz]``),
each with its family's default variant and the command's default threshold (5): per file, the
report's verdict fields (mismatch count and the first mismatches, the invariant violations of both
sides, the crashes and ``crash_verdict``, iterations, requests, idle steps) or the error it raised.
``--compare`` lists every file whose figures differ from an earlier snapshot (taken on another
checkout: ``PYTHONPATH=<checkout>``) and exits 1 if any does: a refactoring of conformance keeps
every verdict.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Any

#: the report fields a verdict is made of (``integration/conform.check_recording``)
FIELDS = ("family", "variant", "schema", "threshold", "iterations", "requests", "idle_steps", "mismatch_count",
          "mismatches", "recorded_invariant_violations", "model_invariant_violations", "violations_at_model_crash",
          "violations_elsewhere", "real_crash", "model_crash", "crash_verdict", "switches", "adaptive_config_ignored",
          "first_mismatch")


def _plain(v: object) -> object:
    import dataclasses

    return dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else str(v)


def snapshot(root: str) -> dict[str, Any]:
    """Every recording under ``root``: its verdict fields, or the error ``check_recording`` raised."""
    from specstate.integration.conform import check_recording

    paths = sorted(glob.glob(os.path.join(root, "**", "*.jsonl"), recursive=True)
                   + glob.glob(os.path.join(root, "**", "*.jsonl.gz"), recursive=True))
    out: dict[str, Any] = {}
    for p in paths:
        try:
            rep = check_recording(p, None, 5)
            row: Any = {k: rep[k] for k in FIELDS if k in rep}
        except Exception as e:  # noqa: BLE001  (an error is a verdict too)
            row = {"error": f"{type(e).__name__}: {e}"}
        out[p] = json.loads(json.dumps(row, default=_plain))
    return out


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per file (or field) that differs between two snapshots."""
    lines = [f"{p}: only {'before' if p in before else 'after'}" for p in sorted(set(before) ^ set(after))]
    for p in sorted(set(before) & set(after)):
        b, a = before[p], after[p]
        for k in sorted(set(b) | set(a)):
            if b.get(k) != a.get(k):
                lines.append(f"{p}: {k}: before {str(b.get(k))[:200]} after {str(a.get(k))[:200]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="conform_snapshot", description=__doc__)
    p.add_argument("out")
    p.add_argument("--root", default="tests/data/gpu")
    p.add_argument("--compare", default=None, metavar="BEFORE.json")
    args = p.parse_args(argv)
    snap = snapshot(args.root)
    with open(args.out, "w") as f:
        json.dump(snap, f, indent=1, sort_keys=True)
    n_mism = sum(r.get("mismatch_count", 0) for r in snap.values())
    n_err = sum(1 for r in snap.values() if "error" in r)
    print(f"[conform_snapshot] {len(snap)} recordings, {n_mism} mismatches, {n_err} errors -> {args.out}")
    if args.compare:
        with open(args.compare) as f:
            diff = differences(json.load(f), snap)
        for line in diff:
            print(line)
        print(f"[conform_snapshot] {len(diff)} differences against {args.compare}")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
