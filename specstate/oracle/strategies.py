"""Hypothesis workloads for differential runs: a config and an action list.

Drawn to reach what the scheduler half does under load: tight KV pools (evictions) filled by
requests sized to outgrow them together (``_pressure``: retraction, the out-of-memory abort),
small chunk sizes with long prompts aborted mid-prefill (chunked prefill, aborts of a chunked
request), arrivals sharing a prompt prefix with an earlier one (prefix hits), aborts at any
moment, and a tail of steps that lets requests finish (their KV goes to the tree). Shrinks
towards one step, topk 1, a roomy pool, fewer and shorter requests, accept 1, no EOS.
"""

from __future__ import annotations

from hypothesis import strategies as st

from specstate.model import Abort, Action, Arrive, SpecConfig, Step

__all__ = ["oracle_configs", "oracle_configs_v2", "oracle_configs_v2_static", "oracle_configs_paged",
           "oracle_configs_v2_paged", "configs_for",
           "oracle_workloads", "ORACLE_FIXED"]

_CHUNKS = (8192, 64, 16, 7)

#: the model-read server flags (``specstate/server_args/_tables.py::TABLES``) the oracle's configs
#: hold fixed, each with why (``tests/test_oracle_flags.py`` fails on a model-read flag that is
#: neither drawn below nor named here): ``ServerArgs`` field -> reason; ``v1:`` / ``v2:`` prefix on a
#: reason: only for that family's configs (the other family draws it)
ORACLE_FIXED: dict[str, str] = {
    "speculative_algorithm": "EAGLE: the only algorithm the model holds (the families model EAGLEWorker / EAGLEWorkerV2)",
    "page_size": "1 in this stream: paged configs are a stream of their own (``--page-size``: "
                 "``oracle_configs_paged``, ``oracle_configs_v2_paged``)",
    "enable_mixed_chunk": "EAGLE turns it off in the releases whose ``ServerArgs`` do, and the families of those that "
                          "do not refuse it (``_derive.py::_checks``): no mixed batch reaches either side",
    "disable_overlap_schedule": "set by the family: a v1 release's oracle runs without overlap, an overlap release's "
                                "(``catalog.is_overlap``: the v2 worker) with it; a v1 family under overlap or v2 "
                                "without is not a launch the model maps to a family",
    "speculative_adaptive": "v2: always on (the family models --speculative-adaptive); v1: the family has no adaptive "
                            "speculation (``_derive.py::_family_v1``)",
    "speculative_adaptive_config": "v1: no adaptive speculation in the v1 family",
    "speculative_eagle_topk": "v2: 1 (``prepare_v2``: the v2 family is topk 1, ``adaptive_unsupported_reason``)",
    "cuda_graph_max_bs": "the forward half: the oracle captures no CUDA graph (its worker is fake; the overlap "
                         "releases' oracles: ``disable_cuda_graph``); the worker oracle (``specstate worker-oracle``) "
                         "judges the graph path",
    "cuda_graph_bs": "the forward half, as cuda_graph_max_bs",
    "cuda_graph_max_bs_decode": "the forward half, as cuda_graph_max_bs",
    "cuda_graph_bs_decode": "the forward half, as cuda_graph_max_bs",
}


@st.composite
def _scheduling(draw: st.DrawFn) -> dict[str, object]:
    """The scheduler flags both families read, drawn half the time away from sglang's defaults:
    ``--schedule-conservativeness`` (``new_token_ratio``'s start, floor and decay; 0 and >= 1/0.7
    clamp), ``--max-prefill-tokens`` (``PrefillAdder.rem_input_tokens``: down to one prompt's
    worth), ``--disable-radix-cache`` (``ChunkCache``: no prefix hits, no eviction) and
    ``--context-length`` (``max_req_len``: the output cap of a long prompt)."""
    return dict(
        schedule_conservativeness=draw(st.one_of(st.just(1.0), st.sampled_from((0.0, 0.3, 0.5, 1.3, 2.0)))),
        max_prefill_tokens=draw(st.one_of(st.just(16384), st.integers(8, 96))),
        disable_radix_cache=draw(st.sampled_from((False, False, False, True))),
        context_len=draw(st.one_of(st.just(4096), st.integers(48, 256))))


