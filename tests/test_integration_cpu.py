"""CPU tests of the pure parts of specstate.integration (no GPU, no sglang needed)."""

from __future__ import annotations

import ast
import contextlib
import enum
import importlib
import importlib.metadata
import json
import os
import sys
import types
from typing import Any

import pytest

from specstate.integration import agree, analyze, workloads
from specstate.integration import sglang_driver as drv
from specstate.integration import sglang_patch as patch
from specstate.integration._hookstate import STATE, phase, set_path
from tests.sglang_source import sglang_source

#: bound by ``_heavy_imports`` when the module's first test runs: a module-level import (or a
#: ``lazy_module`` stand-in, which pytest's collector touches) would import torch at collection
#: (``tests/test_startup.py`` checks that collecting the suite does not)
torch: Any = None
recm: Any = None  # specstate.integration.sglang_recorder: its capture imports torch


@pytest.fixture(autouse=True, scope="module")
def _heavy_imports() -> None:
    global torch, recm
    import torch as module

    from specstate.integration import sglang_recorder

    torch, recm = module, sglang_recorder


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "tests", "data", "gpu")


# --------------------------------------------------------------------------- workloads


def test_seed_sweep_shape():
    w = workloads.seed_sweep()
    assert [len(x) for x in w.waves] == list(workloads.SEED_SWEEP_CONCURRENCY)
    assert all(56 <= r.prompt_len <= 72 and r.max_new_tokens == 32 and r.ignore_eos and r.temperature == 0.0 for x in w.waves for r in x)
    assert workloads.seed_sweep().to_json() == w.to_json()


def test_random_workloads_deterministic_and_cross_threshold():
    a = [w.to_json() for w in workloads.random_workloads(3, 20, threshold=5)]
    b = [w.to_json() for w in workloads.random_workloads(3, 20, threshold=5)]
    assert a == b
    assert a != [w.to_json() for w in workloads.random_workloads(4, 20, threshold=5)]
    ws = workloads.random_workloads(0, 20, threshold=5)
    sizes = [len(wave) for w in ws for wave in w.waves]
    assert min(sizes) <= 5 < max(sizes)
    # both directions between consecutive waves, somewhere
    ups = downs = 0
    for w in ws:
        for x, y in zip(w.waves, w.waves[1:]):
            ups += len(x) <= 5 < len(y)
            downs += len(y) <= 5 < len(x)
    assert ups > 0 and downs > 0
    reqs = [r for w in ws for wave in w.waves for r in wave]
    assert any(r.abort_after_s is not None for r in reqs)
    assert any(r.delay_s > 0 for r in reqs)
    assert any(r.max_new_tokens == 1 for r in reqs)
    assert len({r.rid for r in reqs}) == len(reqs)


def test_workload_json_roundtrip(tmp_path):
    w = workloads.random_workload(1, 5, index=2)
    p = tmp_path / "w.json"
    workloads.dump_workload(w, str(p))
    w2 = workloads.load_workload(str(p))
    assert w2.to_json() == w.to_json()
    assert w.prompt(w.waves[0][0]) == w2.prompt(w2.waves[0][0])
    # the brief's minimal format
    p.write_text(json.dumps({"waves": [[{"rid": "a", "prompt_len": 3, "max_new_tokens": 4, "abort_after_s": None}]]}))
    w3 = workloads.load_workload(str(p))
    assert w3.name == "w" and w3.waves[0][0].delay_s == 0.0
    with pytest.raises(ValueError):
        workloads.Workload.from_json({"waves": [[{"rid": "a", "prompt_len": 3, "max_new_tokens": 4, "bogus": 1}]]})


def test_a_request_without_a_cap_is_sent_without_one():
    """``max_new_tokens: null`` reaches sglang as ``None`` (the scheduler's own clamp), survives the
    round trip, and 0 is still refused."""
    w = workloads.Workload.from_json({"waves": [[{"rid": "a", "prompt_len": 3, "max_new_tokens": None}]]})
    req = w.waves[0][0]
    assert req.sampling_params()["max_new_tokens"] is None
    assert workloads.Workload.from_json(w.to_json()).waves[0][0].max_new_tokens is None
    with pytest.raises(ValueError):
        workloads.Workload.from_json({"waves": [[{"rid": "a", "prompt_len": 3, "max_new_tokens": 0}]]})


def test_prompt_ids_stable():
    assert workloads.prompt_ids(0, "r1", 5) == workloads.prompt_ids(0, "r1", 5)
    ids = workloads.prompt_ids(0, "r1", 200)
    assert all(3 <= t < workloads.VOCAB_SIZE for t in ids)
    assert workloads.prompt_ids(0, "r1", 5) != workloads.prompt_ids(1, "r1", 5)


def test_build_workloads_and_write(tmp_path):
    items = drv.build_workloads(["seed-sweep"], n_random=3, random_seed=0, threshold=5, timing=True, timing_reps=2)
    names = [i["workload"]["name"] for i in items]
    assert names[0] == "seed-sweep" and len(set(names)) == len(names)
    t = [i for i in items if i.get("timing") in ("on", "off")]
    assert {i["timing"] for i in t} == {"on", "off"} and all(i["record"] == (i["timing"] == "on") for i in t)
    assert drv.main(["write-workloads", "--out", str(tmp_path), "--random", "2"]) == 0
    assert len(list(tmp_path.iterdir())) == 3


def test_engine_kwargs_match_readme():
    kw = drv.engine_kwargs()
    assert kw["speculative_algorithm"] == "EAGLE3" and kw["disable_overlap_schedule"] is True
    assert (kw["speculative_eagle_topk"], kw["speculative_num_steps"], kw["speculative_num_draft_tokens"]) == (4, 3, 16)
    assert kw["load_format"] == "dummy" and kw["skip_tokenizer_init"] is True and kw["cuda_graph_max_bs"] == 16
    for k in ("model_path", "speculative_draft_model_path"):
        with open(os.path.join(kw[k], "config.json")) as f:
            cfg = json.load(f)
        assert cfg["vocab_size"] == 32000 and os.path.exists(os.path.join(kw[k], "generation_config.json"))


# --------------------------------------------------------------------------- plugin


def test_plugin_dist_info_discoverable(monkeypatch):
    from specstate.integration.sglang_plugin import ENTRY_POINT_GROUP, PLUGIN_PATH

    monkeypatch.syspath_prepend(PLUGIN_PATH)
    importlib.invalidate_caches()
    eps = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == "specstate"]
    assert len(eps) == 1
    assert eps[0].value == "specstate.integration.sglang_plugin:register"
    assert eps[0].dist is not None and eps[0].dist.name == "specstate-sglang"
    assert callable(eps[0].load())


def _resolve_in_source(target: str) -> bool:
    """Does ``pkg.mod.Class.method`` exist in the unpacked sglang source (AST only)?"""
    site = str(sglang_source().parents[1])  # the folder that holds the ``sglang`` package
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod_path = os.path.join(site, *parts[:i]) + ".py"
        if os.path.exists(mod_path):
            with open(mod_path) as f:
                tree = ast.parse(f.read())
            rest = parts[i:]
            nodes = tree.body
            for name in rest:
                found = None
                for n in nodes:
                    if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
                        found = n
                if found is None:
                    return False
                nodes = getattr(found, "body", [])
            return True
    return False


