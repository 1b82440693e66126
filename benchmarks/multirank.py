"""The multi-rank model's search and proof on the seed's launch under DP attention (issue 40: ``explore``
at dp 2 depth 10 and ``prove`` at dp 2 and dp 8 within 10 minutes each on the 2-core machine).

``python -m benchmarks.multirank [--out docs/performance.md] [--render] [--quick]`` runs each command
as the user does (``python -m specstate ...``, a child process at ``nice -n 10``) and records its
wall seconds, its CPU seconds (the child's user + system time), its peak memory (max RSS), the
figures it printed (states, multisets) and its exit code, with the load average before and after
(the machine is shared: the wall time depends on the others' load, the CPU seconds much less).
``--quick``: depth 6 and the proofs at ``--max-bs 3`` (a smoke run, seconds). ``--render``: the section
from the saved figures, nothing measured.

It writes ``docs/performance.multirank.json`` and the page's ``<!-- multirank -->`` section
(``sections.save_section``), and prints the section.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEED = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 --speculative-disable-batch-threshold 5").split()


def _dp(n: int) -> list[str]:
    return [*SEED, "--tp", "8", "--enable-dp-attention", "--dp", str(n)]


def runs(quick: bool) -> list[tuple[str, list[str]]]:
    depth = "6" if quick else "10"
    bound = ["--max-bs", "3"] if quick else []
    out = []
    for variant in ("fixed-threshold", "dp-agreed-threshold"):
        out.append((f"explore {variant} dp 2 depth {depth}",
                    ["explore", "--variant", variant, "--depth", depth, "--max-states", "10000000", "--", *_dp(2)]))
    for n in (2, 8):
        for variant in ("fixed-threshold", "dp-agreed-threshold", "dp-consensus-min"):
            out.append((f"prove {variant} dp {n}", ["prove", "--variant", variant, *bound, "--", *_dp(n)]))
    return out


def _child(args: list[str], folder: Path) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        p = subprocess.Popen(["nice", "-n", "10", sys.executable, "-m", "specstate", *args[:1], "--failures",
                              str(folder), *args[1:]], stdout=out, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
        _, status, use = os.wait4(p.pid, 0)  # this child's own usage (nice execs the interpreter)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read()
    fig: dict[str, Any] = {"exit": p.returncode, "wall_s": round(wall, 1), "cpu_s": round(use.ru_utime + use.ru_stime, 1),
                           "peak_mib": round(use.ru_maxrss / 1024), "load": [round(load0, 1), round(os.getloadavg()[0], 1)]}
    m = re.search(r"(\d+) (?:classes of states|states)[^,]*, (\d+) transitions", text)
    if m:
        fig.update(states=int(m.group(1)), transitions=int(m.group(2)))
    m = re.search(r"(\d+) multisets \(every rank order: (\d+) vectors\), (\d+) scripts, (\d+) steps", text)
    if m:
        fig.update(multisets=int(m.group(1)), vectors=int(m.group(2)), scripts=int(m.group(3)), steps=int(m.group(4)))
    line = [x.strip() for x in text.splitlines() if x.strip().startswith(("holds for", "fails at", "no violation",
                                                                          "shortest counterexample"))]
    fig["verdict"] = line[0] if line else text.strip().splitlines()[-1:]
    return fig


def measure(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"machine": f"{os.cpu_count()} CPUs, shared; every command at nice -n 10", "runs": {}}
    with tempfile.TemporaryDirectory() as d:
        for name, args in runs(quick):
            out["runs"][name] = _child(args, Path(d))
            print(name, json.dumps(out["runs"][name]), flush=True)
    return out


def render_section(fig: dict[str, Any]) -> str:
    rows = []
    for name, r in fig["runs"].items():
        what = (f"{r['states']:,} classes, {r['transitions']:,} transitions" if "states" in r else
                f"{r.get('multisets', 0):,} multisets ({r.get('vectors', 0):,} vectors), {r.get('steps', 0):,} steps"
                if "multisets" in r else "")
        rows.append(f"| `{name}` | {what} | {r['wall_s']} | {r['cpu_s']} | {r['peak_mib']} | {r['load'][0]} / "
                    f"{r['load'][1]} | {r['exit']}: {r['verdict']} |")
    return "\n".join([
        "<!-- multirank -->",
        "## DP attention: `explore` and `prove` on several ranks (issue 40)",
        "",
        "`python -m benchmarks.multirank` (`benchmarks/multirank.py`): each command as a user runs it, in a child "
        "process at `nice -n 10` on the shared machine (" + fig["machine"] + "; the load average before / after "
        "each run is in its row: wall seconds follow the others' load, CPU seconds much less). The seed's launch "
        "(threshold 5, 16 draft tokens, graphs to 16) with `--tp 8 --enable-dp-attention --dp N`. `explore`: states "
        "merged by rank rotation and each rank's reduced key (docs/multirank.md); before that reduction the same "
        "search at depth 10 held 108,111 states (308-546 s, 770 MB). `prove`: every multiset of per-rank batch "
        "sizes 0..B (B the per-rank `max_running_requests`: 24 at dp 2, 6 at dp 8), four scripts each. Goal: each "
        "within 10 minutes.",
        "",
        "| command | size | wall s | CPU s | peak MiB | load | exit: verdict |",
        "|---|---|---:|---:|---:|---|---|",
        *rows,
        "<!-- /multirank -->",
    ])


def main(argv: list[str]) -> int:
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return 0
    page = Path(argv[argv.index("--out") + 1]) if "--out" in argv else ROOT / "docs" / "performance.md"
    from benchmarks.sections import save_section

    saved = page.with_suffix(".multirank.json")
    fig = json.loads(saved.read_text()) if "--render" in argv else measure("--quick" in argv)
    save_section(page, ".multirank.json", fig, render_section(fig))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
