"""A parsed launch as the ``SpecConfig`` the model runs: what ``ServerArgs.__post_init__`` does
to the fields the model reads, per release.

Owns: defaults sglang fills in (``max_running_requests`` 48 for speculative decoding; an H200's
``chunked_prefill_size`` 8192 and ``cuda_graph_max_bs`` 256, 512 from ``--tp-size 4``), the
adjustments it makes (``topk 1`` forces ``num_steps + 1`` draft tokens, ``--enable-mixed-chunk``
is turned off, ``topk > 1`` turns the overlap scheduler off in 0.5.12), the launches it
refuses, and the launches outside what a family models (both: one ``UsageError`` line that
names the flag, the value and what is accepted). Each rule cites the sglang code it mirrors:

- 0.5.12 ``server_args.py::ServerArgs._handle_speculative_decoding``,
  ``ServerArgs._handle_gpu_memory_settings``, ``ServerArgs.check_server_args``,
  ``_resolve_speculative_algorithm_alias``;
- 0.5.17: ``_handle_eagle_family`` and ``_init_adaptive_speculative_params`` (run only with
  ``--speculative-adaptive``: without it the launch is static speculation on ``EAGLEWorkerV2``) of its
  ``arg_groups/speculative_hook.py`` (named so, without the ``file::symbol`` form, because the
  repository-wide citation test checks that form against 0.5.12; ``tests/test_server_args_source.py``
  checks these against 0.5.17);
- 0.5.23: the same two functions of its ``arg_groups/speculative_hook.py`` (they now write through
  ``declare_resolution``, same values), with two differences (``_tables.RULES``): with no
  ``--speculative-adaptive-config`` the candidate steps are 0.5.20's default config's (slot 1
  ``[1, 3, 5, 7]``, so ``--speculative-num-steps 5`` is accepted), and ``--enable-mixed-chunk``
  stays on for EAGLE (``SpeculativeAlgorithm.supports_mixed_chunk`` in ``speculative/spec_info.py``),
  a batch the 0.5.23 family does not model: refused.

What differs between releases is read from ``_tables.rules(release)`` (``ReleaseRules``), never
from the release string.

What sglang takes from the GPU and the model's ``config.json`` (the attention backend and the page
size it forces, the context length, the chunk and graph defaults, the draft shape) is
``_settings.derive_settings``'s, from ``--model-config`` and ``--gpu`` where given (without them:
an H200's rows and the model's 4096 tokens, named as assumed). A derived page size the model does
not cover (``BOUNDS["page_size"]``) leaves the config at page size 1 and is reported as not judged
(``Derived.page_gap``); once the model covers it, it flows into ``SpecConfig.page_size``. The KV
pool size sglang takes from the GPU's memory less the weights is not derived: the model's is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specstate.errors import InvalidConfig, UsageError
from specstate.model.config import BOUNDS, SpecConfig
from specstate.model.variants import PatchFlag
from specstate.server_args._hardware import Deployment
from specstate.server_args._parse import ParsedFlags
from specstate.server_args._settings import Setting, Settings, derive_settings
from specstate.server_args._tables import RULES, UNSUPPORTED, rules

__all__ = ["Derived", "derive_config"]

#: what ``SpecConfig`` field each ``ServerArgs`` field sets, where they are one to one
_DIRECT = {"speculative_num_steps": "speculative_num_steps", "speculative_eagle_topk": "speculative_eagle_topk",
           "speculative_num_draft_tokens": "speculative_num_draft_tokens",
           "max_running_requests": "max_running_requests", "max_prefill_tokens": "max_prefill_tokens",
           "schedule_conservativeness": "schedule_conservativeness", "disable_radix_cache": "disable_radix_cache"}


@dataclass
class Derived:
    config: SpecConfig
    notes: list[str] = field(default_factory=list)  #: defaults filled in, adjustments sglang makes
    settings: Settings = field(default_factory=Settings)  #: what sglang derives from the model and GPU
    page_gap: Setting | None = None  #: a derived page size the model does not cover (the config keeps 1)


def _fail(parsed: ParsedFlags, dest: str, value: Any, why: str) -> UsageError:
    shown = "" if value is True else f" {value}"
    return UsageError(f"{parsed.flag_of(dest)}{shown}: {why}")


def _algorithm(p: ParsedFlags) -> str:
    algo = p.values.get("speculative_algorithm")
    if algo is None:
        raise UsageError(f"--speculative-algorithm: not given; specstate models speculative decoding with EAGLE or "
                         f"EAGLE3 (sglang {p.release} runs without speculation then: nothing to check)")
    resolved = "EAGLE" if algo.upper() in ("NEXTN", "EAGLE") else algo.upper()
    if resolved not in ("EAGLE", "EAGLE3"):
        raise _fail(p, "speculative_algorithm", algo, "expected EAGLE, EAGLE3 or NEXTN (the EAGLE worker the model "
                    "covers); sglang also accepts STANDALONE, NGRAM, DFLASH, ..., which are not modelled")
    return resolved


def _draft_shape(p: ParsedFlags, notes: list[str], auto: Setting | None = None) -> tuple[int, int, int]:
    steps, topk, ndt = (p.values.get(k) for k in ("speculative_num_steps", "speculative_eagle_topk",
                                                  "speculative_num_draft_tokens"))
    if steps is None and auto is not None:
        steps, topk, ndt = auto.value
        notes.append(f"--speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens: not given; "
                     f"{steps}, {topk}, {ndt} ({auto.source})")
    if steps is None:
        if topk is not None or ndt is not None:
            raise UsageError("--speculative-num-steps: not given, but --speculative-eagle-topk or "
                             "--speculative-num-draft-tokens is: sglang asserts all three or none "
                             "(ServerArgs._handle_speculative_decoding)")
        raise UsageError("--speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens: not "
                         "given; sglang picks them from the model's architecture (auto_choose_speculative_params: "
                         "(5, 4, 8) for Llama, (3, 1, 4) otherwise): give all three, or --model-config")
    if topk is None:
        raise UsageError("--speculative-eagle-topk: not given with --speculative-num-steps; sglang "
                         f"{p.release} compares it with 1 (ServerArgs._handle_speculative_decoding): give it")
    if topk == 1 and ndt != steps + 1:
        notes.append(f"--speculative-num-draft-tokens {ndt} -> {steps + 1}: sglang sets num_steps + 1 when topk == 1")
        ndt = steps + 1
    if ndt is None:
        raise UsageError("--speculative-num-draft-tokens: not given with --speculative-eagle-topk > 1: give it")
    return steps, topk, ndt


def _graphs(p: ParsedFlags, notes: list[str], derived: Setting | None = None) -> dict[str, Any]:
    """``cuda_graph_max_bs`` / ``cuda_graph_bs`` (0.5.17: ``..._decode``): a list sets the max
    (``_handle_gpu_memory_settings``); absent, the GPU's row (``derived``; no ``--gpu``: an H200's,
    tp < 4: 256, else 512)."""
    suffix = "_decode" if rules(p.release).per_phase_graphs else ""
    listed, top = p.values.get("cuda_graph_bs" + suffix), p.values.get("cuda_graph_max_bs" + suffix)
    if listed:
        lo, hi = BOUNDS["cuda_graph_max_bs"]
        bad = [b for b in listed if not lo <= b <= hi]
        if bad:  # named as given (``--cuda-graph-bs`` or ``--cuda-graph-bs-decode``), not as the max it sets
            raise _fail(p, "cuda_graph_bs" + suffix, " ".join(map(str, listed))[:80],
                        f"expected batch sizes in [{int(lo)}, {int(hi)}] but got {bad[0]}")
        return {"cuda_graph_bs_override": tuple(listed), "cuda_graph_max_bs": max(listed)}
    if top is None:
        tp = p.values.get("tp_size") or p.values.get("tensor_parallel_size") or 1
        top = derived.value if derived is not None else 256 if tp < 4 else 512
        notes.append(f"--cuda-graph-max-bs{suffix.replace('_', '-')}: not given; " + (
            f"{top} ({derived.source})" if derived is not None else
            f"an H200's default {top} (ServerArgs._handle_gpu_memory_settings)"))
    return {"cuda_graph_max_bs": top}


def _memory(p: ParsedFlags, notes: list[str], settings: Settings | None = None) -> dict[str, Any]:
    s = settings or Settings()
    out: dict[str, Any] = {}
    chunk = p.values.get("chunked_prefill_size")
    if chunk is None and s.chunked_prefill_size is not None and s.chunked_prefill_size.derived:  # --gpu
        chunk = s.chunked_prefill_size.value
        notes.append(f"--chunked-prefill-size: not given; {chunk} ({s.chunked_prefill_size.source})")
    elif chunk is None:
        chunk = 8192
        notes.append("--chunked-prefill-size: not given; an H200's default 8192 (ServerArgs._handle_gpu_memory_settings)")
    elif chunk <= 0:
        notes.append(f"--chunked-prefill-size {chunk}: chunked prefill off (the model: one chunk of any length)")
        chunk = int(BOUNDS["chunked_prefill_size"][1])
    out["chunked_prefill_size"] = chunk
    pool = p.values.get("max_total_tokens")
    if pool is None:
        notes.append(f"--max-total-tokens: not given; sglang sizes the KV pool from GPU memory at start, the model "
                     f"uses {SpecConfig.target_kv_pool_size} slots")
    else:
        out["target_kv_pool_size"] = out["draft_kv_pool_size"] = pool
    if s.context_length is not None:
        out["context_len"] = s.context_length.value
        if s.context_length.derived:
            notes.append(f"--context-length: not given; {s.context_length.value} ({s.context_length.source})")
    elif p.values.get("context_length") is not None:
        out["context_len"] = p.values["context_length"]
    out.update(_page(p, s, out, notes))
    return out


def page_modelled(page: int, release: str | None = None) -> bool:
    """Whether the model covers this page size (``BOUNDS["page_size"]``), and, given a release,
    whether its family models paged KV at all (``pages_modelled``)."""
    lo, hi = BOUNDS["page_size"]
    return lo <= page <= hi and (page == 1 or release is None or pages_modelled(release))


def _page(p: ParsedFlags, s: Settings, out: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """``SpecConfig.page_size``: the page size sglang runs (``--page-size``, or the one sglang
    derives: a backend chosen for the architecture and GPU, ``ServerArgs._handle_page_size``),
    through ``paged_config`` where the release's family models it. A page size the launch sets
    itself that the model does not cover is refused (``paged_config``); a derived one leaves the
    config at 1 and is not judged (``Derived.page_gap``, read by ``derive_config``)."""
    page = s.page_size
    explicit = p.values.get("page_size")
    if page is None:
        page = Setting("page_size", 1 if explicit is None else explicit, "--page-size", False)
    if page.value == 1:
        return {}
    if not page.derived or page_modelled(page.value, p.release):
        return paged_config(p, page.value, out, notes)
    return {}


def pages_modelled(release: str) -> bool:
    """Whether the release's family models paged KV: every family of ``RULES`` does (the v1 family
    and the overlap families: paged allocation, the page-aligned radix cache, the paged decode
    over-allocation); ``rules`` refuses a release it has no rules for."""
    return rules(release) is not None


def paged_config(p: ParsedFlags, page: int, out: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The config changes of page size ``page`` > 1 (given or derived): the paged allocator
    (``PagedTokenToKVPoolAllocator``) and page-aligned radix cache, modelled by every family
    (``pages_modelled``); the pool rounded down to whole pages as ``model_runner.py`` rounds
    ``max_total_num_tokens`` (``// page_size * page_size``); a chunk size it divides
    (``ServerArgs.check_server_args``). ``out``: the memory fields derived so far."""
    lo, hi = BOUNDS["page_size"]
    if not lo <= page <= hi:
        raise _fail(p, "page_size", page, f"expected a page size in [{int(lo)}, {int(hi)}]")
    pool = out.get("target_kv_pool_size", SpecConfig.target_kv_pool_size)
    aligned = pool // page * page
    if aligned < page:
        raise _fail(p, "page_size", page, f"expected at most the KV pool ({pool} slots: --max-total-tokens)")
    chunk = out.get("chunked_prefill_size", 8192)
    if chunk % page and chunk != BOUNDS["chunked_prefill_size"][1]:
        raise _fail(p, "page_size", page, f"expected a divisor of --chunked-prefill-size {chunk}: sglang asserts "
                    "\"chunked_prefill_size must be divisible by page_size\" (ServerArgs.check_server_args)")
    changes: dict[str, Any] = {"page_size": page}
    if aligned != pool:
        notes.append(f"--max-total-tokens {pool} -> {aligned}: whole pages of {page} (ModelRunner rounds "
                     "max_total_num_tokens down to a multiple of page_size)")
        changes["target_kv_pool_size"] = changes["draft_kv_pool_size"] = aligned
    return changes


