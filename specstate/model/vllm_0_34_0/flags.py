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


@dataclass
class _Read:
    model: str = "?"
    fields: dict[str, Any] = field(default_factory=dict)
    modelled: list[str] = field(default_factory=list)
    unaffected: list[str] = field(default_factory=list)
    not_examined: list[str] = field(default_factory=list)
    not_judged: list[dict[str, str]] = field(default_factory=list)
    spec: dict[str, Any] | None = None


def _one_flag(r: _Read, flag: str, val: str) -> None:
    """One modelled flag's value into ``r.fields``."""
    if flag == "--speculative-config":
        r.spec = _json(flag, val)
    elif flag in ("--compilation-config", "-O"):
        cc = _json(flag, val) if val.strip().startswith("{") else {"mode": val}
        if "cudagraph_mode" in cc:
            r.fields["cudagraph_mode"] = str(cc["cudagraph_mode"]).upper()
        if "cudagraph_capture_sizes" in cc:
            r.fields["capture_sizes"] = tuple(sorted(int(x) for x in cc["cudagraph_capture_sizes"]))
    elif flag in _INT_FLAGS:
        try:
            r.fields[_INT_FLAGS[flag]] = int(val)
        except ValueError:
            raise UsageError(f"{flag}: expected an integer but got {val[:40]!r}") from None
    else:
        r.fields[_BOOL_FLAGS[flag][0]] = _BOOL_FLAGS[flag][1]
    r.modelled.append(flag)


def _read_flags(rest: list[str]) -> _Read:
    """The words after ``serve``: the model, then each flag sorted into modelled / unaffected /
    not judged / not examined."""
    r = _Read()
    if rest and not rest[0].startswith("-"):
        r.model, rest = rest[0], rest[1:]
    i = 0
    while i < len(rest):
        flag, eq, val = rest[i].partition("=")
        if flag in _VALUE_FLAGS and not eq:
            if i + 1 >= len(rest):
                raise UsageError(f"{flag}: expected a value")
            val, i = rest[i + 1], i + 1
        i += 1
        if flag == "--model" and val:
            r.model = val
        elif flag in ("--speculative-config", "--compilation-config", "-O") or flag in _INT_FLAGS or flag in _BOOL_FLAGS:
            _one_flag(r, flag, val)
        elif flag in _UNAFFECTED:
            r.unaffected.append(flag + (f" ({_UNAFFECTED_WHY[flag]})" if flag in _UNAFFECTED_WHY else ""))
        elif flag in _NOT_JUDGED:
            r.not_judged.append({"flag": flag, "parts": "all", "reason": _NOT_JUDGED[flag]})
        elif flag.startswith("-"):
            r.not_examined.append(flag)
            if not eq and i < len(rest) and not rest[i].startswith("-"):
                i += 1  # its value
    return r


def _speculative_fields(r: _Read) -> None:
    """``--speculative-config``'s fields (``config/speculative.py::SpeculativeConfig``): K, the method,
    the DSD schedule (validated as vLLM validates it)."""
    if r.spec is None:
        r.fields.update(num_speculative_tokens=0, schedule=None, method="none")
        return
    k = r.spec.get("num_speculative_tokens")
    if not isinstance(k, int) or k < 0:
        raise UsageError(f"--speculative-config: expected num_speculative_tokens >= 0 but got {k!r}")
    r.fields["num_speculative_tokens"] = k
    r.fields["method"] = str(r.spec.get("method", "eagle"))
    sched = r.spec.get("num_speculative_tokens_per_batch_size")
    r.fields["schedule"] = None
    if sched is not None:
        try:
            r.fields["schedule"] = tuple(validate_and_normalize_dynamic_sd_schedule(sched))
        except InvalidConfig as e:
            raise UsageError(f"--speculative-config: {e}") from None
    if r.fields["method"] not in ("eagle", "eagle3", "mtp"):
        r.not_judged.append({"flag": "--speculative-config", "parts": "all",
                             "reason": f"method {r.fields['method']!r}: only eagle, eagle3 and mtp (a draft that "
                                       f"reserves K lookahead slots) are modelled"})


def parse_vllm_serve(argv: list[str] | tuple[str, ...] | str) -> VllmLaunch:
    """The launch of a ``vllm serve MODEL ...`` line (a string or its words)."""
    words = shlex.split(argv) if isinstance(argv, str) else list(argv)
    if not is_vllm_serve(words):
        raise UsageError(f"expected a 'vllm serve MODEL ...' line but got {' '.join(words[:3])[:60]!r}")
    r = _read_flags(words[2:] if words[1] == "serve" else words[4:])
    _speculative_fields(r)
    assumed: list[dict[str, str]] = []
    for name, (value, why) in ASSUMED.items():
        if name not in r.fields:
            if name != "enable_prefix_caching":
                r.fields[name] = value
            assumed.append({"setting": name, "value": str(value), "why": why})
    try:
        config = VllmEngineConfig(**r.fields)
        config.validate()
    except (InvalidConfig, TypeError) as e:
        raise UsageError(f"vllm serve: {e}") from None
    return VllmLaunch(r.model, config, tuple(r.modelled), tuple(r.unaffected), tuple(r.not_examined),
                      tuple(r.not_judged), tuple(assumed), tuple(words))
