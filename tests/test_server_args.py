"""sglang's launch flags as each release parses them (``specstate.server_args``): every flag the
model reads with good and bad values, the argparse rules (``=``, prefixes, repeats, lists,
negative numbers), a pasted launch line, defaults and adjustments sglang makes, the launches it
refuses, the variant's patch flags, the 0.5.17 family, and ``--config`` files."""

from __future__ import annotations

import json
import shlex

import pytest

from specstate.errors import UsageError
from specstate.model import SpecConfig
from specstate.scenarios import SEED_CONFIG
from specstate.server_args import launch_tokens, parse_launch
from specstate.server_args._parse import human_readable_int

SEED = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 --max-running-requests 48 "
        "--speculative-disable-batch-threshold 5")


def launch(text: str, variant: str = "fixed-threshold"):  # noqa: ANN201
    return parse_launch(launch_tokens(server_args=text, variant=variant), variant)


def config(extra: str = "", variant: str = "fixed-threshold") -> SpecConfig:
    return launch(f"{SEED} {extra}", variant).config


def test_the_seed_launch_is_the_seed_config() -> None:
    assert config() == SEED_CONFIG


def test_a_pasted_launch_line_is_its_flags() -> None:
    line = f"CUDA_VISIBLE_DEVICES=0 python3 -m sglang.launch_server --model-path x {SEED} --host 0.0.0.0 --port 30000"
    got = parse_launch(launch_tokens(after_dashes=shlex.split(line), variant="naive-threshold"), "naive-threshold")
    assert got.config == SEED_CONFIG
    assert got.not_modelled == ("--model-path", "--host", "--port")
    assert parse_launch(launch_tokens(after_dashes=["sglang", "serve", *shlex.split(SEED)], variant="naive-threshold"),
                        "naive-threshold").config == SEED_CONFIG


#: (flag and value, SpecConfig field, expected value): a good value of every modelled flag
GOOD = [
    ("--speculative-num-steps 2 --speculative-num-draft-tokens 8", "speculative_num_steps", 2),
    ("--speculative-eagle-topk 2 --speculative-num-draft-tokens 8", "speculative_eagle_topk", 2),
    ("--speculative-num-draft-tokens 10", "speculative_num_draft_tokens", 10),
    ("--max-running-requests 7", "max_running_requests", 7),
    ("--max-running-requests=+7", "max_running_requests", 7),  # int("+7"), as argparse's type=int
    ("--max-total-tokens 2k", "target_kv_pool_size", 2000),
    ("--max-total-tokens 4Ki", "draft_kv_pool_size", 4096),
    ("--chunked-prefill-size 512", "chunked_prefill_size", 512),
    ("--chunked-prefill-size -1", "chunked_prefill_size", 1 << 24),  # off: one chunk of any length
    ("--max-prefill-tokens 1.5k", "max_prefill_tokens", 1500),
    ("--schedule-conservativeness 0.5", "schedule_conservativeness", 0.5),
    ("--page-size 1", "page_size", 1),
    ("--page-size 64", "page_size", 64),
    ("--context-length 8k", "context_len", 8000),
    ("--disable-radix-cache", "disable_radix_cache", True),
    ("--enable-mixed-chunk", "enable_mixed_chunk", False),  # sglang turns it off for EAGLE
    ("--disable-overlap-schedule", "disable_overlap_schedule", True),
    ("--cuda-graph-max-bs 8", "cuda_graph_max_bs", 8),
    ("--cuda-graph-bs 1 2 4 12", "cuda_graph_bs_override", (1, 2, 4, 12)),
    ("--cuda-graph-bs 1 2 4 12", "cuda_graph_max_bs", 12),  # ServerArgs: max(cuda_graph_bs)
    ("--speculative-disable-batch-threshold 9", "disable_batch_threshold", 9),
    ("--speculative-algorithm eagle", "speculative_num_steps", 3),  # upper-cased; EAGLE
    ("--speculative-algorithm NEXTN", "speculative_num_steps", 3),  # NEXTN resolves to EAGLE
    ("--max-run 12", "max_running_requests", 12),  # a unique prefix (argparse allow_abbrev)
    ("--max-running-requests 3 --max-running-requests 9", "max_running_requests", 9),  # the last one wins
]


