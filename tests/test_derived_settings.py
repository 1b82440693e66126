"""What sglang derives from the user's model and GPU (``--model-config``, ``--gpu``;
``specstate/server_args/_settings.py``): the attention backend, the page size it forces, the
context length, the chunk and CUDA-graph defaults, the draft shape; shown in the verdict's
coverage block with their sources, and the launches sglang refuses on them. The seed's launch
(Kimi K2.5, EAGLE-3, topk 4, 16 draft tokens) with a Kimi-K2.5-shaped ``config.json``
(tests/data/model-configs/kimi-k2.5.json) is judged at the page size sglang picks."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from specstate.cli import main
from specstate.errors import UsageError
from specstate.server_args import Launch, deployment_of, launch_tokens, page_modelled, parse_launch
from specstate.server_args._hardware import read_model_config
from tests.test_coverage import SEED8, SMALL

KIMI = Path(__file__).resolve().parent / "data" / "model-configs" / "kimi-k2.5.json"
#: a v2-family launch that starts and passes its sweep on 0.5.23 (docs/check.md): topk 1
ADAPTIVE = "--speculative-algorithm EAGLE3 --speculative-adaptive --cuda-graph-max-bs-decode 16 --max-running-requests 48"


def _launch(flags: str, variant: str = "fixed-threshold", model: Path | str | None = KIMI,
            gpu: str | None = "H200") -> Launch:
    tokens = launch_tokens(after_dashes=shlex.split(flags), variant=variant)
    return parse_launch(tokens, variant, deployment_of(model, gpu), read_model_path=True)


def _write(tmp_path: Path, config: dict) -> Path:  # type: ignore[type-arg]
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path  # a model folder holding its config.json


def _llama(tmp_path: Path) -> Path:
    return _write(tmp_path, {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
                             "max_position_embeddings": 8192,
                             "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})


def test_the_kimi_config_is_read_as_sglang_reads_it() -> None:
    m = read_model_config(KIMI)
    assert (m.architecture, m.mla, m.dsa) == ("KimiK25ForConditionalGeneration", True, False)
    # text_config's max_position_embeddings; the yarn factor 64 is not applied: the scaling names
    # its original_max_position_embeddings (get_context_length)
    assert (m.context_len, m.context_key) == (262144, "max_position_embeddings")


def test_the_seeds_launch_on_an_h200_runs_at_page_size_1_and_the_naive_patch_still_fails(tmp_path: Path,
                                                                                         capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "naive-threshold", "--parts", "sweep", "--json", "--failures", str(tmp_path),
                 "--model-config", str(KIMI), "--gpu", "H200", "--", *shlex.split(SEED8)])
    r = json.loads(capsys.readouterr().out)
    assert code == 1 and r["verdict"] == "violation" and "160" in r["violation"]["actual"]
    derived = {d["setting"]: d for d in r["coverage"]["derived"]}
    # an MLA model on Hopper: fa3 (_get_default_attn_backend), which forces no page size: 1 (_handle_page_size)
    assert derived["attention_backend"]["value"] == "fa3" and "_get_default_attn_backend" in \
        derived["attention_backend"]["source"]
    assert derived["page_size"]["value"] == 1 and "_handle_page_size" in derived["page_size"]["source"]
    assert derived["context_length"]["value"] == 262144 and r["details"]["config"]["context_len"] == 262144
    assert (derived["cuda_graph_max_bs"]["value"], derived["chunked_prefill_size"]["value"]) == (512, 8192)  # tp 8
    assumed = {a["setting"] for a in r["coverage"]["assumed"]}
    assert assumed == {"max_total_tokens"}  # page size, backend, context length: derived, not assumed


def test_the_corrected_patch_on_one_h200_rank_passes(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code = main(["check", "--variant", "fixed-threshold", "--parts", "sweep", "--json", "--failures", str(tmp_path),
                 "--model-config", str(KIMI), "--gpu", "H200", "--", *shlex.split(SEED8.replace("--tp 8", "--tp 1"))])
    r = json.loads(capsys.readouterr().out)
    assert code == 0 and r["verdict"] == "pass" and r["details"]["config"]["page_size"] == 1
    assert r["details"]["config"]["cuda_graph_max_bs"] == 256  # the H200 row at tp 1


def test_the_seeds_launch_on_a_b200_is_refused_as_sglang_refuses_it(capsys) -> None:  # noqa: ANN001
    # sm100: the DeepSeek branch picks trtllm_mla, which forces page size 64; topk 4 at page size 64
    # runs only on flashinfer / fa3 (ServerArgs._handle_speculative_decoding raises ValueError)
    code = main(["check", "--variant", "naive-threshold", "--parts", "sweep", "--model-config", str(KIMI),
                 "--gpu", "B200", "--", *shlex.split(SEED8)])
    err = capsys.readouterr().err
    assert code == 2 and "topk > 1 with page size 64 runs only on flashinfer, fa3, not trtllm_mla" in err
    assert "KimiK25ForConditionalGeneration on sm100 (B200)" in err


def test_a_derived_page_size_flows_into_the_config_where_modelled_and_is_not_judged_elsewhere(
        tmp_path: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    from specstate.server_args import _derive

    launch = _launch(ADAPTIVE, "upstream-v23", gpu="B200")
    page = launch.settings.page_size
    assert page is not None and page.value == 64 and page.derived and "trtllm_mla" in page.source
    gap = [x for x in launch.coverage["not_judged"] if x.get("what") == "page size 64"]
    assert page_modelled(64, "0.5.23") and launch.config.page_size == 64 and gap == []  # 0.5.23's family pages
    monkeypatch.setattr(_derive, "pages_modelled", lambda release: False)  # a family that models no paged KV
    launch = _launch(ADAPTIVE, "upstream-v23", gpu="B200")
    gap = [x for x in launch.coverage["not_judged"] if x.get("what") == "page size 64"]
    assert launch.config.page_size == 1 and len(gap) == 1
    assert gap[0]["reason"].startswith("derived page size 64 (from backend trtllm_mla chosen for architecture "
                                       "KimiK25ForConditionalGeneration on GPU B200): not modelled")
    code = main(["check", "--engine", "sglang-0.5.23", "--parts", "sweep", "--failures", str(tmp_path),
                 "--model-config", str(KIMI), "--gpu", "B200", "--", *ADAPTIVE.split()])
    out = capsys.readouterr().out
    assert code == 4 and "verdict: NOT JUDGED" in out and "not judged: page size 64" in out


@pytest.mark.parametrize("gpu, release_variant, chunk, graphs", [
    ("A100-40GB", "fixed-threshold", 4096, 32),  # 35-60 GB: 4k tokens, 32 graphs below tp 4
    ("A100", "fixed-threshold", 8192, 256),  # 60-90 GB
    ("B200", "fixed-threshold", 16384, 512),  # 160 GB and up
    ("L4", "fixed-threshold", 2048, 24),  # 20-35 GB on 0.5.12
    ("L4", "upstream-v23", 4096, 48),  # 0.5.23 grew that row (arg_groups/memory_hook.py)
])
def test_the_gpus_row_sets_the_chunk_and_graph_defaults(tmp_path: Path, gpu: str, release_variant: str, chunk: int,
                                                        graphs: int) -> None:
    flags = SMALL.replace("--cuda-graph-max-bs 16 ", "") if release_variant == "fixed-threshold" else \
        ADAPTIVE.replace("--cuda-graph-max-bs-decode 16 ", "")
    launch = _launch(flags, release_variant, _llama(tmp_path), gpu)
    assert (launch.config.chunked_prefill_size, launch.config.cuda_graph_max_bs) == (chunk, graphs)
    sources = {d["setting"]: d["source"] for d in launch.coverage["derived"]}
    assert gpu in sources["chunked_prefill_size"] and gpu in sources["cuda_graph_max_bs"]


@pytest.mark.parametrize("gpu, topk, backend, page", [
    ("H100", 1, "fa3", 1),  # Hopper, topk 1 at page size 1: fa3
    ("H100", 4, "flashinfer", 1),  # Hopper, topk 4: not fa3's case
    ("A100", 1, "flashinfer", 1),  # neither Hopper nor sm100
    ("B200", 1, "trtllm_mha", 64),  # sm100, topk 1 given: trtllm_mha, which snaps page size 1 to 64
])
def test_an_mha_models_backend_and_page_size(tmp_path: Path, gpu: str, topk: int, backend: str, page: int) -> None:
    flags = SMALL.replace("topk 4", f"topk {topk}") + (" --disable-overlap-schedule" if topk == 1 else "")
    launch = _launch(flags, model=_llama(tmp_path), gpu=gpu)
    s = launch.settings
    assert (s.attention_backend.value, s.page_size.value) == (backend, page)  # type: ignore[union-attr]
    assert launch.config.page_size == (page if page_modelled(page, "0.5.12") else 1)
    assert all(page_modelled(64, r) for r in ("0.5.12", "0.5.17", "0.5.23"))  # paged KV in every family
    assert not page_modelled(2048, "0.5.17")  # past BOUNDS["page_size"]
    # the llama3 rope scaling keeps max_position_embeddings as it is (get_context_length)
    assert launch.config.context_len == 8192


def test_an_architecture_specstate_does_not_read_leaves_backend_and_page_size_assumed(tmp_path: Path) -> None:
    model = _write(tmp_path, {"architectures": ["Qwen3NextForCausalLM"], "num_attention_heads": 16,
                              "max_position_embeddings": 32768})
    launch = _launch(SMALL, model=model)
    assert launch.settings.attention_backend is None and launch.settings.page_size is None
    assumed = {a["setting"]: a["why"] for a in launch.coverage["assumed"]}
    assert "not derived: architecture Qwen3NextForCausalLM" in assumed["page_size"]
    assert launch.config.context_len == 32768  # the context length is still the model's


def test_the_draft_shape_left_out_is_the_one_sglang_picks_for_the_architecture(tmp_path: Path) -> None:
    flags = "--speculative-algorithm EAGLE3 --cuda-graph-max-bs 16 --speculative-disable-batch-threshold 5"
    c = _launch(flags, model=_llama(tmp_path), gpu="H100").config  # auto_choose_speculative_params: Llama
    assert (c.speculative_num_steps, c.speculative_eagle_topk, c.speculative_num_draft_tokens) == (5, 4, 8)
    kimi = _launch(flags + " --disable-overlap-schedule").config  # every other architecture
    assert (kimi.speculative_num_steps, kimi.speculative_eagle_topk, kimi.speculative_num_draft_tokens) == (3, 1, 4)
    with pytest.raises(UsageError, match="give all three, or --model-config"):
        _launch(flags, model=None, gpu=None)


def test_a_context_length_above_the_models_is_refused_unless_sglang_is_told_to_allow_it() -> None:
    with pytest.raises(UsageError, match="expected at most the model's 262144"):
        _launch(SMALL + " --context-length 300000")
    allowed = _launch("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 " + SMALL + " --context-length 300000")
    assert allowed.config.context_len == 300000


@pytest.mark.parametrize("flags, gpu, needle", [
    (SMALL.replace("topk 4", "topk 1") + " --disable-overlap-schedule --attention-backend trtllm_mla", "H100",
     "the trtllm_mla backend runs on Blackwell only"),  # _handle_attention_backend_compatibility raises
    (SMALL, "H300", "--gpu: expected one of H200, H100"),
])
def test_what_sglang_refuses_on_this_gpu_is_one_line(flags: str, gpu: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle) as e:
        _launch(flags, gpu=gpu)
    assert "\n" not in str(e.value)


def test_a_dsa_model_gets_its_backend_and_page_size_64(tmp_path: Path) -> None:
    model = _write(tmp_path, {"architectures": ["DeepseekV32ForCausalLM"], "num_attention_heads": 128,
                              "kv_lora_rank": 512, "index_topk": 2048, "max_position_embeddings": 163840})
    launch = _launch(SMALL.replace("topk 4", "topk 1") + " --disable-overlap-schedule", model=model)
    assert (launch.settings.attention_backend.value, launch.settings.page_size.value) == ("nsa", 64)  # type: ignore[union-attr]
    with pytest.raises(UsageError, match="not nsa"):  # topk 4 at page size 64 on nsa: sglang raises
        _launch(SMALL, model=model)


def test_without_model_and_gpu_the_assumptions_are_named_and_nothing_is_derived() -> None:
    launch = _launch(SMALL, model=None, gpu=None)
    assert launch.coverage["derived"] == []
    assumed = {a["setting"]: (a["value"], a["why"]) for a in launch.coverage["assumed"]}
    assert assumed["context_length"][0] == "4096 tokens" and "give --model-config" in assumed["context_length"][1]
    assert "an H100 / H200's default" in assumed["chunked_prefill_size"][1] and "--gpu" in \
        assumed["chunked_prefill_size"][1]


def test_model_config_and_gpu_without_a_launch_and_a_bad_config_are_usage_errors(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert main(["run", "--gpu", "H200"]) == 2
    assert "give the launch's flags too" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"hidden_size": 8}')
    assert main(["check", "--parts", "sweep", "--model-config", str(tmp_path / "bad.json"), "--", *SMALL.split()]) == 2
    assert "expected \"architectures\"" in capsys.readouterr().err


def test_the_python_api_takes_the_model_and_gpu_too(tmp_path: Path) -> None:
    from specstate.testing import check

    # on a B200 the seed's topk 4 needs a backend that drafts a tree over pages: flashinfer, which forces none
    flags = SEED8.replace("--tp 8", "--tp 1") + " --attention-backend flashinfer"
    r = check(flags, variant="fixed-threshold", parts=("sweep",), failures=tmp_path, model_config=KIMI, gpu="B200")
    assert r.verdict == "pass" and r.details["config"]["chunked_prefill_size"] == 16384  # the B200's row
    with pytest.raises(UsageError, match="not trtllm_mla"):
        check(SEED8, variant="fixed-threshold", parts=("sweep",), model_config=KIMI, gpu="B200")


@pytest.mark.parametrize("release, backend, page", [
    ("0.5.12", "nsa", 64),  # server_args.py: "Setting page size to 64 for DeepSeek DSA."
    ("0.5.23", "dsa", 128),  # model_overrides/deepseek_v2.py: 64 * get_dsa_index_kpool (2 here)
])
def test_the_dsa_page_size_per_release(tmp_path: Path, release: str, backend: str, page: int) -> None:
    from specstate.server_args import Deployment, gpu_named
    from specstate.server_args._settings import derive_settings

    model = read_model_config(_write(tmp_path, {"architectures": ["DeepseekV32ForCausalLM"], "index_topk": 2048,
                                                "index_kpool": 2, "max_position_embeddings": 163840}))
    s = derive_settings({"speculative_algorithm": "EAGLE3", "speculative_eagle_topk": 1}, release,
                        Deployment(model, gpu_named("H200")))
    assert (s.attention_backend.value, s.page_size.value) == (backend, page)  # type: ignore[union-attr]


def test_a_local_model_path_is_read_as_sglang_reads_it(tmp_path: Path) -> None:
    folder = _llama(tmp_path)  # no --model-config: --model-path's config.json (a Hub id is not fetched)
    launch = _launch(f"--model-path {folder} {SMALL}", model=None, gpu="H100")
    assert launch.settings.deployment.model is not None and launch.config.context_len == 8192
    assert launch.settings.attention_backend.value == "flashinfer"  # type: ignore[union-attr]  # MHA, topk 4
    assert _launch(f"--model-path moonshotai/Kimi-K2.5 {SMALL}", model=None, gpu=None).config.context_len == 4096
    tokens = launch_tokens(after_dashes=shlex.split(f"--model-path {folder} {SMALL}"), variant="fixed-threshold")
    assert parse_launch(tokens, "fixed-threshold").config.context_len == 4096  # a recording's start: not read