def _checks(p: ParsedFlags, notes: list[str]) -> None:
    for dest, why in UNSUPPORTED.items():
        if p.values.get(dest):
            raise _fail(p, dest, p.values[dest], f"not modelled ({why}); drop it to check this launch")
    for dest, value in rules(p.release).decode_graph_off:
        if p.values.get(dest) == value:
            raise _fail(p, dest, value, f"not modelled ({UNSUPPORTED['disable_cuda_graph']}); drop it to check this launch")
    if p.values.get("schedule_conservativeness", 1.0) < 0:
        raise _fail(p, "schedule_conservativeness", p.values["schedule_conservativeness"],
                    "expected >= 0: sglang asserts it (ServerArgs.check_server_args)")
    if p.values.get("enable_mixed_chunk") and rules(p.release).mixed_chunk_with_eagle:
        raise _fail(p, "enable_mixed_chunk", True, f"not modelled: sglang {p.release} keeps mixed chunked prefill "
                    "on for EAGLE (SpeculativeAlgorithm.supports_mixed_chunk), and the "
                    f"{rules(p.release).family} family does not model mixed prefill + decode batches; drop it")
    if p.values.get("enable_mixed_chunk"):
        notes.append("--enable-mixed-chunk: sglang turns it off for EAGLE speculative decoding")