@pytest.mark.sglang_source
def test_hook_targets_exist_in_sglang_source(monkeypatch):
    registered: list[tuple[str, object, object]] = []

    class HT(enum.Enum):
        BEFORE = "before"
        AFTER = "after"
        AROUND = "around"
        REPLACE = "replace"

    fake = types.ModuleType("sglang.srt.plugins.hook_registry")
    fake.HookRegistry = types.SimpleNamespace(register=lambda t, f, k: registered.append((t, f, k)))
    fake.HookType = HT
    with _fake_modules({"sglang": None, "sglang.srt": None, "sglang.srt.plugins": None, "sglang.srt.plugins.hook_registry": fake}):
        monkeypatch.setenv("SPECSTATE_PATCH", "fixed")
        monkeypatch.setenv("SPECSTATE_AGREE", "1")
        monkeypatch.setenv("SPECSTATE_REC_OUT", "/dev/null")
        import specstate.integration.sglang_plugin as plugin

        monkeypatch.setattr(plugin, "_registered", False)
        plugin.register()
    targets = [t for t, _, _ in registered]
    assert "sglang.srt.speculative.eagle_worker.EAGLEWorker.forward_batch_generation" in targets
    # patch registered before the recorder: the recorder's AROUND hook is the outer one
    fbg = [f for t, f, _ in registered if t.endswith("forward_batch_generation")]
    assert fbg[0] is patch.around_fbg and fbg[1] == recm.RECORDER.around_fbg
    # the patch refuses, with one clear line, the v2 worker and DP attention it does not patch
    refusers = {t.rsplit(".", 2)[-2]: f for t, f, _ in registered if t.endswith("__init__")}
    with pytest.raises(patch.PatchRefused, match="EAGLEWorkerV2") as e:
        refusers["EAGLEWorkerV2"](None, object())
    assert "\n" not in str(e.value)
    with pytest.raises(patch.PatchRefused, match="DP attention"):
        refusers["EAGLEWorker"](None, types.SimpleNamespace(server_args=types.SimpleNamespace(enable_dp_attention=True)))
    assert refusers["EAGLEWorker"](None, types.SimpleNamespace(server_args=types.SimpleNamespace(enable_dp_attention=False))) is None
    for t in targets:
        assert _resolve_in_source(t), t


# --------------------------------------------------------------------------- agree


def test_agree_simulated_models_bf16():
    v, h = 4096, 256
    e = agree.embeddings(v, h)
    succ = agree.succ_table(v)
    poison = agree.poisoned(v)
    th = agree.target_head(e, succ).to(torch.bfloat16).float()
    dh = agree.draft_head(e, succ, poison).to(torch.bfloat16).float()
    eb = e.to(torch.bfloat16).float()
    xs = torch.arange(3, v, 7)
    normed = eb[xs] / eb[xs].pow(2).mean(dim=1, keepdim=True).sqrt()  # RMSNorm, weight 1
    assert torch.equal((normed @ th.T).argmax(dim=1), succ[xs])
    d = (normed @ dh.T).argmax(dim=1)
    ok = ~poison[succ[succ[xs]]]
    assert torch.equal(d[ok], succ[succ[xs]][ok])
    assert ok.float().mean() > 0.75


def test_agree_expected_accept_lengths():
    seqs = agree.simulate_accept_lengths(range(3, 400, 13), vocab=32000, n_verify=8)
    flat = [n for s in seqs for n in s]
    assert set(flat) <= {1, 2, 4} and {2, 4} <= set(flat)
    assert 2.0 < sum(flat) / len(flat) < 4.0


def test_apply_agree_on_tiny_modules():
    v, h = 512, 32

    class M(torch.nn.Module):
        def __init__(self, draft: bool):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.embed_tokens = torch.nn.Embedding(v, h)
            self.model.layers = torch.nn.ModuleList([torch.nn.Module()])
            self.model.layers[0].self_attn = torch.nn.Module()
            self.model.layers[0].self_attn.o_proj = torch.nn.Linear(h, h, bias=False)
            self.model.layers[0].mlp = torch.nn.Module()
            self.model.layers[0].mlp.down_proj = torch.nn.Linear(2 * h, h, bias=False)
            self.model.norm = torch.nn.Module()
            self.model.norm.weight = torch.nn.Parameter(torch.rand(h))
            if draft:
                self.model.fc = torch.nn.Linear(3 * h, h, bias=False)
            self.lm_head = torch.nn.Linear(h, v, bias=False)

    t, d = M(False), M(True)
    t.requires_grad_(False)
    d.requires_grad_(False)
    agree.apply_agree(t, is_draft=False, vocab=v, hidden=h)
    agree.apply_agree(d, is_draft=True, vocab=v, hidden=h)
    assert float(t.model.layers[0].self_attn.o_proj.weight.abs().sum()) == 0.0
    assert torch.all(t.model.norm.weight == 1)
    x = torch.tensor([5, 40, 100])
    emb = t.model.embed_tokens.weight[x]
    aux = torch.cat([emb, emb, emb], dim=1)
    hd = d.model.fc(aux)
    assert torch.allclose(hd, emb)


# --------------------------------------------------------------------------- patch (pure)


def test_choose_path():
    f = patch.PatchConfig("fixed", 5)
    kw = dict(is_extend=False, is_idle=False, is_decode=True)
    assert patch.choose_path(f, bs=5, **kw) == "spec"
    assert patch.choose_path(f, bs=6, **kw) == "fallback"
    assert patch.choose_path(f, bs=6, return_logprob=True, **kw) == "spec"
    assert patch.choose_path(patch.PatchConfig("naive", 5), bs=10, **kw) == "naive"
    assert patch.choose_path(patch.PatchConfig("none", 5), bs=100, **kw) == "spec"
    assert patch.choose_path(f, bs=50, is_extend=True, is_idle=False, is_decode=False) == "extend"
    assert patch.choose_path(f, bs=0, is_extend=False, is_idle=True, is_decode=False) == "idle"
    with pytest.raises(ValueError):
        patch.PatchConfig("bogus")
    assert patch.config_from_env({"SPECSTATE_PATCH": "naive", "SPECSTATE_THRESHOLD": "7", "SPECSTATE_NAIVE_PATH": "eager"}) == patch.PatchConfig("naive", 7, "eager")


# --------------------------------------------------------------------------- fakes of sglang objects


class FM(enum.Enum):
    EXTEND = 1
    DECODE = 2
    IDLE = 3
    TARGET_VERIFY = 4
    DRAFT_EXTEND = 5

    def is_decode(self):
        return self is FM.DECODE

    def is_extend(self):
        return self is FM.EXTEND

    def is_idle(self):
        return self is FM.IDLE


class CHM(enum.IntEnum):
    NULL = 0
    LAST = 1
    FULL = 2


class FakeReq:
    def __init__(self, rid, prompt_len, out_len, max_new):
        self.rid = rid
        self.origin_input_ids = list(range(prompt_len))
        self.output_ids = list(range(out_len))
        self.kv_committed_len = prompt_len + out_len - 1
        self.kv_allocated_len = self.kv_committed_len
        self.spec_verify_ct = 0
        self.spec_num_correct_drafts = 0
        self.decode_batch_idx = 0
        self.max_new = max_new
        self.finished_reason = None
        self.grammar = None
        self.require_reasoning = False
        self.hist = []

    def check_finished(self):
        if len(self.output_ids) >= self.max_new:
            self.finished_reason = type("FINISH_LENGTH", (), {})()

    def finished(self):
        return self.finished_reason is not None

    def update_spec_correct_drafts_histogram(self, n):
        self.hist.append(n)


class FakeAlloc:
    def __init__(self):
        self.size = 1000
        self.free = list(range(1, 1001))

    def available_size(self):
        return len(self.free)