@st.composite
def oracle_configs(draw: st.DrawFn, *, max_steps: int = 3, max_topk: int = 3, max_running: int = 6) -> SpecConfig:
    """Configs the model and the oracle both run (page size 1, upstream v1: no threshold)."""
    steps = draw(st.integers(1, max_steps))
    # (max_running_requests shrinks towards 1; retraction needs 2 rows, so small values are kept rare)
    topk = draw(st.integers(1, max_topk))
    ndt = steps + 1 if topk == 1 else draw(st.integers(2, min(topk + (steps - 1) * topk * topk + 1, 2 * steps + 4)))
    reserve = max(steps * topk, ndt)
    # tight pools: a decode of b rows needs b * reserve free slots (check_decode_mem), so a pool of a
    # few reserves retracts, and one of two aborts the last request (out of memory)
    pool = draw(st.one_of(st.just(4096), st.integers(reserve * 2 + 8, reserve * 12 + 40)))
    return SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=topk, speculative_num_draft_tokens=ndt,
                      disable_batch_threshold=None,
                      max_running_requests=draw(st.one_of(st.integers(2, max_running), st.just(1))),
                      target_kv_pool_size=pool, draft_kv_pool_size=pool,
                      chunked_prefill_size=draw(st.sampled_from(_CHUNKS)), target_hidden_size=256,
                      draft_hidden_size=256, **draw(_scheduling()))


@st.composite
def oracle_configs_v2(draw: st.DrawFn, *, max_steps: int = 3, max_running: int = 6) -> SpecConfig:
    """Configs of the v2 family (sglang 0.5.17): topk 1, ``steps + 1`` draft tokens, the overlap
    scheduler, an adaptive config whose first slot is the server's step count (upstream's start
    requires it among the candidates) and, often, a second slot from a batch size on with fewer
    steps (0: the trivial verify), so decodes cross the switch; no explicit capture list (the
    oracle captures no graphs, so upstream routes without padding, as the model does then)."""
    steps = draw(st.integers(1, max_steps))
    running = draw(st.one_of(st.integers(2, max_running), st.just(1)))
    slots = {"1": {"candidate_steps": [steps]}}
    if draw(st.booleans()):
        slots[str(draw(st.integers(2, max_running + 1)))] = {"candidate_steps": [draw(st.integers(0, steps - 1))]}
    reserve = 2 * (steps + 1)  # get_alloc_reserve_per_decode: twice max(steps * topk, draft tokens)
    pool = draw(st.one_of(st.just(4096), st.integers(reserve * 2 + 8, reserve * 12 + 40)))
    import json

    return SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
                      disable_batch_threshold=None, max_running_requests=running, target_kv_pool_size=pool,
                      draft_kv_pool_size=pool, chunked_prefill_size=draw(st.sampled_from(_CHUNKS)),
                      target_hidden_size=256, draft_hidden_size=256, cuda_graph_max_bs=8,
                      disable_overlap_schedule=False, speculative_adaptive_config=json.dumps(slots, sort_keys=True),
                      **draw(_scheduling()))