def _family_v1(p: ParsedFlags, topk: int, notes: list[str]) -> dict[str, Any]:
    """0.5.12: topk > 1 runs spec v1 (overlap off); topk 1 with the overlap scheduler runs spec v2
    (``SGLANG_ENABLE_SPEC_V2`` defaults to true), which the v1 family does not model."""
    if p.values.get("speculative_adaptive"):
        raise _fail(p, "speculative_adaptive", True, f"not modelled by the {rules(p.release).family} family (it models "
                    f"the v1 EAGLEWorker with the seed's threshold); the {_overlap_family()} family models adaptive "
                    "speculation")
    if p.values.get("speculative_adaptive_config") is not None:
        notes.append("--speculative-adaptive-config: unused without --speculative-adaptive (as in sglang)")
    spec_v2 = _spec_v2_env(p)
    if topk == 1 and not p.values.get("disable_overlap_schedule") and not spec_v2:
        notes.append("SGLANG_ENABLE_SPEC_V2=false: sglang runs spec v1 (the overlap scheduler off) for topk 1 "
                     "(ServerArgs._handle_speculative_decoding)")
    elif topk == 1 and not p.values.get("disable_overlap_schedule"):
        raise UsageError(f"--speculative-eagle-topk 1 without --disable-overlap-schedule: sglang {p.release} then runs "
                         f"spec v2 (EAGLEWorkerV2; SGLANG_ENABLE_SPEC_V2 defaults to true), which the "
                         f"{rules(p.release).family} family does not model: add --disable-overlap-schedule, or --engine "
                         f"{_overlap_family()}")
    if topk > 1 and not p.values.get("disable_overlap_schedule"):
        notes.append("--disable-overlap-schedule: set by sglang for topk > 1 (spec v1)")
    return {"disable_overlap_schedule": True}