class FakeDraftInput:
    def __init__(self, bs, hidden=8):
        self.topk_p = torch.rand(bs, 4)
        self.topk_index = torch.randint(0, 100, (bs, 4))
        self.hidden_states = torch.rand(bs, hidden)
        self.bonus_tokens = torch.arange(bs, dtype=torch.int32) + 100
        self.capture_hidden_mode = CHM.LAST
        self.num_tokens_per_req = 1


class FakeBatch:
    def __init__(self, reqs, alloc):
        self.reqs = reqs
        self.forward_mode = FM.DECODE
        self.seq_lens = torch.tensor([len(r.origin_input_ids) + len(r.output_ids) - 1 for r in reqs])
        self.seq_lens_cpu = self.seq_lens.clone()
        self.orig_seq_lens = self.seq_lens.clone()
        self.seq_lens_sum = int(self.seq_lens.sum())
        self.req_pool_indices = torch.arange(len(reqs))
        self.input_ids = torch.zeros(int(self.seq_lens.sum()), dtype=torch.int64)
        self.out_cache_loc = torch.zeros(int(self.seq_lens.sum()), dtype=torch.int64)
        self.spec_info = FakeDraftInput(len(reqs))
        self.return_hidden_states = False
        self.return_logprob = False
        self.is_extend_in_batch = False
        self.alloc = alloc
        self.sampling_info = types.SimpleNamespace(penalizer_orchestrator=types.SimpleNamespace(is_required=False))
        self.model_config = types.SimpleNamespace(think_end_id=None)
        self.tree_cache = types.SimpleNamespace(evictable_size=lambda: 0, protected_size=lambda: 0)

    def batch_size(self):
        return len(self.reqs)

    def get_model_worker_batch(self):
        return types.SimpleNamespace(
            spec_info=self.spec_info,
            capture_hidden_mode=CHM.NULL if self.spec_info is None else self.spec_info.capture_hidden_mode,
            forward_mode=self.forward_mode,
            input_ids=self.input_ids,
            bs=len(self.reqs),
        )


@contextlib.contextmanager
def _fake_modules(mods):
    saved = {k: sys.modules.get(k) for k in mods}
    try:
        for k, m in mods.items():
            sys.modules[k] = m if m is not None else types.ModuleType(k)
        yield
    finally:
        for k, m in saved.items():
            if m is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = m


def _fake_sglang(log):
    def alloc_for_decode(batch, token_per_req):
        n = len(batch.reqs) * token_per_req
        locs = [batch.alloc.free.pop(0) for _ in range(n)]
        log.append(("alloc", n, batch.seq_lens.tolist()))
        return torch.tensor(locs, dtype=torch.int64)

    class EagleDraftExtendInput:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class GenerationBatchResult:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    @contextlib.contextmanager
    def nullctx(*a, **k):
        yield

    common = types.ModuleType("sglang.srt.mem_cache.common")
    common.alloc_for_decode = alloc_for_decode
    fbi = types.ModuleType("sglang.srt.model_executor.forward_batch_info")
    fbi.CaptureHiddenMode = CHM
    ei = types.ModuleType("sglang.srt.speculative.eagle_info")
    ei.EagleDraftExtendInput = EagleDraftExtendInput
    mu = types.ModuleType("sglang.srt.layers.moe.utils")
    mu.speculative_moe_backend_context = nullctx
    mu.speculative_moe_a2a_backend_context = nullctx
    ut = types.ModuleType("sglang.srt.managers.utils")
    ut.GenerationBatchResult = GenerationBatchResult
    return {
        "sglang": None,
        "sglang.srt": None,
        "sglang.srt.mem_cache": None,
        "sglang.srt.mem_cache.common": common,
        "sglang.srt.model_executor": None,
        "sglang.srt.model_executor.forward_batch_info": fbi,
        "sglang.srt.speculative": None,
        "sglang.srt.speculative.eagle_info": ei,
        "sglang.srt.layers": None,
        "sglang.srt.layers.moe": None,
        "sglang.srt.layers.moe.utils": mu,
        "sglang.srt.managers": None,
        "sglang.srt.managers.utils": ut,
    }


class FakeWorker:
    def __init__(self, alloc, log, hidden=24):
        self.log = log
        self.token_to_kv_pool_allocator = alloc
        tmr = types.SimpleNamespace(graph_runner="TARGET_VERIFY_GRAPHS")
        self.draft_model_runner = types.SimpleNamespace(tp_group=None)
        self.hidden = hidden
        worker = self

        class TW:
            model_runner = tmr

            def forward_batch_generation(self, mwb):
                log.append(("target_forward", mwb.forward_mode, mwb.capture_hidden_mode, tmr.graph_runner, mwb.spec_info, mwb.input_ids.tolist()))
                bs = mwb.bs
                lo = types.SimpleNamespace(next_token_logits=torch.rand(bs, 50), hidden_states=torch.rand(bs, worker.hidden))
                return types.SimpleNamespace(logits_output=lo, next_token_ids=torch.arange(bs) + 7, can_run_cuda_graph=False)

        self.target_worker = TW()

    @contextlib.contextmanager
    def draft_tp_context(self, group):
        yield

    def forward_draft_extend_after_decode(self, batch):
        dei = batch.spec_info
        self.log.append(("draft_extend", dei))
        k = len(dei.num_accept_tokens_cpu)
        assert batch.out_cache_loc.shape[0] == k
        nd = FakeDraftInput(k)
        return nd

    def _draft_preprocess_idle(self, batch):
        self.log.append(("idle",))
        batch.spec_info = FakeDraftInput(0)


@pytest.mark.parametrize("max_new", [[50, 50, 50, 50, 50, 50], [50, 4, 50, 4, 50, 50], [4, 4, 4, 4, 4, 4]])
def test_fixed_fallback_bookkeeping(max_new):
    log: list = []
    alloc = FakeAlloc()
    reqs = [FakeReq(f"r{i}", 10 + i, 3, max_new[i]) for i in range(6)]
    batch = FakeBatch(reqs, alloc)
    w = FakeWorker(alloc, log)
    seq0 = batch.seq_lens.tolist()
    old_bonus = batch.spec_info.bonus_tokens.tolist()
    with _fake_modules(_fake_sglang(log)):
        res = patch.fixed_fallback(w, batch)
    # target forward: DECODE, capture FULL, no spec_info, graphs hidden, input = bonus tokens
    tf = [x for x in log if x[0] == "target_forward"][0]
    assert tf[1] is FM.DECODE and tf[2] == CHM.FULL and tf[3] is None and tf[4] is None and tf[5] == old_bonus
    assert w.target_worker.model_runner.graph_runner == "TARGET_VERIFY_GRAPHS"  # restored
    # KV slot written at the old seq_lens, then seq_lens += 1
    assert [x for x in log if x[0] == "alloc"][0] == ("alloc", 6, seq0)
    assert batch.seq_lens.tolist() == [s + 1 for s in seq0] == batch.seq_lens_cpu.tolist()
    assert batch.seq_lens_sum == sum(seq0) + 6
    for r in reqs:
        assert len(r.output_ids) == 4 and r.kv_committed_len == r.kv_allocated_len == len(r.origin_input_ids) + 3
        assert r.spec_verify_ct == 1 and r.hist == [0] and r.decode_batch_idx == 1
    unfinished = [i for i, r in enumerate(reqs) if not r.finished()]
    assert res.num_correct_drafts == 0 and res.num_correct_drafts_per_req_cpu == [0] * 6
    if not unfinished:
        assert ("idle",) in log and batch.spec_info.topk_p.shape[0] == 0
    else:
        dei = [x for x in log if x[0] == "draft_extend"][0][1]
        assert dei.num_accept_tokens_cpu == [1] * len(unfinished)
        assert dei.num_correct_drafts.tolist() == [0] * len(unfinished)
        assert dei.input_ids.tolist() == [7 + i for i in unfinished]
        assert dei.seq_lens.tolist() == [seq0[i] + 1 for i in unfinished]
        assert dei.hidden_states.shape == (len(unfinished), 24)
        assert batch.spec_info.topk_p.shape[0] == len(unfinished)


