"""What a launch's verdict covers: the flags the model reads, the flags that change what it holds
but that it does not model, the settings sglang derives itself, and the environment on the line.

Owns three tables, each row a claim about the release's own ``ServerArgs`` (``server_args.py``)
that ``tests/test_coverage.py`` checks against the source it cites:

- ``AFFECTING``: a flag the model does not model but that changes the modelled batch state
  (the page size, the CUDA-graph sizes, the chunk size, how requests reach a scheduler). Given
  with a value other than its default, the launch is **not judged**: the verdict can be no PASS.
- ``HARMLESS``: flags checked to change nothing the model holds (where the model loads, how the
  server listens, how it logs).
- every other flag the release declares is listed as **not examined**: accepted, its effect on
  the batch state not derived by specstate (never claimed to "change nothing").

``ASSUMED`` are the settings sglang derives at start from the GPU and the model's
``config.json`` (page size, attention backend, context length, KV pool, graph and chunk
defaults): where the launch does not set them and ``--model-config`` / ``--gpu`` do not derive
them (``_settings.derive_settings``: the ``derived`` key, each with its source), the verdict names
the value the model assumed. A derived page size the model does not cover is not judged.
Environment assignments on the pasted line: ``SPECSTATE_ENV`` are the release's own variables
the model applies (``SGLANG_ENABLE_SPEC_V2``); any other is listed as not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["Affecting", "AFFECTING", "HARMLESS", "ASSUMED", "APPLIED_ENV", "not_judged_flags", "assumed_settings",
           "examined"]


@dataclass(frozen=True)
class Affecting:
    dest: str  #: the ``ServerArgs`` field
    judged_when: Callable[[Any, Mapping[str, Any]], bool]  #: (value, every value given) -> the model still covers it
    parts: str  #: which parts of the verdict it affects
    reason: str  #: what sglang does with it, citing where
    cites: tuple[str, str] = ("", "")  #: (``ServerArgs`` method, a line of its body), checked by the test


def _is_one(value: Any, _given: Mapping[str, Any]) -> bool:  # noqa: ANN401
    return value in (None, 1)


#: backends whose choice sets a page size other than 1 (``_handle_attention_backend_compatibility``)
PAGED_BACKENDS = {"flashmla": 64, "cutlass_mla": 128, "trtllm_mla": 64}


def _page_one_backend(value: Any, given: Mapping[str, Any]) -> bool:  # noqa: ANN401
    """Judged when the backend keeps the launch's page size: not a paged backend, or ``--page-size``
    given as the size the backend sets (trtllm_mla keeps 32 or 64); every family models paged KV.
    A paged backend without that ``--page-size`` runs at a page size the config does not hold: not
    judged (a backend sglang derives from ``--model-config`` / ``--gpu`` is ``Derived.page_gap``'s)."""
    if value is None or value not in PAGED_BACKENDS:
        return True
    page = given.get("page_size")
    return page == PAGED_BACKENDS[value] or (value == "trtllm_mla" and page in (32, 64))


AFFECTING: tuple[Affecting, ...] = (
    Affecting("tp_size", _is_one, "every part (the model is one tensor-parallel rank)",
              "the model runs one rank (tp 1); with --tp-size N >= 2 sglang derives per-rank settings it does not "
              "model: the CUDA-graph default max bs (512 instead of 256 from tp 4, ServerArgs._handle_gpu_memory_settings), "
              "the per-rank KV pool from every rank's free memory, and for DeepSeek V3 / Kimi K2.5 the all-reduce "
              "fusion path (ServerArgs._handle_model_specific_adjustments); judge it with --tp-size 1 and the "
              "per-rank --cuda-graph-max-bs and --max-total-tokens",
              ("_handle_gpu_memory_settings", "if self.tp_size < 4:")),
    Affecting("dp_size", _is_one, "sweep, fuzz, prove (each data-parallel scheduler sees a share of the requests)",
              "--dp-size N runs N schedulers, each with its own batch and a share of the load (the sweep's "
              "concurrency levels are not per scheduler); with --enable-dp-attention the chunk becomes "
              "chunked_prefill_size // dp_size (ServerArgs._handle_data_parallelism)",
              ("_handle_data_parallelism", "self.chunked_prefill_size = self.chunked_prefill_size // self.dp_size")),
    Affecting("pp_size", _is_one, "every part (pipeline micro-batches are not modelled)",
              "--pp-size N splits the batch into pipeline micro-batches (ServerArgs._handle_pipeline_parallelism)",
              ("_handle_pipeline_parallelism", "")),
    Affecting("attention_backend", _page_one_backend, "every part (the page size)",
              "this backend sets the page size above 1 (flashmla 64, cutlass_mla 128, trtllm_mla 64 unless 32 or 64 "
              "is given: ServerArgs._handle_attention_backend_compatibility); give that --page-size with it to judge "
              "the launch at its page size (paged KV: every family)",
              ("_handle_attention_backend_compatibility", "self.page_size = 64")),
    Affecting("decode_attention_backend", _page_one_backend, "every part (the page size)",
              "this backend sets the page size above 1 (ServerArgs._handle_attention_backend_compatibility); give "
              "that --page-size with it to judge the launch at its page size",
              ("_handle_attention_backend_compatibility", "self.page_size = 128")),
)

#: flags checked to change nothing the model holds (not read by any ``ServerArgs`` handler that
#: writes a modelled field; ``tests/test_coverage.py`` checks it against the release's source)
HARMLESS = frozenset({"model_path", "tokenizer_path", "host", "port", "trust_remote_code", "served_model_name",
                      "log_level", "log_level_http", "log_requests", "speculative_draft_model_path",
                      "speculative_draft_model_revision", "revision", "download_dir", "api_key",
                      "enable_metrics", "show_time_cost", "skip_server_warmup", "tokenizer_mode",
                      "enable_flashinfer_allreduce_fusion", "random_seed", "watchdog_timeout"})

#: settings sglang derives at start, the flag that sets each, and what the model assumes without it
ASSUMED: tuple[tuple[str, str, str], ...] = (
    ("page_size", "page size 1",
     "sglang takes it from the attention backend it picks for the model's architecture and GPU "
     "(ServerArgs._handle_page_size: 1; an MLA model on Blackwell gets trtllm_mla, page size 64); "
     "give --model-config and --gpu to derive it"),
    ("attention_backend", "a backend that keeps page size 1",
     "sglang picks it from the model's architecture and GPU (ServerArgs._get_default_attn_backend); "
     "give --model-config and --gpu to derive it"),
    ("context_length", "4096 tokens", "sglang reads it from the model's config.json at start; give --model-config "
                                      "to derive it"),
    ("max_total_tokens", "65536 KV slots", "sglang sizes the KV pool from GPU memory at start"),
)

#: the release's own environment variables the model applies (name -> what it does; 0.5.12's
#: ``envs.SGLANG_ENABLE_SPEC_V2``, which the v2 releases no longer read)
APPLIED_ENV = {"SGLANG_ENABLE_SPEC_V2": "false runs spec v1 (the overlap scheduler off) for topk 1 "
                                        "(ServerArgs._handle_speculative_decoding)"}


#: the argparse ``dest`` a release's flag list gives a field (0.5.12 names them by the long flag)
_DEST_ALIASES = {"tensor_parallel_size": "tp_size", "data_parallel_size": "dp_size",
                 "pipeline_parallel_size": "pp_size"}


def field_of(dest: str) -> str:
    """The ``ServerArgs`` field of an argparse ``dest``."""
    return _DEST_ALIASES.get(dest, dest)


def not_judged_flags(values: Mapping[str, Any], spelled: Callable[[str], str]) -> list[tuple[str, str, str]]:
    """(flag and value, parts affected, reason) of each flag given that the model does not judge."""
    out = []
    fields = {field_of(d): (d, v) for d, v in values.items()}
    for a in AFFECTING:
        if a.dest in fields and not a.judged_when(fields[a.dest][1], values):
            dest, value = fields[a.dest]
            out.append((f"{spelled(dest)} {value}", a.parts, a.reason))
    return out


def assumed_settings(values: Mapping[str, Any], settings: Any = None) -> list[tuple[str, str, str]]:  # noqa: ANN401
    """(setting, value assumed, why) for each setting the launch leaves to sglang that ``settings``
    (``_settings.Settings``) did not derive from the model and GPU."""
    derived = {x.name for x in settings.derived()} if settings is not None else set()
    unknown = getattr(settings, "backend_unknown", "")
    out = []
    for s, v, why in ASSUMED:
        if values.get(s) is None and s not in derived:
            known = unknown and s in ("page_size", "attention_backend") and "--model-config" not in unknown
            out.append((s, v, f"{why.split('; give')[0]}; not derived: {unknown}" if known else why))
    return out


def examined(dest: str) -> bool:
    """Whether specstate has a claim about this flag (modelled, affecting or harmless)."""
    return field_of(dest) in HARMLESS or any(a.dest == field_of(dest) for a in AFFECTING)


def env_values(assignments: list[str]) -> dict[str, str]:
    """``NAME=value`` words as a mapping (a later one wins, as in the shell)."""
    return dict(a.split("=", 1) for a in assignments)


def env_bool(name: str, text: str) -> bool:
    """sglang's ``EnvBool`` reading (``environ.py``): true / 1 / yes / y, false / 0 / no / n."""
    from specstate.errors import UsageError

    if text.lower() in ("true", "1", "yes", "y"):
        return True
    if text.lower() in ("false", "0", "no", "n"):
        return False
    raise UsageError(f"{name}={text}: expected true / false, 1 / 0, yes / no (sglang's EnvBool) but got {text!r}")


def _derived_defaults(p: Any, config: Any, settings: Any = None) -> list[tuple[str, str, str]]:  # noqa: ANN401
    """The graph and chunk defaults sglang takes from the GPU's memory, where the launch leaves them
    and no ``--gpu`` derives them."""
    out: list[tuple[str, str, str]] = []
    if settings is not None and settings.deployment.gpu is not None:
        return out
    suffix = "_decode" if any(d.endswith("_decode") for d in p.values) else ""
    if p.values.get("cuda_graph_max_bs" + suffix) is None and not p.values.get("cuda_graph_bs" + suffix) \
            and p.values.get("cuda_graph_max_bs") is None and not p.values.get("cuda_graph_bs"):
        out.append(("cuda_graph_max_bs", str(config.cuda_graph_max_bs),
                    "an H100 / H200's default for this --tp-size (ServerArgs._handle_gpu_memory_settings: a B200 "
                    "takes 512, a 40 GB A100 32 or 160); give --cuda-graph-max-bs or --gpu to judge your GPU's"))
    if p.values.get("chunked_prefill_size") is None:
        out.append(("chunked_prefill_size", str(config.chunked_prefill_size),
                    "an H100 / H200's default (ServerArgs._handle_gpu_memory_settings: a B200 takes 16384, a "
                    "40 GB A100 4096); give --chunked-prefill-size or --gpu to judge your GPU's"))
    return out


def _env_entry(name: str, value: str, release: str) -> dict[str, Any]:
    """One ``NAME=value`` of the line: applied where the release reads it and the model follows."""
    from specstate.server_args._tables import rules

    if name in APPLIED_ENV and rules(release).adaptive_v2:
        return {"name": name, "value": value, "applied": False,
                "note": f"not read by sglang {release}: {rules(release).spec_v2_env}; the V2 worker always runs"}
    return {"name": name, "value": value, "applied": name in APPLIED_ENV,
            "note": APPLIED_ENV.get(name, "not modelled: specstate does not read it")}


def page_gap_entry(page: Any, settings: Any) -> dict[str, str]:  # noqa: ANN401
    """The not-judged entry of a derived page size the model does not cover (``Derived.page_gap``)."""
    d = settings.deployment
    backend = settings.attention_backend.value if settings.attention_backend is not None else "?"
    arch = d.model.architecture if d.model is not None else "?"
    gpu = d.gpu.name if d.gpu is not None else "?"
    return {"what": f"page size {page.value}", "parts": "every part (they ran at page size 1)",
            "reason": f"derived page size {page.value} (from backend {backend} chosen for architecture {arch} on GPU "
                      f"{gpu}): not modelled; the model covers page size 1 (paged KV: issue 39); {page.source}"}


def launch_coverage(p: Any, config: Any, env: Mapping[str, str], derived: Any = None) -> dict[str, Any]:  # noqa: ANN401
    """The coverage block of a parsed launch (``ParsedFlags``; ``derived``: its ``_derive.Derived``):
    what is judged, what derived from the model and GPU, what assumed."""
    settings = getattr(derived, "settings", None)
    dest_of = {flag: dest for dest, flag in p.spelled.items()}
    affecting = {a.dest for a in AFFECTING}
    dest_of = {f: field_of(d) for f, d in dest_of.items()}
    not_judged = [{"flag": f, "parts": parts, "reason": why} for f, parts, why in not_judged_flags(p.values, p.flag_of)]
    gap = getattr(derived, "page_gap", None)
    if gap is not None and gap.derived:
        not_judged.append(page_gap_entry(gap, settings))
    judged_flags = {x["flag"].split()[0] for x in not_judged if "flag" in x}
    unaffected = [f for f in p.not_modelled if dest_of[f] in HARMLESS
                  or (dest_of[f] in affecting and f not in judged_flags)]
    assumed = [{"setting": s, "value": v, "why": why}
               for s, v, why in assumed_settings(p.values, settings) + _derived_defaults(p, config, settings)]
    environment = [_env_entry(k, v, p.release) for k, v in env.items()]
    return {"modelled": [f for f in p.spelled.values() if f not in p.not_modelled], "not_judged": not_judged,
            "unaffected": unaffected,
            "not_examined": [f for f in p.not_modelled if not examined(dest_of[f])],
            "derived": [x.to_json() for x in settings.derived()] if settings is not None else [],
            "assumed": assumed, "environment": environment}