def _overlap_family() -> str:
    """The oldest family that models spec v2 with adaptive speculation (``ReleaseRules.adaptive_v2``):
    where a launch the v1 family refuses for it is sent."""
    return next(r.family for r in RULES.values() if r.adaptive_v2)


def _spec_v2_env(p: ParsedFlags) -> bool:
    """``SGLANG_ENABLE_SPEC_V2`` on the pasted line (``envs.SGLANG_ENABLE_SPEC_V2``, default true)."""
    from specstate.server_args._coverage import env_bool

    text = p.env.get("SGLANG_ENABLE_SPEC_V2")
    return True if text is None else env_bool("SGLANG_ENABLE_SPEC_V2", text)


def _family_v2(p: ParsedFlags, topk: int, notes: list[str]) -> dict[str, Any]:
    """0.5.17 on: the v2 families model EAGLEWorkerV2 under the overlap scheduler, topk 1, with
    ``--speculative-adaptive`` (the adaptive controller) or without it: static speculation, the
    launch's step count with no controller (``EAGLEWorkerV2.__init__`` builds one only
    ``if server_args.speculative_adaptive``; ``SGLANG_ENABLE_SPEC_V2`` is gone: every EAGLE launch
    runs the v2 worker)."""
    family = rules(p.release).family
    adaptive = bool(p.values.get("speculative_adaptive"))
    if topk != 1 and adaptive:
        raise _fail(p, "speculative_eagle_topk", topk, f"expected 1: sglang {p.release} disables adaptive speculation "
                    "for topk > 1 (adaptive_unsupported_reason) and runs the draft tree statically, which the "
                    f"{family} family does not model (topk 1 only)")
    if topk != 1:
        raise _fail(p, "speculative_eagle_topk", topk, f"expected 1: sglang {p.release} runs topk > 1 on "
                    f"EAGLEWorkerV2 with a draft tree, which the {family} family does not model (the topk-1 chain only)")
    if p.values.get("disable_overlap_schedule"):
        raise _fail(p, "disable_overlap_schedule", True, f"not modelled: the {family} family models the overlap "
                    "scheduler (event_loop_overlap)")
    out: dict[str, Any] = {"disable_overlap_schedule": False}
    if not adaptive:
        out["speculative_adaptive"] = False
        notes.append("--speculative-adaptive: not given; static speculation on EAGLEWorkerV2: the launch's step count, "
                     "topk and draft tokens on every decode, no adaptive controller (EAGLEWorkerV2.__init__)")
        if p.values.get("speculative_adaptive_config") is not None:
            notes.append("--speculative-adaptive-config: unused without --speculative-adaptive (as in sglang)")
        return out
    path = p.values.get("speculative_adaptive_config")
    if path is not None:
        out["speculative_adaptive_config"] = _adaptive_text(p, path)
    return out


