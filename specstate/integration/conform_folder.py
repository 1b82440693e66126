"""Every recording of a folder through the one conformance route (``conform.check_recording``), of
any release, in parallel: one row of figures per recording and the totals, for the GPU hosts'
scripts (``gpu_run_v17.sh``: ``python -m specstate.integration.conform_folder FOLDER OUT.json
--jobs 0``). Each recording is compared with the variant named, else its release's (``conform.
check_pairing``: 0.5.17's from its header); a row keeps the report fields its release writes
(``crash_verdict``, ``switches``, ... where it writes them).
"""

from __future__ import annotations

import json
from typing import Any

from specstate.integration.conform import check_recording

__all__ = ["ROW_FIELDS", "conform_folder", "main"]

#: the report fields a row keeps (those its release writes)
ROW_FIELDS = ("file", "family", "variant", "threshold", "iterations", "requests", "idle_steps", "mismatch_count",
              "mismatches", "model_invariant_violations", "violations_at_model_crash", "violations_elsewhere",
              "real_crash", "crash_verdict", "switches", "adaptive_config_ignored")


def _conform_row(path: str, variant: str | None, threshold: int | None) -> dict[str, Any]:
    try:
        rep = check_recording(path, variant, threshold)
        return {k: rep[k] for k in ROW_FIELDS if k in rep}
    except Exception as e:  # noqa: BLE001  (a broken file is reported, the others are still checked)
        return {"file": path, "error": f"{type(e).__name__}: {e}"}


def _totals(rows: list[dict[str, Any]], variant: str | None, n: int) -> dict[str, Any]:
    ok = [r for r in rows if "error" not in r and not r["mismatch_count"] and not _unexpected_violations(r)
          and (not r["real_crash"] or _as_predicted(r))]
    both = [r for r in rows if (r.get("switches") or {}).get("switch_down") and (r.get("switches") or {}).get("switch_up")]
    return {"variant": variant or "each recording's own (its header's, else its release's default)", "recordings": n, "checked": len(rows), "conforming": len(ok),
            "crashes_as_predicted": sum(1 for r in rows if _as_predicted(r)),
            "crashes_not_as_predicted": sum(1 for r in rows if (r.get("crash_verdict") or {}).get("verdict")
                                            not in (None, "as-predicted")),
            "mismatches": sum(r.get("mismatch_count", 0) for r in rows), "crossing_both_ways": len(both),
            "files": sorted(rows, key=lambda r: r["file"])}


def _as_predicted(row: dict[str, Any]) -> bool:
    """The recording crashed, and the model predicted that crash (``crash_verdict``)."""
    return (row.get("crash_verdict") or {}).get("verdict") == "as-predicted"


def _unexpected_violations(row: dict[str, Any]) -> list[str]:
    """The model's invariant violations, none when the recording crashed as predicted and every
    violation is of the step the model crashed in (``worker-crash`` and what the crashing step's
    shapes broke besides: the predicted failure's own findings)."""
    found = list(row.get("model_invariant_violations") or [])
    if _as_predicted(row) and not row.get("violations_elsewhere"):
        return []
    return found


def conform_folder(folder: str, variant: str | None = None, *, jobs: int = 1, out: str | None = None,
                   threshold: int | None = 5) -> dict[str, Any]:
    """Every ``*.jsonl[.gz]`` recording under ``folder`` against ``variant`` (``None``: each its
    release's; ``threshold``: the switching threshold of a release whose recordings lack one, 5 as
    ``specstate conform``'s;
    ``jobs`` processes): one row of figures per recording and the totals, rewritten to ``out``
    after each recording (a run cut short leaves what was checked). A file that cannot be read fails."""
    import glob
    import os

    paths = sorted(glob.glob(os.path.join(folder, "**", "*.jsonl"), recursive=True) +
                   glob.glob(os.path.join(folder, "**", "*.jsonl.gz"), recursive=True))
    paths.sort(key=lambda p: -os.path.getsize(p))  # the longest first: they bound the wall time
    rows: list[dict[str, Any]] = []

    def keep(row: dict[str, Any] | None) -> None:
        if row is not None:
            rows.append(row)
        if out:
            with open(out + ".tmp", "w") as f:
                json.dump(_totals(rows, variant, len(paths)), f, indent=1, default=str)
            os.replace(out + ".tmp", out)

    keep(None)

    if jobs > 1 and len(paths) > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=min(jobs, len(paths))) as pool:
            for fut in as_completed([pool.submit(_conform_row, p, variant, threshold) for p in paths]):
                keep(fut.result())
    else:
        for p in paths:
            keep(_conform_row(p, variant, threshold))
    return _totals(rows, variant, len(paths))


def main(argv: list[str] | None = None) -> int:
    """``python -m specstate.integration.conform_folder FOLDER [OUT.json] [--variant V]
    [--threshold N] [--jobs N]``: exit 0 when every recording conforms."""
    import argparse
    import os
    import sys

    p = argparse.ArgumentParser(prog="specstate-conform-folder", description=conform_folder.__doc__)
    p.add_argument("folder")
    p.add_argument("out", nargs="?")
    p.add_argument("--variant", default=None)
    p.add_argument("--threshold", type=int, default=5, help="the switching threshold of recordings that lack one (-1: none)")
    p.add_argument("--jobs", type=int, default=1, help="processes (0: one per CPU)")
    args = p.parse_args(argv)
    res = conform_folder(args.folder, args.variant, jobs=args.jobs or (os.cpu_count() or 1), out=args.out,
                         threshold=None if args.threshold < 0 else args.threshold)
    for r in res["files"]:
        print(f"[conform] {r['file']}: " + (r["error"] if "error" in r else
              f"{r.get('variant')}: {r['iterations']} iterations, {r['mismatch_count']} mismatches {r.get('switches') or ''} "
              + (f"(adaptive config keys sglang ignores: {', '.join(r['adaptive_config_ignored'])}) "
                 if r.get("adaptive_config_ignored") else "")
              + (r["mismatches"][0] if r["mismatches"] else "")), file=sys.stderr)
        if r.get("crash_verdict"):
            c = r["crash_verdict"]
            print(f"[conform] {r['file']}: crash {c['verdict']} (engine {c['real']}, model {c['model']}"
                  + (f", at the model's {c['model_where']}: {'yes' if c.get('where_seen') else 'no'}"
                     if c.get("where_seen") is not None else "") + ")", file=sys.stderr)
    print(f"[conform] {res['conforming']}/{res['recordings']} recordings conform with {res['variant']}, "
          f"{res['mismatches']} mismatches, {res['crossing_both_ways']} cross the switch both ways, "
          f"{res['crashes_as_predicted']} crashed as the model predicted, "
          f"{res['crashes_not_as_predicted']} crashed otherwise", file=sys.stderr)
    return 0 if res["recordings"] and res["conforming"] == res["recordings"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
