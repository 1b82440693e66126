"""``vllm serve MODEL [flags]``: the launch line as the model's config, with what each flag is to it.

The flags are ``vllm/engine/arg_utils.py::EngineArgs``' (``EngineArgs.add_cli_args``); JSON values
(``--speculative-config``, ``--compilation-config``) are parsed as vLLM parses them
(``config/speculative.py::SpeculativeConfig`` fields). A flag is *modelled* (it sets a field of
:class:`VllmEngineConfig`), *unaffected* (read and known to change nothing the model holds), or
*not judged* (it changes what the model holds in a way it does not model: the verdict cannot pass).
Everything else is accepted and *not examined*. Settings the line does not give and the model must
have are *assumed*, each with why.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from specstate.errors import InvalidConfig, UsageError
from specstate.model.vllm_0_34_0.config import VllmEngineConfig, validate_and_normalize_dynamic_sd_schedule

__all__ = ["VllmLaunch", "parse_vllm_serve", "is_vllm_serve", "ASSUMED"]

#: what the model assumes where the line is silent (no model weights, no GPU memory are read here)
ASSUMED: dict[str, tuple[Any, str]] = {
    "max_num_seqs": (256, "vLLM's default for `vllm serve` (config/scheduler.py::SchedulerConfig.max_num_seqs)"),
    "max_num_batched_tokens": (8192, "vLLM's default for an OpenAI server on a large GPU "
                               "(engine/arg_utils.py::EngineArgs.get_batch_defaults); yours may differ"),
    "max_model_len": (32768, "the model's context length, not read (no weights or config.json here)"),
    "num_gpu_blocks": (4096, "the KV blocks the GPU memory gives (profiled at start), not derivable here"),
    "block_size": (16, "vLLM's default block size on CUDA"),
    "enable_prefix_caching": (False, "the model holds no prefix cache; vLLM's default is on (a hit only lowers "
                              "num_new_tokens of an admitted request)"),
}

_INT_FLAGS = {"--max-num-seqs": "max_num_seqs", "--max-num-batched-tokens": "max_num_batched_tokens",
              "--max-model-len": "max_model_len", "--block-size": "block_size",
              "--num-gpu-blocks-override": "num_gpu_blocks", "--data-parallel-size": "data_parallel_size",
              "-dp": "data_parallel_size", "--long-prefill-token-threshold": "long_prefill_token_threshold"}
_BOOL_FLAGS = {"--async-scheduling": ("async_scheduling", True), "--no-async-scheduling": ("async_scheduling", False),
               "--enable-chunked-prefill": ("enable_chunked_prefill", True),
               "--no-enable-chunked-prefill": ("enable_chunked_prefill", False)}
#: read, and known to change nothing the model holds
_UNAFFECTED = {"--host", "--port", "--served-model-name", "--api-key", "--trust-remote-code", "--dtype",
               "--tensor-parallel-size", "-tp", "--gpu-memory-utilization", "--seed", "--disable-log-requests",
               "--uvicorn-log-level", "--tokenizer", "--download-dir", "--load-format", "--enable-prefix-caching",
               "--no-enable-prefix-caching"}
_UNAFFECTED_WHY = {"--gpu-memory-utilization": "num_gpu_blocks is assumed, not derived from memory",
                   "--enable-prefix-caching": "prefix caching is not modelled (assumed off)"}
#: change what the model holds in a way it does not model
_NOT_JUDGED = {"--pipeline-parallel-size": "pipeline parallelism staggers decodes (AsyncScheduler.decode_stagger)",
               "-pp": "pipeline parallelism staggers decodes (AsyncScheduler.decode_stagger)",
               "--kv-transfer-config": "KV connectors (P/D) are not modelled",
               "--enable-lora": "LoRA admission is not modelled",
               "--scheduling-policy": "only FCFS is modelled"}
_VALUE_FLAGS = set(_INT_FLAGS) | {"--speculative-config", "--compilation-config", "-O", "--host", "--port",
                                  "--served-model-name", "--api-key", "--dtype", "--tensor-parallel-size", "-tp",
                                  "--gpu-memory-utilization", "--seed", "--uvicorn-log-level", "--tokenizer",
                                  "--download-dir", "--load-format", "--pipeline-parallel-size", "-pp",
                                  "--kv-transfer-config", "--scheduling-policy"}


@dataclass(frozen=True)
class VllmLaunch:
    model: str
    config: VllmEngineConfig
    modelled: tuple[str, ...] = ()
    unaffected: tuple[str, ...] = ()
    not_examined: tuple[str, ...] = ()
    not_judged: tuple[dict[str, str], ...] = ()
    assumed: tuple[dict[str, str], ...] = ()
    argv: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        c = self.config
        sched = "static" if c.schedule is None else json.dumps([list(e) for e in c.schedule])
        return (f"vllm serve {self.model} ({c.method}, K={c.num_speculative_tokens}, DSD {sched}, "
                f"{'async' if c.async_scheduling else 'sync'} scheduling, dp={c.data_parallel_size})")


def is_vllm_serve(argv: list[str] | tuple[str, ...]) -> bool:
    """``vllm serve ...`` (argv[0..1]; ``python -m vllm.entrypoints.cli.main serve`` too)."""
    a = list(argv)
    if len(a) >= 2 and a[0].rsplit("/", 1)[-1] == "vllm" and a[1] == "serve":
        return True
    return len(a) >= 4 and a[1] == "-m" and a[2] in ("vllm.entrypoints.cli.main",) and a[3] == "serve"


def _json(flag: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{flag}: expected a JSON object but got {text[:60]!r} ({e.msg})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag}: expected a JSON object but got {type(value).__name__}")
    return value


def parse_vllm_serve(argv: list[str] | tuple[str, ...] | str) -> VllmLaunch:
    """The launch of a ``vllm serve MODEL ...`` line (a string or its words)."""
    words = shlex.split(argv) if isinstance(argv, str) else list(argv)
    if not is_vllm_serve(words):
        raise UsageError(f"expected a 'vllm serve MODEL ...' line but got {' '.join(words[:3])[:60]!r}")
    rest = words[2:] if words[1] == "serve" else words[4:]
    model = "?"
    if rest and not rest[0].startswith("-"):
        model, rest = rest[0], rest[1:]
    fields: dict[str, Any] = {}
    modelled: list[str] = []
    unaffected: list[str] = []
    not_examined: list[str] = []
    not_judged: list[dict[str, str]] = []
    i = 0
    spec: dict[str, Any] | None = None
    while i < len(rest):
        tok = rest[i]
        flag, eq, val = tok.partition("=")
        takes = flag in _VALUE_FLAGS
        if takes and not eq:
            if i + 1 >= len(rest):
                raise UsageError(f"{flag}: expected a value")
            val, i = rest[i + 1], i + 1
        i += 1
        if flag == "--model" and val:
            model = val
        elif flag == "--speculative-config":
            spec = _json(flag, val)
            modelled.append(flag)
        elif flag in ("--compilation-config", "-O"):
            cc = _json(flag, val) if val.strip().startswith("{") else {"mode": val}
            if "cudagraph_mode" in cc:
                fields["cudagraph_mode"] = str(cc["cudagraph_mode"]).upper()
            if "cudagraph_capture_sizes" in cc:
                fields["capture_sizes"] = tuple(sorted(int(x) for x in cc["cudagraph_capture_sizes"]))
            modelled.append(flag)
        elif flag in _INT_FLAGS:
            try:
                fields[_INT_FLAGS[flag]] = int(val)
            except ValueError:
                raise UsageError(f"{flag}: expected an integer but got {val[:40]!r}") from None
            modelled.append(flag)
        elif flag in _BOOL_FLAGS:
            fields[_BOOL_FLAGS[flag][0]] = _BOOL_FLAGS[flag][1]
            modelled.append(flag)
        elif flag in _UNAFFECTED:
            unaffected.append(flag + (f" ({_UNAFFECTED_WHY[flag]})" if flag in _UNAFFECTED_WHY else ""))
        elif flag in _NOT_JUDGED:
            not_judged.append({"flag": flag, "parts": "all", "reason": _NOT_JUDGED[flag]})
        elif flag.startswith("-"):
            not_examined.append(flag)
            if not eq and i < len(rest) and not rest[i].startswith("-"):
                i += 1  # its value
    if spec is None:
        fields["num_speculative_tokens"] = 0
        fields["schedule"] = None
        fields["method"] = "none"
    else:
        k = spec.get("num_speculative_tokens")
        if not isinstance(k, int) or k < 0:
            raise UsageError(f"--speculative-config: expected num_speculative_tokens >= 0 but got {k!r}")
        fields["num_speculative_tokens"] = k
        fields["method"] = str(spec.get("method", "eagle"))
        sched = spec.get("num_speculative_tokens_per_batch_size")
        if sched is not None:
            try:
                fields["schedule"] = tuple(validate_and_normalize_dynamic_sd_schedule(sched))
            except InvalidConfig as e:
                raise UsageError(f"--speculative-config: {e}") from None
        else:
            fields["schedule"] = None
        if fields["method"] not in ("eagle", "eagle3", "mtp"):
            not_judged.append({"flag": "--speculative-config", "parts": "all",
                               "reason": f"method {fields['method']!r}: only eagle, eagle3 and mtp (a draft that "
                                         f"reserves K lookahead slots) are modelled"})
    assumed: list[dict[str, str]] = []
    for name, (value, why) in ASSUMED.items():
        if name not in fields:
            if name != "enable_prefix_caching":
                fields[name] = value
            assumed.append({"setting": name, "value": str(value), "why": why})
    try:
        config = VllmEngineConfig(**fields)
        config.validate()
    except (InvalidConfig, TypeError) as e:
        raise UsageError(f"vllm serve: {e}") from None
    return VllmLaunch(model, config, tuple(modelled), tuple(unaffected), tuple(not_examined), tuple(not_judged),
                      tuple(assumed), tuple(words))