def _adaptive_text(p: ParsedFlags, path: str) -> str:
    from specstate.errors import FileFormatError, InvalidConfig
    from specstate.schema import read_text

    config_from_json = rules(p.release).adaptive_reader_module().config_from_json

    try:
        text = read_text(path, what="adaptive config", max_bytes=1 << 20)
        config_from_json(text)  # nesting bounded, every field checked (adaptive.py's KNOBS)
    except InvalidConfig as e:
        raise _fail(p, "speculative_adaptive_config", path, str(e)) from None
    except (OSError, FileFormatError, ValueError) as e:
        raise _fail(p, "speculative_adaptive_config", path, f"expected a readable JSON file: {str(e)[:160]}") from None
    return text


def _adaptive_defaults(p: ParsedFlags, notes: list[str]) -> None:
    """``_init_adaptive_speculative_params`` (0.5.17 on): topk absent -> 1; steps absent -> the
    middle of the config's candidate steps (their union; no config: the release's default);
    steps not among them -> refused."""
    r = rules(p.release)
    if not r.adaptive_v2 or not p.values.get("speculative_adaptive"):
        return
    from specstate.errors import InvalidConfig as _Invalid

    reader = r.adaptive_reader_module()  # the release's reading of an adaptive config (its RULES)
    candidate_steps, ignored_keys = reader.candidate_steps, reader.ignored_keys

    path = p.values.get("speculative_adaptive_config")
    text = _adaptive_text(p, path) if path is not None else r.default_adaptive_json()
    try:
        cands = candidate_steps(text)
        ignored = ignored_keys(text)
    except _Invalid as e:
        raise _fail(p, "speculative_adaptive_config", path, str(e)) from None
    if ignored:
        notes.append(f"--speculative-adaptive-config {path}: sglang {p.release} ignores {', '.join(ignored)} "
                     "(its _load_adaptive_config, in adaptive_spec_params.py, reads the batch-size keys, each slot's "
                     "AdaptiveStepSlot only candidate_steps and its knobs); accepted, as sglang does")
    if p.values.get("speculative_eagle_topk") is None:
        p.values["speculative_eagle_topk"] = 1
    steps = p.values.get("speculative_num_steps")
    if steps is None:
        steps = p.values["speculative_num_steps"] = cands[len(cands) // 2]
        notes.append(f"--speculative-num-steps: not given; {steps}, the middle of the adaptive candidate steps {list(cands)}")
    elif steps not in cands:
        raise _fail(p, "speculative_num_steps", steps, f"expected one of the adaptive config's candidate steps "
                    f"{list(cands)} (sglang {p.release} refuses others)")


def _patch_values(p: ParsedFlags, patch_flags: tuple[PatchFlag, ...]) -> dict[str, Any]:
    out = {}
    for f in patch_flags:
        value = p.values.get(f.field, f.default)
        if value is not None and f.minimum is not None and value < f.minimum:
            raise _fail(p, f.field, value, f"expected >= {f.minimum:g} (the variant's patch)")
        out[f.field] = value
    return out


def _field_flag(message: str, p: ParsedFlags) -> str:
    names = {"target_kv_pool_size": "max_total_tokens", "context_len": "context_length"}
    for name in sorted(SpecConfig.__dataclass_fields__, key=len, reverse=True):
        if name in message:
            return p.flag_of(names.get(name, name))
    return "the launch"


def _request_cap(values: dict[str, Any], notes: list[str]) -> None:
    """0.5.17 on: the engine caps the running requests at half the KV pool (``max_total_num_tokens
    // 2``, the model's ``start.resolve_max_num_reqs``); the scheduler runs with the cap, so the
    whole model does (0.5.12 caps only a derived default, not ``--max-running-requests``)."""
    pool = values.get("target_kv_pool_size", SpecConfig.target_kv_pool_size)
    asked = values["max_running_requests"]
    if 1 <= pool // 2 < asked:
        values["max_running_requests"] = pool // 2
        notes.append(f"--max-running-requests {asked} -> {pool // 2}: sglang caps it at half the KV pool of {pool} "
                     "tokens (its KVCacheConfigurator.resolve_max_num_reqs) and captures up to that batch size")


def derive_config(p: ParsedFlags, patch_flags: tuple[PatchFlag, ...] = (),
                  deployment: Deployment | None = None) -> Derived:
    """The ``SpecConfig`` of a parsed launch (``release`` picks the rules) on ``deployment`` (the
    model's ``config.json`` and the GPU, where given), or a ``UsageError``."""
    notes: list[str] = []
    _algorithm(p)
    _checks(p, notes)
    settings = derive_settings(p.values, p.release, deployment, env=p.env)
    _adaptive_defaults(p, notes)
    steps, topk, ndt = _draft_shape(p, notes, settings.draft_shape)
    values: dict[str, Any] = {k: p.values[d] for d, k in _DIRECT.items() if p.values.get(d) is not None}
    values.update(speculative_num_steps=steps, speculative_eagle_topk=topk, speculative_num_draft_tokens=ndt)
    values.setdefault("max_running_requests", 48)
    graphs = settings.cuda_graph_max_bs if settings.cuda_graph_max_bs and settings.cuda_graph_max_bs.derived else None
    values.update(_graphs(p, notes, graphs), **_memory(p, notes, settings))
    v2 = rules(p.release).adaptive_v2
    values.update(_family_v2(p, topk, notes) if v2 else _family_v1(p, topk, notes))
    values.update(_patch_values(p, patch_flags))
    if v2:
        if values.get("speculative_adaptive", True):
            values["disable_batch_threshold"] = None
        else:  # static: a patch's own threshold stays (its flag), else none: upstream has no switch
            values.setdefault("disable_batch_threshold", None)
        _request_cap(values, notes)
    try:
        config = SpecConfig(**values)
    except InvalidConfig as e:
        refusal = UsageError(f"{_field_flag(str(e), p)}: the model refuses this launch: {e}")
        refusal.model_limit = True  # type: ignore[attr-defined]  # the model's own bound, not a rule of sglang's
        raise refusal from None
    gap = settings.page_size if settings.page_size is not None and not page_modelled(settings.page_size.value, p.release) \
        else None
    return Derived(config, notes, settings, gap)