@pytest.mark.parametrize("extra,field,expected", GOOD, ids=[g[0] for g in GOOD])
def test_a_good_value_of_every_flag(extra: str, field: str, expected: object) -> None:
    assert getattr(config(extra), field) == expected


#: (flags, what the error line must say): a bad value of every modelled flag
BAD = [
    ("--speculative-num-steps x", "--speculative-num-steps"), ("--speculative-num-steps 0", "--speculative-num-steps"),
    ("--speculative-eagle-topk 1.5", "--speculative-eagle-topk"), ("--speculative-eagle-topk 0", "speculative_eagle_topk"),
    ("--speculative-num-draft-tokens 99", "--speculative-num-draft-tokens"),
    ("--max-running-requests 0", "--max-running-requests"), ("--max-running-requests many", "--max-running-requests"),
    ("--max-total-tokens 1.5Mi", "IEC"), ("--max-total-tokens 0", "--max-total-tokens"),
    ("--chunked-prefill-size 1k", "--chunked-prefill-size"), ("--max-prefill-tokens -", "--max-prefill-tokens"),
    ("--schedule-conservativeness -0.5", "sglang asserts"), ("--schedule-conservativeness x", "a number"),
    ("--page-size 2048", "page size in [1, 1024]"), ("--context-length 1", "--context-length"),
    ("--disable-radix-cache=true", "takes no value"), ("--cuda-graph-max-bs 0", "--cuda-graph-max-bs"),
    ("--cuda-graph-bs", "at least one value"), ("--cuda-graph-bs 2 x", "--cuda-graph-bs"),
    ("--speculative-disable-batch-threshold -2", ">= 0"), ("--speculative-algorithm MEDUSA", "EAGLE, EAGLE3"),
    ("--speculative-adaptive", "sglang-0.5.17 family"),
    ("--disable-cuda-graph", "not modelled"), ("--enable-dp-attention", "not modelled"),
    ("--max-run", "expected 1 value"), ("--max", "ambiguous"), ("--nope 1", "declares no such flag"),
    ("extra", "positional"),
]


@pytest.mark.parametrize("extra,needle", BAD, ids=[b[0] for b in BAD])
def test_a_bad_value_of_every_flag_is_one_line(extra: str, needle: str) -> None:
    with pytest.raises(UsageError) as e:
        config(extra)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_launches_sglang_refuses_or_no_family_models() -> None:
    base = "--speculative-algorithm EAGLE3 --max-running-requests 8"
    for flags, needle in [(base, "give all three"), (f"{base} --speculative-eagle-topk 2", "all three or none"),
                          (f"{base} --speculative-num-steps 2", "--speculative-eagle-topk: not given"),
                          (f"{base} --speculative-num-steps 2 --speculative-eagle-topk 1", "spec v2"),
                          ("--speculative-num-steps 2 --speculative-eagle-topk 2 --speculative-num-draft-tokens 4",
                           "--speculative-algorithm: not given")]:
        with pytest.raises(UsageError, match=needle):
            launch(flags)


def test_defaults_and_adjustments_are_sglangs_and_said() -> None:
    got = launch("--speculative-algorithm EAGLE --speculative-num-steps 2 --speculative-eagle-topk 1 "
                 "--speculative-num-draft-tokens 7 --disable-overlap-schedule --enable-mixed-chunk --tp-size 4")
    c = got.config
    assert (c.speculative_num_draft_tokens, c.max_running_requests, c.cuda_graph_max_bs, c.chunked_prefill_size) == \
        (3, 48, 512, 8192)  # topk 1: steps + 1; 48 for speculative decoding; an H200 at tp 4; 8k
    assert c.disable_batch_threshold is None  # the patch flag absent: never switch off
    text = " ".join(got.notes)
    assert "num_steps + 1" in text and "512" in text and "8192" in text and "--enable-mixed-chunk" in text
    assert got.not_modelled == ("--tp-size",)
    assert launch(SEED.replace("--cuda-graph-max-bs 16", "")).config.cuda_graph_max_bs == 256
    assert "unused without --speculative-adaptive" in " ".join(launch(f"{SEED} --speculative-adaptive-config a").notes)


