"""Upstream's worker-side code on one batch, inside the worker oracle's process (sglang imported).

What is upstream's, unchanged: ``ModelWorkerBatch`` (the dataclass), ``ForwardBatch.init_new``
(``model_executor/forward_batch_info.py``), ``ForwardMode.is_cuda_graph``, ``CudaGraphRunner.can_run``,
``CudaGraphRunner.replay_prepare`` with ``recapture_if_needed`` and the release's buffers class,
built by its own ``create`` (``GraphInputBuffers`` / ``DecodeInputBuffers``) at the size upstream
captures them: ``max_num_token = max(capture_bs) * num_tokens_per_bs`` (the model's runner's capacity,
which is that, or more where runners share buffers), and its ``populate_from_forward_batch``; the
speculative inputs are upstream's ``EagleDraftInput`` / ``EagleVerifyInput``.

What is the oracle's, each safe because no value the comparison reads comes from it:

- the model runner (``_runner``): the attributes ``init_new`` and the graph runner read (device
  ``cpu``, no pools: ``init_new`` only passes them on; no LoRA, mrope, SWA, ngram embedding, hisparse);
- the ``CudaGraphRunner`` is made without ``__init__`` (which captures graphs on a GPU): its fields are
  set as ``__init__`` sets them for an EAGLE target on one rank without DP attention (``require_*``
  off, no padding switch-off, no TBO / PDMux, ``capture_forward_mode`` and ``capture_hidden_mode`` the
  model runner's: TARGET_VERIFY, FULL after capture);
- the attention backend (``_Backend``): ``get_cuda_graph_seq_len_fill_value`` 1 (Triton's) and
  ``init_forward_metadata_replay_cuda_graph`` recorded, not run (the model's replay-metadata crashes
  are therefore not judged here: ``compare.py`` says so per batch);
- ``get_moe_expert_parallel_world_size`` is 1 (no expert parallelism: ``enable_num_token_non_padded``
  is off, as on the seed's TP launch) instead of reading an uninitialised process group.
"""

from __future__ import annotations

import dataclasses
import importlib
import types
from typing import Any

from specstate.oracle.worker.signature import error_signature

__all__ = ["Upstream"]

#: the model's speculative-input class names upstream has (a model subclass maps to its first one)
SPEC_CLASSES = ("EagleVerifyInput", "EagleDraftInput")


class _Backend:
    """The attention backend's two calls on the graph path (see the module docstring)."""

    def __init__(self) -> None:
        self.replayed: tuple[Any, ...] | None = None

    def get_cuda_graph_seq_len_fill_value(self) -> int:
        return 1  # TritonAttnBackend's

    def init_forward_metadata_replay_cuda_graph(self, bs: int, *args: Any, **kwargs: Any) -> None:
        self.replayed = (bs,)