@st.composite
def oracle_configs_paged(draw: st.DrawFn, page_sizes: tuple[int, ...], *, max_steps: int = 3,
                         max_running: int = 6) -> SpecConfig:
    """Configs at a page size drawn from ``page_sizes`` (``--page-size``; v1, topk 1: the CPU
    oracle runs the paged verify of a chain, ``_paged.py``). Pools are whole pages (``model_runner``
    aligns ``max_total_num_tokens``): roomy, or tight enough that a few requests of up to 120
    prompt tokens outgrow them (a decode reserves a page per row, ``new_tokens_required_next_decode``),
    so paged eviction, retraction and the out-of-memory abort are reached. Chunk sizes are whole
    pages (``ServerArgs.check_server_args`` asserts it at launch)."""
    page = draw(st.sampled_from(page_sizes))
    steps = draw(st.integers(1, max_steps))
    roomy = 4096 // page * page
    lo = max(2, 48 // page)  # tight: 48-192 tokens, where _pressure's requests outgrow the pool
    pool = draw(st.one_of(st.just(roomy), st.integers(lo, max(lo + 2, 192 // page)).map(lambda n: n * page)))
    return SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
                      disable_batch_threshold=None,
                      max_running_requests=draw(st.one_of(st.integers(2, max_running), st.just(1))),
                      target_kv_pool_size=pool, draft_kv_pool_size=pool, page_size=page,
                      chunked_prefill_size=draw(st.sampled_from([c for c in _CHUNKS if c % page == 0])),
                      target_hidden_size=256,
                      draft_hidden_size=256)


@st.composite
def oracle_configs_v2_static(draw: st.DrawFn, *, max_steps: int = 3, max_running: int = 6) -> SpecConfig:
    """Static launches of the v2 family (no ``--speculative-adaptive``: ``EAGLEWorkerV2`` without an
    adaptive controller, the launch's step count on every decode): topk 1, ``steps + 1`` draft
    tokens, the overlap scheduler; the same pools, chunks and running caps as the adaptive ones."""
    steps = draw(st.integers(1, max_steps))
    running = draw(st.one_of(st.integers(2, max_running), st.just(1)))
    reserve = 2 * (steps + 1)  # get_alloc_reserve_per_decode: twice max(steps * topk, draft tokens)
    pool = draw(st.one_of(st.just(4096), st.integers(reserve * 2 + 8, reserve * 12 + 40)))
    return SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
                      disable_batch_threshold=None, max_running_requests=running, target_kv_pool_size=pool,
                      draft_kv_pool_size=pool, chunked_prefill_size=draw(st.sampled_from(_CHUNKS)),
                      target_hidden_size=256, draft_hidden_size=256, cuda_graph_max_bs=8,
                      disable_overlap_schedule=False, speculative_adaptive=False)


@st.composite
def oracle_configs_v2_paged(draw: st.DrawFn, page_sizes: tuple[int, ...], *, static: bool = False) -> SpecConfig:
    """A v2 config (adaptive, or ``static``) at a page size drawn from ``page_sizes``: pools of whole
    pages, roomy or tight enough that the page-aligned decode over-allocation
    (``eagle_prepare_for_decode``: ``ceil_align(committed + 2 * (steps + 1), P)`` per row) of a few
    requests outgrows them (paged eviction, retraction, the out-of-memory abort), tight two times in
    three and a running cap of 1 drawn less often (a retraction needs two rows: 3 in its place half
    the time); chunk sizes of whole pages (``ServerArgs.check_server_args``)."""
    base = draw(oracle_configs_v2_static() if static else oracle_configs_v2())
    page = draw(st.sampled_from(page_sizes))
    lo = max(3, 48 // page)  # tight: 48-192 tokens (at least 3 pages)
    tight = st.integers(lo, max(lo + 3, 192 // page)).map(lambda n: n * page)
    pool = draw(st.one_of(st.just(4096 // page * page), tight, tight))  # tight two times in three
    running = base.max_running_requests if base.max_running_requests > 1 else draw(st.sampled_from((1, 3)))
    return base.with_(page_size=page, target_kv_pool_size=pool, draft_kv_pool_size=pool, max_running_requests=running,
                      chunked_prefill_size=draw(st.sampled_from([c for c in _CHUNKS if c % page == 0])))


def configs_for(release: str, page_sizes: tuple[int, ...] = (1,), *,
                static: bool = False) -> "st.SearchStrategy[SpecConfig]":
    """The config strategy of ``release``'s model family (an overlap release, ``catalog.is_overlap``: v2);
    ``page_sizes`` other than ``(1,)``: paged configs (``oracle_configs_paged``, ``oracle_configs_v2_paged``);
    ``static``: its launches without ``--speculative-adaptive``, an overlap release only."""
    from specstate.errors import UsageError
    from specstate.oracle.catalog import is_overlap

    if static and not is_overlap(release):
        raise UsageError(f"--static: expected an overlap release (the v2 worker) but got {release}: its oracle runs "
                         "spec v1, where speculation is always static")
    if page_sizes != (1,):
        return oracle_configs_v2_paged(page_sizes, static=static) if is_overlap(release) \
            else oracle_configs_paged(page_sizes)
    if static:
        return oracle_configs_v2_static()
    return oracle_configs_v2() if is_overlap(release) else oracle_configs()


#: ``validate_input_length`` aborts a prompt of ``max_req_len - 5`` tokens or more; upstream then
#: runs it as a one-token prefill, and so does the model (``scheduler.py::validate_input_length``,
#: checked against the oracle by ``tests/test_oracle.py``). Fuzzed prompts stay below that bound:
#: any room under 7 turns about a third of the workloads' long prompts into such aborts and cut
#: the aborts of chunk-prefilled requests reached in the ci stream from 8 to 1
_ROOM = 7


def _room(config: SpecConfig) -> int:
    """The longest prompt drawn for ``config``: ``_ROOM`` below both the pool and the context length
    (``max_req_len`` is ``min(context_len, pool) - 1``; a prompt of ``context_len`` tokens or more is
    refused before the scheduler, which the oracle does not compare)."""
    return min(config.kv_pool_size, config.context_len) - _ROOM


@st.composite
def _arrive(draw: st.DrawFn, prompts: list[int], limit: int) -> Arrive:
    plen = min(draw(st.one_of(st.integers(1, 24), st.integers(25, 120))), limit)
    new = draw(st.one_of(st.integers(1, 16), st.integers(17, 64)))
    if len(prompts) > 0 and draw(st.booleans()):  # (not ``prompts and``: the checker types the draw as a list)
        of = draw(st.integers(0, len(prompts) - 1))
        shared = draw(st.integers(1, min(plen, prompts[of])))
        return Arrive(plen, new, of, shared)
    return Arrive(plen, new)


@st.composite
def _pressure(draw: st.DrawFn, config: SpecConfig, prompts: list[int]) -> list[Action]:
    """Requests that admission lets in one beside the other but that together outgrow the pool
    (retraction; the out-of-memory abort when one is left). ``PrefillAdder`` admits a request
    when its whole ``extend + max_new + 1`` fits beside the running requests, which count only
    ``new_token_ratio`` (0.7 at first) of their remaining outputs: arriving one step apart, 2-3
    requests each holding 110-120% of ``pool / rows`` all get in, and decodes accepting every
    draft then run them into a full pool while none has finished (a row whose queued result
    finishes it is left out of the decode on 0.5.23, and the decode skipped instead of a
    retraction). A share that makes no sensible output length (a roomy or a tiny pool) gets
    20-64 output tokens. (The fuzzer's earlier pressure, short prompts with 20-64 outputs
    arriving at once, admitted each whole: 0.5.23's 200-workload ci stream reached no
    retraction, 0.5.12's and 0.5.17's two each, both overrun decodes of finished requests.)
    Paged, the shares are of the pool less a page per row (``PrefillAdder``'s page overhead)."""
    rows = draw(st.integers(2, max(2, min(3, config.max_running_requests))))
    pool = config.kv_pool_size
    if config.page_size > 1:  # paged: admission counts a page per request, a decode reserves a page per row
        pool -= rows * config.page_size
    # under the overlap worker a row's decode over-allocation is taken ahead in whole pages, so rows
    # outgrow the pool only past a page boundary: shares a little larger (125-140%)
    lo, hi = (125, 140) if config.page_size > 1 and not config.disable_overlap_schedule else (110, 120)
    share = pool * draw(st.integers(lo, hi)) // (100 * rows)
    full = Step(accept=(config.max_accept_len,) * config.max_running_requests)
    out: list[Action] = []
    longest = 0
    for _ in range(rows):
        prompts.append(min(draw(st.integers(1, 8)), _room(config)))
        new = share - prompts[-1] - 1
        new = new if 4 <= new <= 64 else draw(st.integers(20, 64))
        longest = max(longest, new)
        out += [Arrive(prompts[-1], new), full]
    out.extend(full for _ in range(draw(st.integers(longest // 2, longest + 10))))  # enough to finish
    return out


@st.composite
def oracle_workloads(draw: st.DrawFn, config: SpecConfig, *, max_size: int = 24, max_tail: int = 20) -> list[Action]:
    """Actions for ``config``: arrivals (some sharing a prefix), aborts of any arrived
    request, steps with accept lengths and EOS, then up to ``max_tail`` plain steps."""
    out: list[Action] = []
    prompts: list[int] = []
    for _ in range(draw(st.integers(1, max_size))):
        kind = draw(st.sampled_from(("step", "arrive", "step", "abort", "burst", "pressure", "drain", "cut")))
        if kind == "pressure":
            out.extend(draw(_pressure(config, prompts)))
        elif kind == "cut":  # a long prompt aborted a few steps after it arrives: mid chunked prefill
            prompts.append(min(draw(st.integers(25, 120)), _room(config)))
            out.append(Arrive(prompts[-1], draw(st.integers(1, 64))))
            out.extend(Step() for _ in range(draw(st.integers(0, 3))))
            out.append(Abort(len(prompts) - 1))
        elif kind == "drain":  # steps until the batch may empty: idle iterations, then what comes next
            out.extend(Step() for _ in range(draw(st.integers(5, 25))))
        elif kind in ("arrive", "burst") or not prompts:
            for _ in range(draw(st.integers(2, config.max_running_requests + 2)) if kind == "burst" else 1):
                a = draw(_arrive(prompts, _room(config)))
                prompts.append(a.prompt_len)
                out.append(a)
        elif kind == "abort":
            last = len(prompts) - 1  # the latest arrival is the likeliest to be in a chunked prefill
            out.append(Abort(draw(st.one_of(st.just(last), st.integers(0, last)))))
        else:
            accept = tuple(draw(st.lists(st.integers(1, config.max_accept_len), max_size=config.max_running_requests)))
            eos = tuple(sorted(draw(st.sets(st.integers(0, len(prompts) - 1), max_size=2))))
            out.append(Step(accept=accept, eos=eos))
    out.extend(Step() for _ in range(draw(st.integers(0, max_tail))))
    return out

