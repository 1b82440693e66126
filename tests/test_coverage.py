"""A verdict is a statement of coverage (issue 36): every command's ``--json`` carries the
coverage block; a flag that changes the modelled state outside the model makes the verdict
"not judged" (exit 4), never PASS; an inconclusive proof is not judged, never FAIL; the pasted
line is what is judged (environment assignments, ``\\``-newline continuations, config aliases);
each claim about a flag is checked against the release's own ``ServerArgs`` source."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from specstate.check_result import EXIT_CODES, EXIT_NOT_JUDGED, CheckResult, coverage_block
from specstate.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: the seed's 8-GPU launch (docs: ../shared/seed/crash-at-c10.md): Kimi K2.5, tensor parallel 8, EAGLE-3,
#: 16 draft tokens, the patch's threshold 5, FlashInfer all-reduce fusion
SEED8 = ("python3 -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --trust-remote-code --tp 8 "
         "--speculative-algorithm EAGLE3 --speculative-draft-model-path lightseekorg/kimi-k2.5-eagle3 "
         "--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 16 "
         "--disable-overlap-schedule --enable-flashinfer-allreduce-fusion --speculative-disable-batch-threshold 5")
SMALL = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
         "--speculative-num-draft-tokens 16 --cuda-graph-max-bs 16 --speculative-disable-batch-threshold 5")
KEYS = {"judged", "modelled", "not_judged", "unaffected", "not_examined", "derived", "assumed", "environment", "reached",
        "not_reached"}


#: the fuzz part's cases in the two launches' checks below: what they assert is the verdict's coverage
#: (not judged / pass, the assumptions, the paths reached: 5 cases reach chunked prefill and both
#: crossings), not the fuzzer's power; 25 cases took 10 of a check's 12 CPU s (later cases are longer)
CASES = "5"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_the_seeds_8_gpu_launch_is_not_judged_and_says_why(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "fixed-threshold", "--max-examples", CASES, "--quiet", "--failures",
                 str(tmp_path), "--", *shlex.split(SEED8)])
    out = capsys.readouterr()
    assert code == EXIT_NOT_JUDGED == 4, out.out + out.err
    assert "verdict: PASS" not in out.out and "verdict: NOT JUDGED" in out.out
    assert "NOT JUDGED: --tp-size 8" in out.out and "the model runs one rank" in out.out
    assert "assumed page_size = page size 1" in out.out and "trtllm_mla" in out.out  # the derived page size, named
    assert "assumed cuda_graph_max_bs = 512" in out.out and "assumed context_length" in out.out
    assert "checked to change nothing the model holds: --model-path, --trust-remote-code" in out.out
    reached = next(ln for ln in out.out.splitlines() if ln.startswith("  paths reached: "))
    assert "chunked-prefill" in reached and "crossed-up" in reached and "crossed-down" in reached


def test_the_same_launch_at_tp_1_passes_with_exit_0(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code, r = _json(capsys, ["check", "--variant", "fixed-threshold", "--max-examples", CASES, "--quiet", "--json",
                             "--failures", str(tmp_path), "--", *shlex.split(SEED8.replace("--tp 8", "--tp 1"))])
    assert code == 0 and r["ok"] and r["verdict"] == "pass" and r["exit_code"] == 0
    assert r["coverage"]["not_judged"] == [] and "--tp-size" in r["coverage"]["unaffected"]
    assert {a["setting"] for a in r["coverage"]["assumed"]} >= {"page_size", "attention_backend", "context_length"}


@pytest.mark.parametrize("flag, value", [("--dp-size", "8"), ("--attention-backend", "flashmla"),
                                         ("--attention-backend", "cutlass_mla"), ("--pp-size", "2")])
def test_a_flag_that_changes_the_modelled_state_is_never_a_pass(tmp_path: Path, capsys, flag: str,  # noqa: ANN001
                                                                 value: str) -> None:
    # a paged MLA backend with topk 1 (sglang refuses topk > 1 on it: the next test)
    launch = SMALL if flag != "--attention-backend" else SMALL.replace("topk 4", "topk 1") + " --disable-overlap-schedule"
    code, r = _json(capsys, ["check", "--variant", "fixed-threshold", "--parts", "sweep", "--json", "--failures",
                             str(tmp_path), "--", *launch.split(), flag, value])
    assert code == 4 and not r["ok"] and r["verdict"] == "not judged" and r["violation"] is None
    assert [x["flag"] for x in r["coverage"]["not_judged"]] == [f"{flag} {value}"]


def test_a_paged_mla_backend_with_a_draft_tree_is_refused_as_sglang_refuses_it(capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "fixed-threshold", "--parts", "sweep", "--", *SMALL.split(),
                 "--attention-backend", "flashmla"])
    err = capsys.readouterr().err
    assert code == 2 and "topk > 1 with page size 64 runs only on flashinfer, fa3, not flashmla" in err
    assert "ServerArgs._handle_speculative_decoding" in err


def test_a_backend_that_keeps_page_size_1_and_an_unknown_flag_are_not_claimed_harmless(capsys) -> None:  # noqa: ANN001
    code, r = _json(capsys, ["check", "--variant", "fixed-threshold", "--parts", "sweep", "--json", "--",
                             *SMALL.split(), "--attention-backend", "fa3", "--enable-torch-compile"])
    assert code == 0 and "--attention-backend" in r["coverage"]["unaffected"]
    assert r["coverage"]["not_examined"] == ["--enable-torch-compile"]  # accepted, never "changes nothing"


def test_the_naive_switch_without_its_threshold_warns_that_it_never_fired(capsys) -> None:  # noqa: ANN001
    flags = SMALL.replace(" --speculative-disable-batch-threshold 5", "").split()
    code, r = _json(capsys, ["check", "--variant", "naive-threshold", "--parts", "sweep", "--json", "--", *flags])
    assert code == 0
    missing = {p["path"]: p["why"] for p in r["coverage"]["not_reached"]}
    assert "the switch never fired" in missing["crossed-up"] and "the switch never fired" in missing["crossed-down"]


def test_check_steers_to_chunked_prefill_where_the_launch_can_take_it(capsys) -> None:  # noqa: ANN001
    # the default chunk, 8192: the sweep's 48 short prompts never fill it; check adds prompts that do
    code, r = _json(capsys, ["check", "--variant", "fixed-threshold", "--parts", "sweep", "--json", "--", *SMALL.split()])
    assert code == 0 and any(p.startswith("chunked-prefill") for p in r["coverage"]["reached"])
    assert "then prompts longer than the chunk size" in r["details"]["parts"][0]["summary"]
    # a chunk no batch of the launch can fill: said unreachable, not silently missed
    code, r = _json(capsys, ["check", "--variant", "fixed-threshold", "--parts", "sweep", "--json", "--", *SMALL.split(),
                             "--max-running-requests", "1", "--chunked-prefill-size", "8192"])
    why = {p["path"]: p["why"] for p in r["coverage"]["not_reached"]}
    assert code == 0 and why["chunked-prefill"].startswith("not reachable")


PROVE_64 = [*SMALL.split(), "--chunked-prefill-size", "64"]


def test_an_inconclusive_proof_is_not_judged_never_fail(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code = main(["prove", "--variant", "fixed-threshold", "--quiet", "--failures", str(tmp_path), "--", *PROVE_64])
    out = capsys.readouterr().out
    assert code == 4, out
    assert "FAIL" not in out and "reproduce with" not in out and "None" not in out
    assert "NOT JUDGED (exit 4)" in out and "bs = 46 not reached" in out and "holds for bs <= 45" in out
    assert "--chunked-prefill-size 64" in out and "raise --chunked-prefill-size" in out  # why, and what to change
    code, r = _json(capsys, ["prove", "--variant", "fixed-threshold", "--quiet", "--json", "--failures", str(tmp_path),
                             "--", *PROVE_64])
    assert code == 4 and r["verdict"] == "not judged" and r["reproduce"] is None and r["violation"] is None
    assert {x["what"] for x in r["coverage"]["not_judged"]} >= {"prove bs 46..48 under capture list config"}


def test_checks_prove_part_is_inconclusive_not_failed(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code, r = _json(capsys, ["check", "--variant", "fixed-threshold", "--parts", "prove", "--json", "--failures",
                             str(tmp_path), "--", *PROVE_64])
    assert code == 4 and r["details"]["parts"][0]["status"] == "inconclusive" and r["reproduce"] is None
    assert r["coverage"]["not_judged"][0]["what"] == "prove (inconclusive)"


def _commands(tmp: Path) -> dict[str, list[str]]:
    launch = ["--", *SMALL.split(), "--max-running-requests", "4"]
    trace = tmp / "t.json"
    return {"check": ["check", "--parts", "sweep", "--json", *launch],
            "run": ["run", "--json", "--quiet", "--failures", str(tmp), *launch],
            "run (built-in config)": ["run", "--json", "--quiet", "--scenario", "seed-sweep"],
            "fuzz": ["fuzz", "--json", "--quiet", "--max-examples", "5", "--failures", str(tmp), *launch],
            "explore": ["explore", "--json", "--quiet", "--variant", "fixed-threshold", "--max-bs", "2", "--depth", "4",
                        "--failures", str(tmp), *launch],
            "prove": ["prove", "--json", "--quiet", "--failures", str(tmp), *launch],
            "reproduce": ["reproduce", str(trace), "--json", "--quiet"],
            "minimize": ["minimize", str(trace), "--json", "--quiet", "--failures", str(tmp)]}


def test_every_commands_json_carries_the_coverage_block(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    main(["run", "--variant", "naive-threshold", "--quiet", "--failures", str(tmp_path)])  # a trace to replay
    capsys.readouterr()
    next(tmp_path.glob("*.json")).rename(tmp_path / "t.json")
    for name, argv in _commands(tmp_path).items():
        code, r = _json(capsys, argv)
        assert set(r["coverage"]) == KEYS, name
        assert r["coverage"]["judged"], name
        assert r["exit_code"] == code or name in ("reproduce", "minimize"), name  # 3: reproduce's own
        assert r["verdict"] in ("pass", "violation", "not judged"), name


def test_conform_and_oracle_carry_the_coverage_block_too(capsys) -> None:  # noqa: ANN001
    # oracle's --json: tests/test_oracle_cli.py (its oracle process is slow); conform prints one JSON per recording
    assert main(["conform", str(ROOT / "tests/data/gpu/deferred4/random-0-0.jsonl.gz")]) == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r["coverage"]) == KEYS and r["verdict"] == "pass" and r["exit_code"] == 0
    assert "recorded iterations replayed on the model (fixed-threshold)" in r["coverage"]["judged"]


def test_the_exit_codes_are_one_table_in_docs_check_md() -> None:
    page = (ROOT / "docs" / "check.md").read_text()
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in page
    readme = (ROOT / "README.md").read_text()
    assert "4 not judged" in readme


def test_check_result_verdicts_and_exit_codes() -> None:
    gap = coverage_block(not_judged=[{"flag": "--tp-size 8", "parts": "every part", "reason": "one rank"}])
    passed = CheckResult("check", "s", "v", True)
    not_judged = CheckResult("check", "s", "v", True, coverage=gap)
    failed = CheckResult("check", "s", "v", False, problems=("a violation",), coverage=gap)
    assert (passed.verdict, passed.exit_code, passed.ok) == ("pass", 0, True)
    assert (not_judged.verdict, not_judged.exit_code, not_judged.ok) == ("not judged", 4, False)
    assert (failed.verdict, failed.exit_code) == ("violation", 1)
    assert "NOT JUDGED" in not_judged.report and "not judged: --tp-size 8: one rank" in not_judged.report
    assert "reproduce with" not in not_judged.report


# --- the pasted line is what is judged ---------------------------------------------------------------

def _launch(text: str, variant: str = "fixed-threshold"):  # noqa: ANN202
    from specstate.server_args import launch_tokens, parse_launch

    return parse_launch(launch_tokens(server_args=text, variant=variant), variant)


TOPK1 = "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"


def test_sglang_enable_spec_v2_0_on_the_line_is_applied() -> None:
    from specstate.errors import UsageError

    with pytest.raises(UsageError, match="spec v2"):
        _launch(f"python3 -m sglang.launch_server {TOPK1}")
    launch = _launch(f"SGLANG_ENABLE_SPEC_V2=0 CUDA_VISIBLE_DEVICES=0,1 python3 -m sglang.launch_server {TOPK1}")
    assert launch.config.disable_overlap_schedule
    env = {e["name"]: e for e in launch.coverage["environment"]}
    assert env["SGLANG_ENABLE_SPEC_V2"]["applied"] and env["SGLANG_ENABLE_SPEC_V2"]["value"] == "0"
    assert not env["CUDA_VISIBLE_DEVICES"]["applied"] and "not modelled" in env["CUDA_VISIBLE_DEVICES"]["note"]
    with pytest.raises(UsageError, match="EnvBool"):
        _launch(f"SGLANG_ENABLE_SPEC_V2=maybe python3 -m sglang.launch_server {TOPK1}")


def test_a_multi_line_paste_parses_as_the_shell_reads_it(capsys) -> None:  # noqa: ANN001
    pasted = "python3 -m sglang.launch_server \\\n  --model-path x \\\n  " + SMALL.replace(" --cuda", " \\\n  --cuda")
    assert _launch(pasted).config == _launch(SMALL).config
    assert main(["check", "--parts", "sweep", "--server-args", pasted]) == 0
    assert "'\\n'" not in capsys.readouterr().err


def test_a_toml_config_takes_the_cli_alias(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from specstate.server_args import launch_tokens, parse_launch

    f = tmp_path / "launch.toml"
    f.write_text('tp = 8\nspeculative-algorithm = "EAGLE3"\nspeculative_num_steps = 3\nspeculative-eagle-topk = 4\n'
                 'speculative-num-draft-tokens = 16\n')
    launch = parse_launch(launch_tokens(config_file=f, variant="fixed-threshold"), "fixed-threshold")
    assert [x["flag"] for x in launch.coverage["not_judged"]] == ["--tp-size 8"]


# --- each claim about a flag, against the release's own source ----------------------------------------

def test_each_affecting_claim_cites_the_release_source() -> None:
    from tests.sglang_source import sglang_source

    from specstate.server_args._coverage import AFFECTING, PAGED_BACKENDS

    text = (sglang_source("0.5.12") / "server_args.py").read_text()
    for a in AFFECTING:
        method, line = a.cites
        body = text[text.index(f"def {method}("):]
        body = body[:body.index("\n    def ", 1)]
        assert line in body, (a.dest, method, line)
    compat = text[text.index("def _handle_attention_backend_compatibility("):]
    for backend, page in PAGED_BACKENDS.items():
        block = compat[compat.index(f'== "{backend}"'):]
        assert f"self.page_size = {page}" in block[:900], backend


def test_the_harmless_flags_write_no_modelled_field() -> None:
    """No ``ServerArgs`` handler that assigns a field the model reads tests a flag called harmless."""
    import ast

    from tests.sglang_source import sglang_source

    from specstate.server_args import table
    from specstate.server_args._coverage import HARMLESS

    modelled = {m.field for m in table("0.5.12")} | {"page_size", "attention_backend", "chunked_prefill_size",
                                                     "cuda_graph_max_bs", "max_running_requests"}
    tree = ast.parse((sglang_source("0.5.12") / "server_args.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_handle")):
        for node in ast.walk(fn):
            if isinstance(node, ast.If):
                tested = {a.attr for a in ast.walk(node.test) if isinstance(a, ast.Attribute)}
                written = {t.attr for s in node.body for t in ast.walk(s)
                           if isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store)}
                if written & modelled:
                    assert not tested & HARMLESS, (fn.name, tested & HARMLESS, written & modelled)


def test_the_python_api_returns_the_same_verdict_and_exit_code(tmp_path: Path) -> None:
    from specstate.testing import check

    r = check(SEED8, variant="fixed-threshold", parts=("sweep",), failures=tmp_path)
    assert (r.verdict, r.exit_code, r.ok, r.violation) == ("not judged", 4, False, None)
    assert "NOT JUDGED" in r.report and "not judged: --tp-size 8" in r.report  # what the pytest fixture fails with
    ok = check(SEED8.replace("--tp 8", "--tp 1"), variant="fixed-threshold", parts=("sweep",), failures=tmp_path)
    assert (ok.verdict, ok.exit_code, ok.ok) == ("pass", 0, True)


def test_the_v2_releases_do_not_read_sglang_enable_spec_v2() -> None:
    from specstate.server_args import launch_tokens, parse_launch

    line = "SGLANG_ENABLE_SPEC_V2=0 sglang serve --speculative-algorithm EAGLE3 --speculative-adaptive"
    for variant, says in (("upstream-adaptive", "sglang 0.5.17: it only warns it was removed"),
                          ("upstream-v23", "sglang 0.5.23: it does not read it")):
        launch = parse_launch(launch_tokens(server_args=line, variant=variant), variant)
        (env,) = launch.coverage["environment"]
        assert not env["applied"] and f"not read by {says}" in env["note"], (variant, env["note"])
        assert not launch.config.disable_overlap_schedule


def test_what_each_v2_release_does_with_sglang_enable_spec_v2_is_its_source() -> None:
    """0.5.17's ``speculative_hook.py`` warns the variable was removed; 0.5.23's source never reads it
    (the notes its launch rules give, ``ReleaseRules.spec_v2_env``)."""
    from tests.sglang_source import sglang_source

    hook = sglang_source("0.5.17") / "arg_groups" / "speculative_hook.py"
    assert "SGLANG_ENABLE_SPEC_V2 has been removed" in hook.read_text()
    assert not any("SGLANG_ENABLE_SPEC_V2" in f.read_text() for f in sglang_source("0.5.23").rglob("*.py"))


#: where 0.5.17 and 0.5.23 do what each affecting claim says (0.5.23 moved ``ServerArgs``' handlers into
#: ``arg_groups/*_hook.py`` and the backend overrides into ``arg_groups/overrides.py``)
LATER = {"0.5.17": {"tp_size": "if self.tp_size < 4:",
                    "dp_size": "self.chunked_prefill_size = self.chunked_prefill_size // self.dp_size",
                    "pp_size": "def _handle_pipeline_parallelism(self):",
                    "attention_backend": "page_size = 64", "decode_attention_backend": "page_size = 128"},
         "0.5.23": {"tp_size": "if cfg.tp_size < 4:",
                    "dp_size": "chunked_prefill_size=cfg.chunked_prefill_size // cfg.attn_dp_size",
                    "pp_size": "cfg.pp_size > 1", "attention_backend": "FlashMLA only supports a page_size of 64",
                    "decode_attention_backend": "page_size = 64"}}


@pytest.mark.parametrize("release", sorted(LATER))
def test_each_affecting_claim_holds_in_the_later_releases(release: str) -> None:
    from tests.sglang_source import sglang_source

    from specstate.server_args._coverage import AFFECTING

    text = "\n".join(p.read_text() for p in sorted(sglang_source(release).rglob("*.py"))
                     if "server_args" in p.name or "arg_groups" in p.parts)
    assert {a.dest for a in AFFECTING} == set(LATER[release])
    for dest, snippet in LATER[release].items():
        assert snippet in text, (release, dest, snippet)


def test_a_fuzz_run_that_never_reached_the_switch_is_not_judged_not_failed(capsys) -> None:  # noqa: ANN001
    code, r = _json(capsys, ["fuzz", "--variant", "fixed-threshold", "--max-examples", "1", "--seed", "1", "--json",
                             "--quiet"])
    assert code == 4 and r["verdict"] == "not judged" and r["violation"] is None and r["problems"] == []
    (gap,) = r["coverage"]["not_judged"]
    assert gap["parts"] == "fuzz" and gap["reason"].startswith("witnesses never reached")


def test_a_paged_backend_given_its_page_size_is_judged_at_that_size_on_the_v1_family(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """Paged KV (issue 39): ``--attention-backend flashmla --page-size 64`` runs the model at page
    size 64, judged (the backend alone leaves it not judged: the test above)."""
    launch = SMALL.replace("topk 4", "topk 1") + " --disable-overlap-schedule"
    code, r = _json(capsys, ["check", "--variant", "fixed-threshold", "--parts", "sweep", "--json", "--failures",
                             str(tmp_path), "--", *launch.split(), "--attention-backend", "flashmla",
                             "--page-size", "64"])
    assert code in (0, 1) and r["verdict"] in ("pass", "fail"), r["verdict"]
    assert r["coverage"]["not_judged"] == [] and "--page-size" in r["coverage"]["modelled"]