@pytest.mark.parametrize("path", ["carried", "carried-alloc", "graph"])
def test_seed_patch_paths_feed_the_batch_as_carried(path):
    """The seed's patch as the seed describes it (``carried``, ``carried-alloc``): the target
    forward (``forward_target_extend``) gets the DECODE batch's own ``input_ids`` (here the 2
    rows a 2-request running batch carried before 8 were merged in), ``spec_info`` attached;
    ``carried`` leaves ``out_cache_loc`` as merged (None), ``carried-alloc`` allocates one slot per
    request. ``graph`` (``naive-threshold``) rebuilds ``input_ids`` from the bonus tokens."""
    log: list = []
    alloc = FakeAlloc()
    reqs = [FakeReq(f"r{i}", 10 + i, 3, 50) for i in range(10)]
    batch = FakeBatch(reqs, alloc)
    batch.input_ids = torch.tensor([101, 102], dtype=torch.int64)  # what merge_batch kept
    batch.out_cache_loc = None  # what merge_batch left
    info = batch.spec_info
    seq0 = batch.seq_lens.tolist()
    seen = []

    class W(FakeWorker):
        def forward_target_extend(self, b):
            seen.append((b.input_ids.tolist(), None if b.out_cache_loc is None else b.out_cache_loc.shape[0],
                         b.spec_info, b.seq_lens.tolist()))
            return None, torch.arange(b.batch_size()), b.seq_lens_cpu, True

    with _fake_modules(_fake_sglang(log)):
        patch.naive_fallback(W(alloc, log), batch, path)
    ids, loc, spec, seq = seen[0]
    assert spec is info  # left attached
    if path == "graph":
        assert ids == info.bonus_tokens.tolist() and loc == 10 and seq == [x + 1 for x in seq0]
    else:
        assert ids == [101, 102]  # as carried: the seed's "b = 2"
        assert loc == (10 if path == "carried-alloc" else None)
        assert seq == ([x + 1 for x in seq0] if path == "carried-alloc" else seq0)


def test_seed_repeated_workload_shape():
    """One prompt repeated by every request (but its last token); a wave above the threshold arrives split 2 + rest,
    the first two long enough to still run when the rest arrive."""
    w = workloads.seed_repeated()
    assert [len(x) for x in w.waves] == list(workloads.SEED_REPEATED_CONCURRENCY)
    prompts = [tuple(w.prompt(r)) for x in w.waves for r in x]
    assert len({p[:-1] for p in prompts}) == 1 and all(len(p) == 64 for p in prompts)
    assert len({p[-1] for p in prompts}) == len(prompts)  # each request's own last token (outputs differ)
    c10 = next(x for x in w.waves if len(x) == 10)
    assert [r.delay_s for r in c10] == [0.0] * 2 + [workloads.SEED_SPLIT_DELAY_S] * 8
    assert [r.max_new_tokens for r in c10][:3] == [128, 128, 32]
    c5 = next(x for x in w.waves if len(x) == 5)
    assert all(r.delay_s == 0.0 for r in c5)
    assert workloads.Workload.from_json(w.to_json()).to_json() == w.to_json()
    from specstate.integration.sglang_driver import build_workloads

    items = build_workloads(["seed-repeated"])
    assert items[0]["workload"]["name"] == "seed-repeated" and items[0]["record"]


# --------------------------------------------------------------------------- recorder


def _ctl(tmp_path, out, tag):
    p = tmp_path / "ctl.json"
    tmp = tmp_path / "ctl.tmp"
    tmp.write_text(json.dumps({"out": str(out) if out else None, "tag": tag, "stats": str(tmp_path / "stats.jsonl")}))
    os.replace(tmp, p)
    return p


