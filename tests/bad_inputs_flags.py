"""Malformed sglang launch flags and flag files for every command that takes them, as
Hypothesis strategies (the runner is ``tests/bad_inputs.py``'s ``judge``).

A case is a good launch of the seed (EAGLE-3, 16 draft tokens, threshold 5) with one thing
wrong: an unknown or ambiguous flag, a value argparse would refuse, a value or a combination
sglang's ``ServerArgs`` refuses, a launch outside what the family models, a broken pasted
launch line, or a ``--config`` file that is not JSON / TOML or holds the wrong types. Each must
end in exit 2 and one line that names the flag (the needle), no traceback.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from tests.bad_inputs import Case

SEED_FLAGS = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
              "--speculative-num-draft-tokens", "16", "--cuda-graph-max-bs", "16", "--max-running-requests", "48",
              "--speculative-disable-batch-threshold", "5"]


def _without(flag: str, flags: list[str] | None = None) -> list[str]:
    flags = list(flags or SEED_FLAGS)
    i = flags.index(flag)
    return flags[:i] + flags[i + 2:]


def _set(flag: str, value: str) -> list[str]:
    flags = list(SEED_FLAGS)
    if flag in flags:
        flags[flags.index(flag) + 1] = value
        return flags
    return flags + [flag, value]


#: (flags, needle, what): one mistake each
FLAG_MISTAKES: list[tuple[list[str], str, str]] = [
    (SEED_FLAGS + ["--no-such-flag", "1"], "--no-such-flag", "unknown flag"),
    (SEED_FLAGS + ["--speculative-num-stepz", "3"], "--speculative-num-stepz", "misspelt flag"),
    (SEED_FLAGS + ["--speculative", "3"], "--speculative", "ambiguous prefix"),
    (_set("--speculative-num-steps", "three"), "--speculative-num-steps", "int: a word"),
    (_set("--speculative-num-steps", "2.5"), "--speculative-num-steps", "int: a fraction"),
    (_set("--speculative-num-steps", "0"), "--speculative-num-steps", "steps 0"),
    (_set("--speculative-num-steps", "99"), "--speculative-num-steps", "steps beyond the model's bound"),
    (_set("--speculative-eagle-topk", "x"), "--speculative-eagle-topk", "topk: a word"),
    (_set("--speculative-eagle-topk", "1"), "--speculative-eagle-topk", "topk 1 runs spec v2 in 0.5.12"),
    (_set("--speculative-num-draft-tokens", "200"), "--speculative-num-draft-tokens", "more draft tokens than the tree"),
    (_set("--speculative-num-draft-tokens", ""), "--speculative-num-draft-tokens", "empty value"),
    (_set("--cuda-graph-max-bs", "-3"), "--cuda-graph-max-bs", "negative graph bs"),
    (_set("--cuda-graph-max-bs", "1e3"), "--cuda-graph-max-bs", "int: exponent"),
    (SEED_FLAGS + ["--cuda-graph-bs", "1", "two"], "--cuda-graph-bs", "int list: a word"),
    (SEED_FLAGS + ["--cuda-graph-bs"], "--cuda-graph-bs", "int list: no value"),
    (_set("--max-running-requests", "0"), "--max-running-requests", "no running requests"),
    (_set("--max-running-requests", "1k1"), "--max-running-requests", "int: a suffix"),
    (_set("--speculative-disable-batch-threshold", "-1"), "--speculative-disable-batch-threshold", "negative threshold"),
    (_set("--speculative-disable-batch-threshold", "five"), "--speculative-disable-batch-threshold", "threshold: word"),
    (_set("--speculative-algorithm", "NGRAM"), "--speculative-algorithm", "an algorithm not modelled"),
    (_without("--speculative-algorithm"), "--speculative-algorithm", "no speculation"),
    (_without("--speculative-eagle-topk"), "--speculative-eagle-topk", "steps without topk"),
    (_without("--speculative-num-steps"), "--speculative-num-steps", "topk without steps"),
    (SEED_FLAGS + ["--page-size", "4096"], "--page-size", "page size past its bound"),
    (SEED_FLAGS + ["--page-size", "3"], "--page-size", "a page size that does not divide the chunk"),
    (SEED_FLAGS + ["--schedule-conservativeness", "-1"], "--schedule-conservativeness", "negative conservativeness"),
    (SEED_FLAGS + ["--schedule-conservativeness", "lots"], "--schedule-conservativeness", "float: a word"),
    (SEED_FLAGS + ["--max-total-tokens", "1.5Ki"], "--max-total-tokens", "IEC with decimals"),
    (SEED_FLAGS + ["--max-total-tokens", "lots"], "--max-total-tokens", "human int: a word"),
    (SEED_FLAGS + ["--max-prefill-tokens", "16kb"], "--max-prefill-tokens", "human int: a bad suffix"),
    (SEED_FLAGS + ["--context-length", "1"], "--context-length", "context 1"),
    (SEED_FLAGS + ["--disable-radix-cache=yes"], "--disable-radix-cache", "a value for a store_true flag"),
    (SEED_FLAGS + ["--disable-cuda-graph"], "--disable-cuda-graph", "graphs off: not modelled"),
    (SEED_FLAGS + ["--speculative-adaptive"], "--speculative-adaptive", "adaptive on the v1 family"),
    (SEED_FLAGS + ["--port", "http"], "--port", "a not-modelled int flag with a word"),
    (SEED_FLAGS + ["--schedule-policy", "sjf"], "--schedule-policy", "a choice sglang does not offer"),
    (SEED_FLAGS + ["--model-path"], "--model-path", "a flag without its value"),
    (SEED_FLAGS + ["stray"], "stray", "a positional word"),
    (SEED_FLAGS + ["-x"], "-x", "a short option"),
    (["python", "-m", "sglang.bench_serving"] + SEED_FLAGS, "sglang.launch_server", "not a launch line"),
]
_COMMANDS = (["check", "--variant", "naive-threshold", "--parts", "sweep"], ["run", "--variant", "naive-threshold"],
             ["fuzz", "--max-examples", "1"], ["explore", "--max-bs", "2", "--depth", "2"],
             ["prove", "--max-bs", "2"], ["graph", "--out", "g.json", "--levels", "1"])


@st.composite
def flag_cases(draw: st.DrawFn) -> Case:
    flags, needle, what = draw(st.sampled_from(FLAG_MISTAKES))
    command = draw(st.sampled_from(_COMMANDS))
    how = draw(st.sampled_from(("dashes", "string")))
    if how == "dashes" and command[0] not in ("run", "fuzz"):  # ``judge`` appends --quiet to those
        return Case(command + ["--"] + flags, needle=needle, what=f"{what} (after --)")
    return Case(command + ["--server-args", " ".join(f or "''" for f in flags)], needle=needle,
                what=f"{what} (--server-args)")


def _flags_object(flags: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    i = 0
    while i < len(flags):
        out[flags[i][2:]] = int(flags[i + 1]) if flags[i + 1].isdigit() else flags[i + 1]
        i += 2
    return out


_GOOD = _flags_object(SEED_FLAGS)
#: (file name, bytes, needle, what)
FILE_MISTAKES: list[tuple[str, bytes, str, str]] = [
    ("f.json", b"{", "f.json", "not JSON"),
    ("f.json", b"[1, 2]", "f.json", "not an object"),
    ("f.toml", b"speculative-num-steps = ", "f.toml", "not TOML"),
    ("f.json", json.dumps({**_GOOD, "speculative-num-steps": "3"}).encode(), "speculative-num-steps", "a string int"),
    ("f.json", json.dumps({**_GOOD, "speculative-num-steps": True}).encode(), "speculative-num-steps", "a bool int"),
    ("f.json", json.dumps({**_GOOD, "disable-radix-cache": 1}).encode(), "disable-radix-cache", "an int bool"),
    ("f.json", json.dumps({**_GOOD, "cuda-graph-bs": 4}).encode(), "cuda-graph-bs", "a number for a list"),
    ("f.json", json.dumps({**_GOOD, "no-such-flag": 1}).encode(), "no-such-flag", "an unknown key"),
    ("f.json", json.dumps({**_GOOD, "speculative-eagle-topk": 1}).encode(), "--speculative-eagle-topk", "topk 1"),
    ("f.toml", b'speculative-algorithm = "EAGLE3"\nspeculative_num_steps = 3.5\n', "speculative_num_steps",
     "a TOML float for an int"),
    ("f.json", "DIR", "f.json", "a directory"),  # type: ignore[list-item]
    ("f.json", "FIFO", "not a regular file", "a FIFO"),  # type: ignore[list-item]
    ("f.json", b"\xff\xfe{}", "expected a UTF-8", "bad UTF-8"),
    ("f.json", b'{"a": ' + b"[" * 4000 + b"]" * 4000 + b"}", "nests deeper", "4 KB of nested JSON"),
    ("f.json", b"{" * 3000, "nests deeper", "unbalanced nested JSON"),
    ("f.toml", b"a = " + b"[" * 4000 + b"]" * 4000 + b"\n", "nests deeper", "nested TOML arrays"),
    ("f.toml", b"a = " + b"{b = " * 500 + b"1" + b"}" * 500 + b"\n", "nests deeper", "nested TOML inline tables"),
    ("f.toml", b"a" + b".a" * 20000 + b" = 1\n", "nests deeper", "a deep dotted TOML key"),
    ("f.toml", b"[" + b"a." * 5000 + b"b]\n", "nests deeper", "a deep TOML table header"),
    ("f.json", b" " * (2 << 20), "at most 1 MiB", "a 2 MiB file"),
    ("f.toml", b'"bad\\u001b]0;PWNED\\u0007key" = 1\n', "bad\\x1b]0;PWNED\\x07key", "a terminal escape in a key"),
]

#: (adaptive config bytes, needle, what): ``--speculative-adaptive-config`` of the v2 family;
#: every knob sglang's ``AdaptiveStepSlot`` reads unchecked (``adaptive_spec_params.py``)
ADAPTIVE_MISTAKES: list[tuple[bytes, str, str]] = [
    (b'{"1": {"candidate_steps": [1, 3], "update_interval": 0}}', "update_interval an int in [1, ", "update_interval 0"),
    (b'{"1": {"candidate_steps": [1, 3], "update_interval": 2.5}}', "update_interval", "update_interval a float"),
    (b'{"1": {"candidate_steps": [1, 3], "ema_alpha": "x"}}', "ema_alpha a finite number in [0, 1] but got 'x'",
     "ema_alpha a str"),
    (b'{"1": {"candidate_steps": [1, 3], "ema_alpha": 2}}', "ema_alpha", "ema_alpha over 1"),
    (b'{"ema_alpha": true, "1": {"candidate_steps": [1, 3]}}', "ema_alpha", "a shared ema_alpha bool"),
    (b'{"1": {"candidate_steps": [1, 3], "warmup_batches": -1}}', "warmup_batches", "warmup_batches negative"),
    (b'{"1": {"candidate_steps": [1, 3], "warmup_batches": null}}', "warmup_batches", "warmup_batches null"),
    (b'{"1": {"candidate_steps": [1, 3], "down_hysteresis": NaN}}', "down_hysteresis", "down_hysteresis NaN"),
    (b'{"1": {"candidate_steps": [1, 3], "up_hysteresis": Infinity}}', "up_hysteresis", "up_hysteresis inf"),
    (b'{"1": {"candidate_steps": [1, 3], "ceiling_coeff": [1]}}', "ceiling_coeff", "ceiling_coeff a list"),
    (b'{"1": {"candidate_steps": [1, 100000]}}', "candidate_steps of at most 64", "a huge step"),
    (b'{"1": {"candidate_steps": []}}', "candidate_steps as a list of non-negative ints", "no steps"),
    (b'{"1": {"candidate_steps": [-1]}}', "candidate_steps as a list of non-negative ints", "a negative step"),
    (b'{"1": [1, 3]}', "an object with candidate_steps", "a slot that is a list"),
    (b'{"' + b"9" * 5000 + b'": {"candidate_steps": [1]}}', "at most 9 ASCII digits", "a 5,000-digit key"),
    (b'{"a": ' + b"[" * 4000 + b"]" * 4000 + b"}", "nests", "nested JSON"),
    (b"[1]", "JSON object", "not an object"),
    (b"\xff", "UTF-8", "bad UTF-8"),
    ("FIFO", "not a regular file", "a FIFO"),  # type: ignore[list-item]
    ("DIR", "directory", "a directory"),  # type: ignore[list-item]
]
ADAPTIVE_FLAGS = ["check", "--engine", "sglang-0.5.17", "--parts", "start", "--", "--model-path", "m",
                  "--speculative-algorithm", "EAGLE", "--speculative-adaptive", "--speculative-adaptive-config", "a.json"]


@st.composite
def file_cases(draw: st.DrawFn) -> Case:
    name, content, needle, what = draw(st.sampled_from(FILE_MISTAKES))
    command = draw(st.sampled_from(_COMMANDS))
    return Case(command + ["--config", name], {name: content}, needle=needle, what=f"flags file: {what}")


def cases() -> st.SearchStrategy[Case]:
    return st.one_of(flag_cases(), file_cases())