def _filled(cls: type, **known: Any) -> Any:
    """``cls(**known)`` with every other field without a default ``None`` (upstream's dataclasses
    carry many fields this path never reads); ``known`` names that are not fields are set after."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in known:
            kwargs[f.name] = known.pop(f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = None
    obj = cls(**kwargs)
    for name, value in known.items():
        setattr(obj, name, value)
    return obj


def _symbol(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


class Upstream:
    """One release's worker-side functions; :meth:`run` answers one batch (a ``batches.py`` request)."""

    def __init__(self, buffers: str) -> None:
        import torch
        from sglang.srt.managers.schedule_batch import ModelWorkerBatch
        from sglang.srt.model_executor import cuda_graph_runner, forward_batch_info
        from sglang.srt.speculative import eagle_info
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        forward_batch_info.get_moe_expert_parallel_world_size = lambda: 1
        self.torch, self.fbi, self.cgr = torch, forward_batch_info, cuda_graph_runner
        self.ModelWorkerBatch, self.eagle_info = ModelWorkerBatch, eagle_info
        self.eagle = SpeculativeAlgorithm.EAGLE
        self.buffers_cls = _symbol(buffers)
        self.runners: dict[tuple[Any, ...], Any] = {}

    def _model_runner(self) -> Any:
        sa = types.SimpleNamespace(enable_lora=False, enable_return_hidden_states=False)
        config = types.SimpleNamespace(hidden_size=4, vocab_size=8, dtype=self.torch.float32, is_encoder_decoder=False)
        return types.SimpleNamespace(
            device="cpu", req_to_token_pool=None, token_to_kv_pool=None, token_to_kv_pool_allocator=None,
            attn_backend=_Backend(), use_ngram_embedding=False, model_is_mrope=False, is_hybrid_swa=False,
            server_args=sa, spec_algorithm=self.eagle, hisparse_coordinator=None, is_draft_worker=False,
            model_config=config, token_table=None)

    def _buffers(self, runner: dict[str, Any]) -> Any:
        import inspect

        max_bs = max(runner["capture_bs"])
        kwargs: dict[str, Any] = dict(
            device="cpu", max_bs=max_bs, max_num_token=runner["max_num_token"], hidden_size=4, vocab_size=8,
            dtype=self.torch.float32, dp_size=1, pp_size=1, is_encoder_decoder=False, require_mlp_tp_gather=False,
            seq_len_fill_value=1, encoder_len_fill_value=0, num_tokens_per_bs=runner["num_tokens_per_bs"],
            cache_loc_dtype=self.torch.int64, enable_mamba_track=False)
        later = {"ne_token_table": None, "is_hybrid_swa": False, "hc_hidden_size": None}  # 0.5.10+ parameters
        params = inspect.signature(self.buffers_cls.create).parameters
        kwargs.update({k: v for k, v in later.items() if k in params})
        buffers = self.buffers_cls.create(**kwargs)
        if hasattr(buffers, "share_buffers"):
            buffers.share_buffers()
        return buffers

    def graph_runner(self, runner: dict[str, Any]) -> Any:
        """A ``CudaGraphRunner`` as ``__init__`` leaves it after capture, one per runner shape; a
        fresh one per batch would lose what ``replay_prepare`` leaves in the buffers, which is
        upstream's behaviour too (one runner for the server's life)."""
        key = (tuple(runner["capture_bs"]), runner["num_tokens_per_bs"], runner["max_num_token"])
        if key in self.runners:
            return self.runners[key]
        fbi = self.fbi
        mr = self._model_runner()
        g = object.__new__(self.cgr.CudaGraphRunner)
        g.__dict__.update(
            model_runner=mr, device="cpu", graphs={}, output_buffers={}, disable_padding=False,
            is_encoder_decoder=False, require_gathered_buffer=False, require_mlp_tp_gather=False,
            require_mlp_sync=False, require_attn_tp_gather=False, enable_two_batch_overlap=False,
            enable_pdmux=False, nsa_enable_prefill_cp=False, attn_backend=mr.attn_backend, record_nolora_graph=False,
            use_ngram_embedding=False, capture_forward_mode=fbi.ForwardMode[runner["capture_forward_mode"]],
            capture_hidden_mode=fbi.CaptureHiddenMode[runner["capture_hidden_mode"]],
            num_tokens_per_bs=runner["num_tokens_per_bs"], capture_bs=list(runner["capture_bs"]),
            max_bs=max(runner["capture_bs"]), max_num_token=runner["max_num_token"], seq_len_fill_value=1,
            encoder_len_fill_value=0, buffers=self._buffers(runner))
        self.runners[key] = g
        return g

    def _zeros(self, shape: list[int] | None) -> Any:
        return None if shape is None else self.torch.zeros(tuple(shape), dtype=self.torch.int64)

    def _spec(self, batch: dict[str, Any]) -> Any:
        spec = batch["spec"]
        if spec is None:
            return None
        mode = self.fbi.CaptureHiddenMode[batch["capture"]]
        cls = getattr(self.eagle_info, spec["class"])
        known: dict[str, Any] = {"capture_hidden_mode": mode, "positions": self._zeros(batch["positions"])}
        if spec["num_tokens_per_req"] is not None:
            known["num_tokens_per_req"] = spec["num_tokens_per_req"]
        if spec["class"] == "EagleVerifyInput":
            known.update(draft_token_num=spec["draft_token_num"], custom_mask=self._zeros(spec["custom_mask"]),
                         spec_steps=spec["spec_steps"], topk=spec["topk"])
        return _filled(cls, **known)

    def worker_batch(self, batch: dict[str, Any]) -> Any:
        """``ScheduleBatch.get_model_worker_batch``'s result for the model's batch: its tensors zeros
        of the model's shapes (values never matter here, rows do), ``seq_lens`` its values."""
        torch, bs = self.torch, len(batch["seq_lens"])
        seq_lens = torch.tensor(batch["seq_lens"], dtype=torch.int64)
        return _filled(
            self.ModelWorkerBatch, forward_mode=self.fbi.ForwardMode[batch["mode"]],
            input_ids=self._zeros(batch["input_ids"]), req_pool_indices=torch.arange(bs, dtype=torch.int64),
            seq_lens=seq_lens, seq_lens_cpu=seq_lens.clone(), seq_lens_sum=int(seq_lens.sum()),
            out_cache_loc=self._zeros(batch["out_cache_loc"]), spec_info=self._spec(batch),
            capture_hidden_mode=self.fbi.CaptureHiddenMode[batch["capture"]], spec_algorithm=self.eagle,
            reqs=[types.SimpleNamespace(rid=f"r{i}") for i in range(bs)])

    def run(self, batch: dict[str, Any]) -> dict[str, Any]:
        """``init_new``, the graph decision, ``replay_prepare`` where the graph runs; the answer:
        ``graph`` (upstream's decision), ``error`` (what raised, and in which function),
        ``padded_bs`` and the sizes of the batch as upstream built it."""
        g = self.graph_runner(batch["runner"])
        out: dict[str, Any] = {"graph": None, "error": None, "padded_bs": None}
        stage = "init_new"
        try:
            fb = self.fbi.ForwardBatch.init_new(self.worker_batch(batch), g.model_runner)
            out["forward_batch"] = _sizes(fb)
            stage = "can_run"
            out["graph"] = bool(fb.forward_mode.is_cuda_graph() and g.can_run(fb))
            if out["graph"]:
                stage = "replay_prepare"
                out["shapes"] = {"input_ids_buffer": [fb.batch_size * g.num_tokens_per_bs],
                                 "input_ids": _shape(fb.input_ids), "num_tokens_per_bs": g.num_tokens_per_bs,
                                 "raw_bs": fb.batch_size}
                g.replay_prepare(fb)
                out["padded_bs"] = g.bs
        except Exception as e:  # noqa: BLE001  (upstream raised: the answer)
            out["error"] = error_signature(type(e).__name__, str(e), stage)
        return out


def _shape(t: Any) -> list[int] | None:
    return None if t is None else list(t.shape)


def _sizes(fb: Any) -> dict[str, Any]:
    """The rows of the ``ForwardBatch`` upstream's ``init_new`` built."""
    return {"batch_size": fb.batch_size, "input_ids": _shape(fb.input_ids), "positions": _shape(fb.positions),
            "out_cache_loc": _shape(fb.out_cache_loc)}