def test_recorder_schema_on_fakes(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSTATE_REC_CTL", str(tmp_path / "ctl.json"))
    monkeypatch.delenv("SPECSTATE_REC_OUT", raising=False)
    rec = recm.Recorder()
    alloc = FakeAlloc()
    reqs = [FakeReq(f"r{i}", 10 + i, 3, 50) for i in range(3)]
    batch = FakeBatch(reqs, alloc)
    w = FakeWorker(alloc, [])
    out = tmp_path / "rec.jsonl"
    _ctl(tmp_path, out, "wl1")

    def original(worker, b):
        set_path("spec")
        with phase("verify"):
            from specstate.integration._hookstate import add_event

            add_event({"ev": "fwd", "worker": "target", "mode": "TARGET_VERIFY"})
        for r in b.reqs:
            r.output_ids += [1, 2]
            r.kv_committed_len += 2
        b.seq_lens += 2
        b.seq_lens_cpu += 2
        alloc.free = alloc.free[6:]
        return types.SimpleNamespace(
            next_token_ids=torch.zeros(6), num_correct_drafts=3, num_correct_drafts_per_req_cpu=[1, 1, 1],
            can_run_cuda_graph=True, logits_output=types.SimpleNamespace(next_token_logits=torch.zeros(6, 5), hidden_states=None),
        )

    rec.around_fbg(original, w, batch)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["ev"] == "header" and lines[0]["schema"] == recm.SCHEMA_VERSION
    r = lines[1]
    for k in ("iter", "tag", "mode_in", "mode_out", "bs", "rids", "path", "before", "after", "reqs_before", "reqs_after",
              "kv_before", "kv_after", "result", "finished", "events", "dt_ms"):
        assert k in r, k
    assert r["path"] == "spec" and r["rids"] == ["r0", "r1", "r2"] and r["result"]["accept_lens"] == [2, 2, 2]
    assert r["before"]["spec_info"]["cls"] == "FakeDraftInput"
    assert r["before"]["spec_info"]["fields"]["topk_p"] == {"s": [3, 4], "d": "float32"}
    assert r["events"][0]["phase"] == "verify"
    assert r["kv_before"]["available"] - r["kv_after"]["available"] == 6
    # analysis of this record passes the per-step checks, except spec_rows (a fake spec class)
    fails = analyze.check_step(r)
    assert {f["check"] for f in fails} == {"spec_rows"}

    # recorder off: nothing written, but counted; stats flushed on tag change
    _ctl(tmp_path, None, "off1")
    rec.around_fbg(original, w, batch)
    assert len(out.read_text().splitlines()) == 2
    _ctl(tmp_path, None, "off2")

    def boom(worker, b):
        set_path("naive")
        with phase("naive_target_forward"):
            raise RuntimeError("The size of tensor a (160) must match the size of tensor b (10)")

    monkeypatch.setenv("SPECSTATE_REC_CRASH", str(tmp_path / "crash.jsonl"))
    with pytest.raises(RuntimeError):
        rec.around_fbg(boom, w, batch)
    crash = json.loads((tmp_path / "crash.jsonl").read_text().splitlines()[0])
    assert crash["ev"] == "fbg_error" and crash["error"]["cls"] == "RuntimeError" and crash["iter"] == 3
    assert crash["phase_stack"] == ["naive_target_forward"] and crash["path"] == "naive"
    stats = [json.loads(x) for x in (tmp_path / "stats.jsonl").read_text().splitlines()]
    assert [s["tag"] for s in stats] == ["wl1", "off1"] and stats[1]["recording"] is False
    assert stats[0]["decode_calls"] == 1 and stats[0]["records"] == 1 and stats[1]["records"] == 0
    assert STATE.current is None


def test_describe_helpers():
    assert recm.tdesc(torch.zeros(2, 3, dtype=torch.int32)) == {"s": [2, 3], "d": "int32"}
    assert recm.tdesc(FM.DECODE) == "DECODE" and recm.tdesc(None) is None and recm.tdesc([1, 2]) == [1, 2]
    runner = types.SimpleNamespace(capture_bs=[1, 2, 4, 8, 12, 16], num_tokens_per_bs=16)
    assert recm.padded_bs(runner, 10) == 12 and recm.padded_bs(runner, 17) is None


# --------------------------------------------------------------------------- analysis


def _step(it, path, acc, seq, out, kv, avail, prompt, finished=None, rows=None):
    bs = len(acc)
    finished = finished or [None] * bs
    seq_a = [s + n for s, n in zip(seq, acc)]
    unf = sum(1 for f in finished if f is None)
    return {
        "ev": "fbg", "iter": it, "path": path, "bs": bs, "rids": [f"r{i}" for i in range(bs)],
        "before": {"seq_lens": seq, "seq_lens_cpu": seq},
        "after": {"seq_lens": seq_a, "seq_lens_cpu": seq_a,
                  "spec_info": {"cls": "EagleDraftInput", "fields": {"topk_p": {"s": [unf if rows is None else rows, 4]}}}},
        "reqs_before": {"rid": [f"r{i}" for i in range(bs)], "out_len": out, "kv_committed": kv, "prompt_len": prompt, "finished": [None] * bs},
        "reqs_after": {"rid": [f"r{i}" for i in range(bs)], "out_len": [o + n for o, n in zip(out, acc)],
                       "kv_committed": [k + n for k, n in zip(kv, acc)], "prompt_len": prompt, "finished": finished},
        "kv_before": {"available": avail}, "kv_after": {"available": avail - sum(acc)},
        "result": {"accept_lens": acc}, "events": [],
    }


def test_analyze_crossings_and_checks():
    recs = [
        _step(1, "spec", [2, 1], [10, 20], [1, 1], [10, 20], 100, [10, 20]),
        _step(2, "fallback", [1, 1], [12, 21], [3, 2], [12, 21], 97, [10, 20]),
        _step(3, "spec", [3, 4], [13, 22], [4, 3], [13, 22], 95, [10, 20]),
    ]
    a = analyze.analyze_records(recs)
    assert a["switch_off"] == 1 and a["resume"] == 1 and a["resumed"][0]["accept_lens"] == [3, 4]
    assert a["n_check_failures"] == 0 and a["mean_accept_len"]["fallback"] == 1.0
    bad = _step(4, "spec", [2, 2], [16, 26], [7, 7], [16, 26], 88, [10, 20], rows=2)
    bad["reqs_after"]["kv_committed"][0] += 1
    assert {f["check"] for f in analyze.check_step(bad)} == {"kv_committed", "kv_vs_seq"}


# --------------------------------------------------------------------------- recorded data (from the H200)


def _saved(phase_):
    import gzip

    d = os.path.join(DATA, phase_)
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".jsonl.gz"):
            with gzip.open(os.path.join(d, f), "rt") as fh:
                out[f[: -len(".jsonl.gz")]] = [json.loads(line) for line in fh if line.strip()]
    return out


@pytest.mark.skipif(not os.path.isdir(DATA), reason="no recordings in tests/data/gpu")
def test_saved_gpu_recordings_fixed_patch():
    """The H200 recordings (docs/results/gpu-replay.md): the fixed fallback ran the seed sweep
    and 20 random workloads without an error, every decode step passes the per-step checks,
    and speculation resumed after crossings down."""
    recs = _saved("fixed")
    assert "seed-sweep" in recs and sum(k.startswith("random-") for k in recs) == 20
    resumes = 0
    for name, rs in recs.items():
        assert rs[0]["ev"] == "header" and rs[0]["schema"] in recm.SCHEMA_VERSIONS, name
        a = analyze.analyze_records(rs)
        assert not a["errors"] and a["n_check_failures"] == 0, (name, a["check_failures"][:3])
        resumes += a["resume"]
    assert resumes >= 20


@pytest.mark.skipif(not os.path.isdir(DATA), reason="no recordings in tests/data/gpu")
def test_saved_gpu_recordings_agree_and_naive():
    agree_ = _saved("agree")
    a = analyze.analyze_records(agree_["seed-sweep"])
    assert a["n_check_failures"] == 0 and not a["errors"] and a["resume"] >= 1
    assert a["mean_accept_len_spec"] > 1.5 and max(int(k) for k in a["accept_len_hist"]["spec"]) == 4
    for phase_, cls in (("naive-graph", "RuntimeError"), ("naive-eager", "AttributeError")):
        rs = _saved(phase_)["seed-sweep"]
        err = [r for r in rs if r.get("ev") == "fbg_error"]
        assert len(err) == 1 and err[0]["error"]["cls"] == cls and err[0]["bs"] == 10
        assert all(r["path"] != "naive" for r in rs if r.get("ev") == "fbg")  # it crashed at its first fallback


# --------------------------------------------------------------------------- driver plumbing with a fake engine

_FAKE_ENGINE = '''
import asyncio, json, os, signal


class _TM:
    def abort_request(self, rid):
        pass


class Engine:
    def __init__(self, **kw):
        self.kw = kw
        self.loop = asyncio.new_event_loop()
        self.tokenizer_manager = _TM()

    def _one(self, ids, sp, rid):
        if rid == os.environ.get("FAKE_CRASH_AT"):
            with open(os.environ["SPECSTATE_REC_CRASH"], "a") as f:
                f.write(json.dumps({"ev": "fbg_error", "iter": 7, "tag": "seed-sweep", "path": "naive", "bs": 10,
                                    "error": {"cls": "RuntimeError", "msg": "fake crash", "tb_tail": ["x"]}}) + "\\n")
            os.kill(os.getpid(), signal.SIGKILL)
        n = sp["max_new_tokens"]
        return {"output_ids": list(range(n)), "meta_info": {"finish_reason": {"type": "length"}, "spec_verify_ct": n, "completion_tokens": n}}

    def generate(self, input_ids, sampling_params, rid):
        if isinstance(rid, list):
            return [self._one(i, s, r) for i, s, r in zip(input_ids, sampling_params, rid)]
        return self._one(input_ids[0], sampling_params, rid)

    async def async_generate(self, input_ids, sampling_params, rid):
        return self._one(input_ids, sampling_params, rid)

    def shutdown(self):
        pass
'''


def _fake_sglang_pkg(tmp_path):
    root = tmp_path / "fakesg"
    d = root / "sglang" / "srt" / "entrypoints"
    d.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("__version__ = 'fake'\n")
    (root / "sglang" / "srt" / "__init__.py").write_text("")
    (d / "__init__.py").write_text("")
    (d / "engine.py").write_text(_FAKE_ENGINE)
    return root