def test_a_variant_declares_its_patch_flags() -> None:
    from specstate.model import get_variant

    assert [f.flag for f in get_variant("naive-threshold").all_flags()] == ["--speculative-disable-batch-threshold"]
    assert get_variant("upstream-adaptive").all_flags() == ()
    with pytest.raises(UsageError, match="declares no such flag"):
        launch("--speculative-algorithm EAGLE3 --speculative-disable-batch-threshold 5 --speculative-adaptive",
               variant="upstream-adaptive")


def test_a_class_variant_adds_its_own_flag(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    (tmp_path / "mypatch_flags.py").write_text(
        "from specstate.model.variants import PatchFlag\n"
        "class Mine:\n    base = 'fixed-threshold'\n"
        "    flags = (PatchFlag('--my-switch-at', 'disable_batch_threshold', 'int', 3),)\n"
        "    config_changes = {}\n    def decide_speculation(ops, tx, batch):\n"
        "        return batch.batch_size <= tx.config.disable_batch_threshold\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    c = config("--my-switch-at 7", variant="mypatch_flags:Mine")
    assert c.disable_batch_threshold == 7
    assert launch(SEED.replace("--speculative-disable-batch-threshold 5", ""), "mypatch_flags:Mine").config \
        .disable_batch_threshold == 3  # the patch's default


def test_the_v2_family_reads_0_5_17_flags(tmp_path) -> None:  # noqa: ANN001
    cfg = tmp_path / "adaptive.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [3]}, "6": {"candidate_steps": [0]}}))
    flags = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
             "--speculative-num-draft-tokens 4 --speculative-adaptive --cuda-graph-max-bs-decode 16 "
             f"--max-running-requests 48 --speculative-adaptive-config {cfg}")
    got = launch(flags, "upstream-adaptive")
    assert got.release == "0.5.17" and got.config.cuda_graph_max_bs == 16
    assert json.loads(got.config.speculative_adaptive_config)["6"] == {"candidate_steps": [0]}
    assert not got.config.disable_overlap_schedule
    assert launch(flags.replace("-decode", ""), "upstream-adaptive").config.cuda_graph_max_bs == 16  # the old alias
    # _init_adaptive_speculative_params: no steps -> the middle candidate (of 0, 3: 3), topk 1
    bare = launch(f"--speculative-algorithm EAGLE3 --speculative-adaptive --speculative-adaptive-config {cfg}",
                  "upstream-adaptive")
    assert (bare.config.speculative_num_steps, bare.config.speculative_eagle_topk) == (3, 1)
    default = launch("--speculative-algorithm EAGLE3 --speculative-adaptive", "upstream-adaptive").config
    assert default.speculative_num_steps == 3  # DEFAULT_ADAPTIVE_CONFIG's steps: 0, 1, 3, 7
    with pytest.raises(UsageError, match="candidate steps"):
        launch(flags.replace("--speculative-num-steps 3", "--speculative-num-steps 2"), "upstream-adaptive")
    # without --speculative-adaptive: static speculation on EAGLEWorkerV2 (issue 39), judged, not refused
    static = launch(flags.replace("--speculative-adaptive ", ""), "upstream-adaptive")
    assert static.config.speculative_adaptive is False and "static speculation" in static.describe()
    assert any("unused without --speculative-adaptive" in n for n in static.notes)
    for bad, needle in [(flags + " --disable-overlap-schedule", "overlap"),
                        (flags.replace("--speculative-eagle-topk 1", "--speculative-eagle-topk 2"), "expected 1"),
                        (flags.replace(str(cfg), str(tmp_path / "none.json")), "--speculative-adaptive-config")]:
        with pytest.raises(UsageError, match=needle):
            launch(bad, "upstream-adaptive")


def test_config_files_json_and_toml(tmp_path) -> None:  # noqa: ANN001
    j, t = tmp_path / "f.json", tmp_path / "f.toml"
    j.write_text(json.dumps({"speculative-algorithm": "EAGLE3", "speculative_num_steps": 3,
                             "--speculative-eagle-topk": 4, "speculative-num-draft-tokens": 16,
                             "cuda-graph-max-bs": 16, "max-running-requests": 48,
                             "speculative-disable-batch-threshold": 5, "disable-radix-cache": False,
                             "model-path": "x"}))
    t.write_text('speculative-algorithm = "EAGLE3"\nspeculative-num-steps = 3\nspeculative-eagle-topk = 4\n'
                 'speculative-num-draft-tokens = 16\ncuda-graph-bs = [1, 2, 4, 8, 16]\nmax-running-requests = 48\n'
                 'speculative-disable-batch-threshold = 5\nmax-total-tokens = "64Ki"\n')
    assert parse_launch(launch_tokens(config_file=j, variant="naive-threshold"), "naive-threshold").config == SEED_CONFIG
    c = parse_launch(launch_tokens(config_file=t, variant="naive-threshold"), "naive-threshold").config
    assert c.cuda_graph_bs_override == (1, 2, 4, 8, 16) and c.target_kv_pool_size == 65536
    # the file first, then --server-args, then the words after --: the later value wins
    toks = launch_tokens(config_file=j, server_args="--max-running-requests 20", after_dashes=["--max-running-requests",
                                                                                              "30"], variant="naive-threshold")
    assert parse_launch(toks, "naive-threshold").config.max_running_requests == 30


@pytest.mark.parametrize("text,value", [("7", 7), ("16k", 16000), ("1.5k", 1500), ("2Ki", 2048), ("1M", 10**6),
                                        (" 3 ", 3), ("-4", -4)])
def test_human_readable_int_as_sglang(text: str, value: int) -> None:
    assert human_readable_int(text) == value


@pytest.mark.parametrize("text", ["1.5Ki", "1kb", "k", "1 k", "", "0x10"])
def test_human_readable_int_refuses_as_sglang(text: str) -> None:
    with pytest.raises(ValueError):
        human_readable_int(text)


def _argparse_of(release: str):  # noqa: ANN202
    """argparse itself, built from the release's flag list as ``add_cli_args`` declares it."""
    import argparse

    from specstate.server_args import known_flags
    from specstate.server_args._parse import _CONVERT

    p = argparse.ArgumentParser(prog="sglang serve", add_help=False, exit_on_error=False)
    seen = set()
    for spec in known_flags(release).values():
        if id(spec) in seen:
            continue
        seen.add(id(spec))
        kw: dict[str, object] = {"dest": spec.dest}
        if spec.arity == 0:
            kw["action"] = "store_true"
        else:
            kw["type"] = _CONVERT.get(spec.type or "str", str)
            if spec.arity != 1:
                kw["nargs"] = spec.arity
            if spec.choices:
                kw["choices"] = list(spec.choices)
        p.add_argument(*spec.names, **kw)  # type: ignore[arg-type]
    return p


_WORDS = {"--speculative-num-steps": ["3", "+3"], "--max-running-requests": ["48", "7"],
          "--max-total-tokens": ["2k", "64Ki", "4096"], "--chunked-prefill-size": ["-1", "512"],
          "--schedule-conservativeness": ["0.5", "-0.25", "2"], "--cuda-graph-bs": ["1 2 4", "8"],
          "--disable-radix-cache": [""], "--tp-size": ["2"], "--model-path": ["x", "/m/llama"],
          "--host": ["0.0.0.0"], "--schedule-policy": ["fcfs", "lpm"]}


def test_the_parser_agrees_with_argparse_itself() -> None:
    """Random orders, ``--f=v`` or ``--f v``, unique prefixes: the same values as argparse's."""
    import contextlib
    import io
    import random

    parser = _argparse_of("0.5.12")
    rng = random.Random(0)
    names = sorted(_WORDS)
    agreed = refused = 0
    for _ in range(300):
        tokens: list[str] = []
        for flag in rng.sample(names, rng.randint(1, len(names))):
            value = rng.choice(_WORDS[flag])
            spelled = flag[:len(flag) - rng.randint(0, 3)] if rng.random() < 0.3 else flag
            if value and " " not in value and rng.random() < 0.5:
                tokens.append(f"{spelled}={value}")
            else:
                tokens += [spelled, *value.split()]
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                want = vars(parser.parse_args(tokens))
        except (Exception, SystemExit):  # noqa: BLE001  (an ambiguous prefix: ours must refuse it too)
            with pytest.raises(UsageError):
                from specstate.server_args._parse import parse_tokens

                parse_tokens(tokens, "0.5.12")
            refused += 1
            continue
        from specstate.server_args._parse import parse_tokens

        got = parse_tokens(tokens, "0.5.12").values
        assert {k: v for k, v in want.items() if k in got} == got, tokens
        agreed += 1
    assert agreed > 50 and refused > 20, (agreed, refused)


def test_the_0_5_23_family_reads_0_5_23_flags(tmp_path) -> None:  # noqa: ANN001
    """0.5.23: 0.5.17's rules with 0.5.20's default candidates, no ``--cuda-graph-max-bs`` alias,
    and mixed chunked prefill kept on for EAGLE (refused: not modelled)."""
    base = ("--speculative-algorithm EAGLE3 --speculative-adaptive --cuda-graph-max-bs-decode 16 "
            "--max-running-requests 48")
    got = launch(base, "upstream-v23")
    assert got.release == "0.5.23" and got.config.cuda_graph_max_bs == 16 and not got.config.disable_overlap_schedule
    assert got.config.disable_batch_threshold is None and "adaptive speculation" in got.describe()
    assert "[0, 1, 3, 5, 7]" in " ".join(got.notes)  # the default config's candidates (slot 1: 1, 3, 5, 7)
    assert launch(f"{base} --speculative-num-steps 5", "upstream-v23").config.speculative_num_steps == 5
    with pytest.raises(UsageError, match="candidate steps"):  # 0.5.17's default has no 5
        launch(f"{base} --speculative-num-steps 5", "upstream-adaptive")
    cfg = tmp_path / "adaptive.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [2]}}))
    assert launch(f"{base} --speculative-adaptive-config {cfg}", "upstream-v23").config.speculative_num_steps == 2
    for bad, needle in [(base.replace("-decode", ""), "ambiguous option"),  # the alias is gone in 0.5.23
                        (f"{base} --enable-mixed-chunk", "supports_mixed_chunk"),
                        (base.replace("--speculative-adaptive ", "--speculative-num-steps 3 --speculative-eagle-topk 2 "
                                      "--speculative-num-draft-tokens 8 "), "sglang-0.5.23 family does not model"),
                        (f"{base} --speculative-eagle-topk 2 --speculative-num-steps 3 "
                         "--speculative-num-draft-tokens 8", "sglang 0.5.23 disables"),
                        (f"{base} --disable-overlap-schedule", "overlap")]:
        with pytest.raises(UsageError, match=needle):
            launch(bad, "upstream-v23")
    static = launch(base.replace("--speculative-adaptive ", "--speculative-num-steps 3 --speculative-eagle-topk 1 "
                                 "--speculative-num-draft-tokens 4 "), "upstream-v23")
    assert static.config.speculative_adaptive is False and "static speculation" in static.describe()
    assert "--enable-mixed-chunk" in " ".join(launch(f"{base} --enable-mixed-chunk", "upstream-adaptive").notes)


def test_release_rules_are_properties_not_release_strings() -> None:
    from specstate.model.families import family_names, get_family
    from specstate.server_args import RULES, TABLES, release_of_family, rules

    releases = {f: release_of_family(f) for f in family_names()}
    assert set(RULES) == set(TABLES) == set(releases.values())
    # a family without a table of its own reads its base's (sglang-0.5.9: 0.5.12's flags)
    own = {f: r for f, r in releases.items() if r == get_family(f).source_release}
    assert releases["sglang-0.5.9"] == "0.5.12" and "sglang-0.5.9" not in own
    assert {r: RULES[r].family for r in RULES} == {v: k for k, v in own.items()}
    assert all(RULES[r].release == r for r in RULES)
    assert [r for r in RULES if rules(r).adaptive_v2] == ["0.5.17", "0.5.23"]
    assert json.loads(rules("0.5.23").default_adaptive_json())["1"]["candidate_steps"] == [1, 3, 5, 7]
    assert rules("0.5.17").default_adaptive_json() is None
    with pytest.raises(UsageError, match="Expected an sglang release"):
        rules("0.5.99")


@pytest.mark.parametrize("variant", ["upstream-adaptive", "upstream-v23"])
def test_turning_the_decode_graph_off_is_refused_per_release(variant: str) -> None:
    base = "--speculative-algorithm EAGLE3 --speculative-adaptive --cuda-graph-max-bs-decode 16"
    for extra in ("--disable-decode-cuda-graph", "--cuda-graph-backend-decode disabled"):
        with pytest.raises(UsageError, match=f"{extra.split()[0]}.*not modelled"):
            launch(f"{base} {extra}", variant)
    assert "--cuda-graph-backend-decode" in launch(f"{base} --cuda-graph-backend-decode full", variant).not_modelled