def test_driver_runs_with_fake_engine(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", str(_fake_sglang_pkg(tmp_path)))
    monkeypatch.delenv("FAKE_CRASH_AT", raising=False)
    out = tmp_path / "ok"
    rc = drv.main(["run", "--out", str(out), "--patch", "fixed", "--random", "2", "--timing", "--timeout", "120"])
    assert rc == 0
    with open(out / "summary.json") as f:
        s = json.load(f)
    assert s["ok"] and s["sglang_version"] == "fake" and s["host_returncode"] == 0 and not s["crashes"]
    names = [w["name"] for w in s["workloads"]]
    assert names[:2] == ["random-0-0", "random-0-1"] and any(n.startswith("timing-c30") for n in names)
    assert all(w["n_out_tokens"] > 0 for w in s["workloads"])


def test_driver_records_crash_with_fake_engine(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(_fake_sglang_pkg(tmp_path)))
    sweep = workloads.seed_sweep()
    monkeypatch.setenv("FAKE_CRASH_AT", sweep.waves[3][0].rid)  # the C=10 wave
    out = tmp_path / "crash"
    rc = drv.main(["run", "--out", str(out), "--patch", "naive", "--scenario", "seed-sweep", "--timeout", "120"])
    assert rc == 1
    with open(out / "summary.json") as f:
        s = json.load(f)
    assert not s["ok"] and s["host_returncode"] == -9
    assert s["crashes"][0]["error"]["cls"] == "RuntimeError" and s["crashes"][0]["iter"] == 7
    w = s["workloads"][0]
    assert [wv for wv in w.get("finish", {})]  # the waves before the crash returned


def test_rids_prefix_free():
    """sglang aborts by rid prefix: no generated rid may be a prefix of another in a run."""
    items = drv.build_workloads(["seed-sweep"], n_random=20, random_seed=0, threshold=5, timing=True)
    rids = [r["rid"] for i in items for w in i["workload"]["waves"] for r in w]
    assert len(rids) == len(set(rids))
    assert workloads.prefix_collisions(rids) == []
    with pytest.raises(ValueError, match="prefix"):
        workloads.Workload(
            name="bad",
            waves=((workloads.Request("a1", 3, 4, abort_after_s=0.1), workloads.Request("a10", 3, 4)),),
        )


def test_post_and_abort_events_on_fakes(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSTATE_REC_OUT", str(tmp_path / "r.jsonl"))
    monkeypatch.delenv("SPECSTATE_REC_CTL", raising=False)
    rec = recm.Recorder()
    monkeypatch.setattr(recm, "RECORDER", rec)
    alloc = FakeAlloc()
    reqs = [FakeReq("a", 5, 1, 1), FakeReq("b", 6, 1, 9)]
    reqs[0].check_finished()
    batch = FakeBatch(reqs, alloc)
    batch.forward_mode = FM.EXTEND
    sched = types.SimpleNamespace(token_to_kv_pool_allocator=alloc, tree_cache=batch.tree_cache)
    assert recm._after_process_batch_result(None, sched, batch) is None
    assert recm._after_abort_request(None, sched, types.SimpleNamespace(rid="b", abort_all=False)) is None
    assert not (tmp_path / "r.jsonl").exists()  # held until the file's header is written
    rec._header_written_for = rec.out_path
    rec.emit({"ev": "header", "schema": recm.SCHEMA_VERSION})
    rec._close()
    lines = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert lines[0]["ev"] == "header"
    lines = lines[1:]
    assert lines[0]["ev"] == "post" and lines[0]["mode"] == "EXTEND" and lines[0]["finished"][0] == "FINISH_LENGTH"
    assert lines[0]["kv"]["available"] == 1000 and lines[1] == {**lines[1], "ev": "abort", "rid": "b"}
    a = analyze.analyze_records(lines)
    assert a["finished_at_prefill"] == ["a"] and a["aborts"] == ["b"] and a["n_post"] == 1


def test_fuzz_workloads_follow_the_generated_actions() -> None:
    """``fuzz_workloads``: arrivals in order, delays from the steps before them, aborts timed."""
    from specstate.integration.fuzz_workloads import workload_from_actions
    from specstate.model import Abort, Arrive, Step

    w = workload_from_actions("t", [Arrive(5, 3), Step(), Step(), Arrive(7, 2), Step(), Abort(0), Step()], step_s=0.01)
    (wave,) = w.waves
    assert [(r.prompt_len, r.max_new_tokens, r.delay_s) for r in wave] == [(5, 3, 0.0), (7, 2, 0.02)]
    assert wave[0].abort_after_s == 0.03 and wave[1].abort_after_s is None
    assert [r.rid for r in wave] == ["tr000", "tr001"]


def test_lean_recorder_keeps_what_conformance_reads(tmp_path, monkeypatch):
    """``mode: lean``: no GPU reads, records written by a thread, and the fields the
    conformance backends read are there (seq_lens from the CPU copy, spec_info row shapes,
    per-request lengths, accept lengths); a crash line still reaches the file at once."""
    monkeypatch.setenv("SPECSTATE_REC_CTL", str(tmp_path / "ctl.json"))
    monkeypatch.delenv("SPECSTATE_REC_OUT", raising=False)
    rec = recm.Recorder()
    alloc = FakeAlloc()
    reqs = [FakeReq(f"r{i}", 10 + i, 3, 50) for i in range(3)]
    batch = FakeBatch(reqs, alloc)
    w = FakeWorker(alloc, [])
    out = tmp_path / "lean.jsonl"
    (tmp_path / "ctl.json").write_text(json.dumps({"out": str(out), "tag": "lean", "stats": str(tmp_path / "s.jsonl"),
                                                   "mode": "lean"}))

    def original(worker, b):
        for r in b.reqs:
            r.output_ids += [1]
            r.kv_committed_len += 1
        b.seq_lens_cpu += 1
        return types.SimpleNamespace(num_correct_drafts_per_req_cpu=[0, 0, 0])

    rec.around_fbg(original, w, batch)
    rec._close()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["ev"] for x in lines] == ["header", "fbg"] and rec.mode == "lean"
    r = lines[1]
    assert r["after"]["seq_lens"] == [13, 14, 15] and r["result"]["accept_lens"] == [1, 1, 1]
    assert r["after"]["spec_info"]["fields"]["topk_p"] == {"s": [3, 4], "d": "float32"}
    assert r["reqs_after"]["out_len"] == [4, 4, 4] and r["reqs_after"]["finished"] == [None] * 3
    assert "kv_before" not in r and "can_run" not in json.dumps(r)

    def boom(worker, b):
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        rec.around_fbg(boom, w, batch)
    assert json.loads(out.read_text().splitlines()[-1])["ev"] == "fbg_error"  # synchronous
    rec._close()


# --------------------------------------------------------------------------- deferred mode


class _IntFM(enum.IntEnum):
    """sglang's ``ForwardMode`` is an ``IntEnum``: JSON would write it as a number."""

    EXTEND = 1
    DECODE = 2
    TARGET_VERIFY = 4
    DRAFT_EXTEND = 5

    def is_decode(self):
        return self is _IntFM.DECODE

    def is_extend(self):
        return self is _IntFM.EXTEND

    def is_idle(self):
        return False


class _TargetRunner:
    capture_forward_mode = _IntFM.TARGET_VERIFY
    num_tokens_per_bs = 16
    capture_bs = [1, 2, 4, 8]
    model_runner = types.SimpleNamespace(is_draft_worker=False)


class EAGLEDraftCudaGraphRunner:
    num_tokens_per_bs = 1
    capture_bs = [1, 2, 4, 8]


class EAGLEDraftExtendCudaGraphRunner:
    forward_mode = _IntFM.DRAFT_EXTEND
    capture_forward_mode = _IntFM.DRAFT_EXTEND
    num_tokens_per_bs = 4
    capture_bs = [1, 2, 4, 8]


def _record_one_workload(tmp_path, monkeypatch, mode, running_is_batch=False):
    """Arrivals, one decode step with a target verify (graph) and a draft extend (graph), the
    scheduler's ``post`` line and an abort, through the real hooks, in recorder mode ``mode``
    (``running_is_batch``: the scheduler's running batch is the processed batch, as after a
    decode step)."""
    monkeypatch.setenv("SPECSTATE_REC_CTL", str(tmp_path / f"ctl-{mode}.json"))
    monkeypatch.delenv("SPECSTATE_REC_OUT", raising=False)
    rec = recm.Recorder()
    monkeypatch.setattr(recm, "RECORDER", rec)
    monkeypatch.setattr(recm, "_PROMPTS", {})
    out = tmp_path / f"{mode}.jsonl"
    (tmp_path / f"ctl-{mode}.json").write_text(json.dumps({"out": str(out), "tag": "wl", "mode": mode}))
    alloc = FakeAlloc()
    reqs = [FakeReq(f"r{i}", 10 + i, 3, 4 if i == 1 else 50) for i in range(3)]
    sched = types.SimpleNamespace(token_to_kv_pool_allocator=alloc, waiting_queue=[], running_batch=None,
                                  chunked_req=None, new_token_ratio=0.5,
                                  tree_cache=types.SimpleNamespace(evictable_size=lambda: 3, protected_size=lambda: 1))
    for r in reqs:
        recm._around_add_request_to_queue(lambda s, q: sched.waiting_queue.append(q), sched, r)
    sched.waiting_queue.clear()
    batch = FakeBatch(reqs, alloc)
    batch.forward_mode = _IntFM.DECODE
    fb = types.SimpleNamespace(forward_mode=_IntFM.TARGET_VERIFY, batch_size=3, input_ids=torch.zeros(48, dtype=torch.int64),
                               out_cache_loc=torch.zeros(48), seq_lens_cpu=batch.seq_lens_cpu, spec_info=FakeDraftInput(3))
    dfb = types.SimpleNamespace(forward_mode=_IntFM.DRAFT_EXTEND, batch_size=2, input_ids=torch.zeros(8), out_cache_loc=None,
                                seq_lens_cpu=None, spec_info=FakeDraftInput(2))
    runner = types.SimpleNamespace(is_draft_worker=False)

    def verify_forward(runner_, fb_):
        recm._around_replay_prepare(lambda g, f: None, _TargetRunner(), fb_)
        lo = types.SimpleNamespace(next_token_logits=torch.zeros(48, 5), hidden_states=torch.zeros(48, 24))
        return types.SimpleNamespace(can_run_graph=True, logits_output=lo)

    draft_fb = types.SimpleNamespace(forward_mode=_IntFM.DECODE, batch_size=3, input_ids=torch.zeros(3), out_cache_loc=None,
                                     seq_lens_cpu=batch.seq_lens_cpu, spec_info=FakeDraftInput(3))

    def original(worker, b):
        set_path("spec")
        with phase("draft"):
            recm._around_draft_graph_replay(lambda g, f: (torch.zeros(3, 1),), EAGLEDraftCudaGraphRunner(), draft_fb)
        with phase("verify"):
            recm._around_model_runner_forward(verify_forward, runner, fb)
        for r in b.reqs:
            r.output_ids += [1]
            r.kv_committed_len += 1
            r.check_finished()
        b.seq_lens_cpu += 1  # in place, as EagleVerifyInput.verify does
        with phase("forward_draft_extend_after_decode"):
            recm._around_draft_graph_replay(lambda g, f: (torch.zeros(2, 4), torch.zeros(2, 8)),
                                            EAGLEDraftExtendCudaGraphRunner(), dfb)
        b.spec_info = FakeDraftInput(2)
        return types.SimpleNamespace(num_correct_drafts_per_req_cpu=[0, 0, 0])

    rec.around_fbg(original, FakeWorker(alloc, []), batch)
    sched.running_batch = batch if running_is_batch else types.SimpleNamespace(reqs=[reqs[0], reqs[2]], batch_is_full=False)
    recm._after_process_batch_result(None, sched, batch)
    recm._after_abort_request(None, sched, types.SimpleNamespace(rid="r2", abort_all=False))
    written_before_close = out.exists()
    rec._close()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    return lines, written_before_close


def _timeless(r):
    return {k: v for k, v in r.items() if k not in ("t", "dt_ms", "pid", "env")}


def test_deferred_recorder_writes_what_lean_writes(tmp_path, monkeypatch):
    """``mode: deferred`` captures raw values and references and writes nothing until the file
    closes; what it writes then is what ``lean`` mode writes, record for record (enums and
    finish reasons by name, shapes as lists, dtypes as ``tdesc`` writes them)."""
    lean, lean_early = _record_one_workload(tmp_path, monkeypatch, "lean")
    deferred, deferred_early = _record_one_workload(tmp_path, monkeypatch, "deferred")
    assert not deferred_early
    assert [r["ev"] for r in deferred] == ["header", "arrive", "arrive", "arrive", "fbg", "post", "abort"]
    assert [_timeless(r) for r in deferred] == [_timeless(r) for r in lean]
    fbg, post = deferred[4], deferred[5]
    assert fbg["mode_in"] == "DECODE" and fbg["after"]["seq_lens"] == [13, 14, 15]
    assert fbg["reqs_after"]["finished"] == [None, "FINISH_LENGTH", None] and fbg["finished"] == ["r1"]
    assert fbg["after"]["spec_info"] == {"cls": "FakeDraftInput", "fields": {
        "topk_p": {"s": [2, 4], "d": "float32"}, "topk_index": {"s": [2, 4], "d": "int64"},
        "hidden_states": {"s": [2, 8], "d": "float32"}, "bonus_tokens": {"s": [2], "d": "int32"}}}
    draft, verify, extend = fbg["events"]
    # a drafting forward: its mode and batch size (conformance compares nothing else of it)
    assert draft == {"ev": "fwd", "worker": "draft", "via": "graph:draft_decode", "mode": "DECODE", "bs": 3,
                     "graph": {"runner": "draft_decode", "capture_forward_mode": "DECODE", "num_tokens_per_bs": 1,
                               "raw_bs": 3, "padded_bs": 4, "padding_reset": True},
                     "phase": "draft", "graph_ran": True}
    assert verify["mode"] == "TARGET_VERIFY" and verify["spec"] == "FakeDraftInput" and verify["input_ids"] == [48]
    assert verify["seq_lens_cpu"] == [12, 13, 14] and verify["graph"]["padded_bs"] == 4 and verify["graph_ran"]
    assert extend["graph"] == {"runner": "draft_extend", "capture_forward_mode": "DRAFT_EXTEND", "num_tokens_per_bs": 4,
                               "raw_bs": 2, "padded_bs": 2, "padding_reset": False}
    assert post["finished"] == [None, "FINISH_LENGTH", None] and post["sched"]["running"] == ["r0", "r2"]
    assert "protected" not in post and "prefix_len" not in post  # not read by conformance
    assert [a["lcp"] for a in deferred[1:4]] == [0, 10, 11] and deferred[3]["lcp_rid"] == "r1"
    # the per-step checks that a compact record allows: kv_vs_seq holds, spec_rows fails (a fake class)
    assert {f["check"] for f in analyze.check_step(fbg)} == {"spec_rows"}
    assert recm.RECORDER.stats["records"] == 1


def test_deferred_recorder_post_of_the_running_batch(tmp_path, monkeypatch):
    """The ``post`` capture does not copy the running batch's rids when it is the processed
    batch; what it writes is still what ``lean`` writes."""
    lean, _ = _record_one_workload(tmp_path, monkeypatch, "lean", running_is_batch=True)
    deferred, _ = _record_one_workload(tmp_path, monkeypatch, "deferred", running_is_batch=True)
    assert [_timeless(r) for r in deferred] == [_timeless(r) for r in lean]
    assert deferred[5]["sched"]["running"] == ["r0", "r1", "r2"] == deferred[5]["rids"]


def test_deferred_forward_that_raises_keeps_its_entry(monkeypatch):
    """A model forward that raises inside a ``deferred`` record: its event keeps its entry
    snapshot and phase (no outputs), as ``lean`` writes it, and the exception propagates."""
    out = {}
    for mode in ("lean", "deferred"):
        rec = recm.Recorder()
        rec.mode = mode
        monkeypatch.setattr(recm, "RECORDER", rec)
        STATE.current = {"ev": "fbg"}
        fb = types.SimpleNamespace(forward_mode=_IntFM.DECODE, batch_size=2, input_ids=torch.zeros(2), out_cache_loc=None,
                                   seq_lens_cpu=torch.tensor([5, 6]), spec_info=None)

        def boom(runner_, fb_):
            raise RuntimeError("device-side assert")

        with phase("verify"), pytest.raises(RuntimeError):
            recm._around_model_runner_forward(boom, types.SimpleNamespace(is_draft_worker=False), fb)
        with phase("draft"), pytest.raises(RuntimeError):
            recm._around_model_runner_forward(boom, types.SimpleNamespace(is_draft_worker=True), fb)
        cur, STATE.current = STATE.current, None
        out[mode] = recm.render_fbg(cur) if mode == "deferred" else cur
    assert out["deferred"] == out["lean"]
    # a drafting forward (draft worker, DECODE): only what conformance compares of it
    assert out["deferred"]["events"] == [{"ev": "fwd", "worker": "target", "via": "model_runner", "mode": "DECODE", "bs": 2,
                                          "input_ids": [2], "out_cache_loc": None, "seq_lens_cpu": [5, 6], "spec": None,
                                          "phase": "verify"},
                                         {"ev": "fwd", "worker": "draft", "via": "model_runner", "mode": "DECODE", "bs": 2,
                                          "phase": "draft"}]


def test_deferred_recorder_writes_a_crash_at_once(tmp_path, monkeypatch):
    """A crash in ``deferred`` mode: the buffered records, then the ``fbg_error`` line, are on
    disk before the exception leaves the hook (the engine dies next)."""
    monkeypatch.setenv("SPECSTATE_REC_CTL", str(tmp_path / "ctl.json"))
    rec = recm.Recorder()
    out = tmp_path / "d.jsonl"
    (tmp_path / "ctl.json").write_text(json.dumps({"out": str(out), "tag": "d", "mode": "deferred"}))
    alloc = FakeAlloc()
    batch = FakeBatch([FakeReq("a", 5, 2, 9)], alloc)
    w = FakeWorker(alloc, [])
    rec.around_fbg(lambda wk, b: types.SimpleNamespace(num_correct_drafts_per_req_cpu=[0]), w, batch)
    assert not out.exists()

    def boom(worker, b):
        raise RuntimeError("The size of tensor a (160) must match the size of tensor b (10)")

    with pytest.raises(RuntimeError):
        rec.around_fbg(boom, w, batch)
    evs = [json.loads(x)["ev"] for x in out.read_text().splitlines()]
    assert evs == ["header", "fbg", "fbg_error"]


def test_step_times_and_timing_table(tmp_path, monkeypatch):
    """Per decode step: entry to the next decode entry of the same workload (recorder off
    too); the timing table's medians, ratio to ``off`` and per-repetition pairs."""
    monkeypatch.setenv("SPECSTATE_REC_CTL", str(tmp_path / "ctl.json"))
    rec = recm.Recorder()
    _ctl(tmp_path, None, "off0")
    alloc = FakeAlloc()
    batch = FakeBatch([FakeReq("a", 5, 2, 99)], alloc)
    w = FakeWorker(alloc, [])
    for _ in range(3):
        rec.around_fbg(lambda wk, b: None, w, batch)
    batch.forward_mode = FM.EXTEND
    rec.around_fbg(lambda wk, b: None, w, batch)
    assert len(rec.stats["step_ms"]) == 2 and all(x >= 0 for x in rec.stats["step_ms"])
    wls = [{"name": f"timing-c4-{m}{r}", "timing": m, "rep": r, "step_ms": [v, v, 2 * v],
            "wall_per_decode_step_ms": 2 * v, "recorder_ms_per_decode_step": 0.01}
           for r in range(2) for m, v in (("off", 4.0 + r), ("deferred", 4.1 + r))]
    t = drv.timing_table(wls)["timing-c4"]
    assert t["off"]["step_ms"] == {"n": 6, "min": 4.0, "median": 5.0, "max": 10.0}
    assert t["ratio_deferred"] == round(5.1 / 5.0, 4) and t["paired_deferred"]["n"] == 2
    assert t["paired_deferred"]["max"] == round(4.1 / 4.0, 4)
    items = drv.timing_items(3, ("off", "deferred"))
    order = [i["timing"] for i in items if i["workload"]["name"].startswith("timing-c4") and i["timing"] != "warmup"]
    assert order == ["off", "deferred", "deferred", "off", "off", "deferred"]
    with pytest.raises(ValueError, match="timing modes"):
        drv.timing_items(1, ("off", "fast"))


def test_timed_hooks_add_their_own_time_not_the_originals() -> None:
    """``SPECSTATE_REC_HOOK_TIMES``: an AROUND hook's own time, less the original's."""
    import time as _t

    from specstate.integration.sglang_recorder import RECORDER, _timed_hook

    RECORDER.stats.pop("hook_ms", None)

    def slow_original(x: int) -> int:
        _t.sleep(0.05)
        return x + 1

    def hook(original, x):  # noqa: ANN001, ANN202
        _t.sleep(0.01)
        return original(x) * 2

    assert _timed_hook("W.around", hook, True)(slow_original, 1) == 4
    assert _timed_hook("W.after", lambda r, x: _t.sleep(0.02), False)(None, 1) is None
    got = RECORDER.stats["hook_ms"]
    assert 9 <= got["W.around"] < 40, got  # the hook's 10 ms, not the original's 50
    assert 19 <= got["W.after"] < 60, got
    RECORDER.stats.pop("hook_ms", None)


def test_the_recorder_times_the_collector_and_is_not_kept_alive_by_it() -> None:
    """Issue 11: every collection lands in the block's ``gc_ms`` / ``gc_n``, none while a
    deferred recording is written; a recorder dropped (as tests drop theirs) is collected."""
    import gc
    import weakref

    from specstate.integration.recorder_core import RecorderCore

    rec = RecorderCore()
    gc.collect()
    assert rec.stats["gc_n"][2] >= 1 and rec.stats["gc_ms"] > 0
    before = list(rec.stats["gc_n"])
    rec._gc_paused = True
    gc.collect()
    assert rec.stats["gc_n"] == before
    ref = weakref.ref(rec)
    del rec
    gc.collect()
    assert ref() is None
