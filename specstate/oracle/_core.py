"""What every release's oracle does the same way (each release's ``oracle.py``, in its folder of
``specstate/integration/``): the one-process gloo group, the no-op watchdog, upstream's
``Scheduler`` built by its own ``__init__``, and the torch port of a Triton kernel both releases
call, and the declaration each release module makes (``OracleRelease``). Each piece names the upstream symbol it stands in for; nothing here names a release.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

from specstate.oracle._tmp import socket_base

__all__ = ["OracleRelease", "release_family", "HIDDEN", "server_args_kwargs", "init_distributed", "no_watchdog", "construct_scheduler", "assign_req_to_token_pool",
           "noting_eviction", "raise_if_signalled", "STRICT_CHECKS", "enable_strict_checks", "enabled_strict_checks",
           "UPSTREAM_CHECK_FILES", "upstream_check_of"]

HIDDEN = 4  #: hidden size of the fake tensors (nothing reads their values)


@dataclass(frozen=True)
class OracleRelease:
    """What one release module declares (``ORACLE``), read by ``catalog.py``."""

    release: str  #: the sglang release whose wheel runs (``wheels.py``)
    variant: str  #: the model variant this release's oracle is compared with
    overlap: bool  #: its loop is ``event_loop_overlap`` (the v2 worker): the model's v2 configs

    @classmethod
    def of(cls, package: str | None, *, variant: str, overlap: bool) -> "OracleRelease":
        """The declaration of the release whose folder is ``package`` (the module's ``__package__``:
        ``specstate.integration.sglang_X_Y_Z`` or ``specstate.model.sglang_X_Y_Z`` is ``X.Y.Z``, as
        ``model/releases.py`` names folders); ``{family}`` in ``variant`` stands for its family's name."""
        family = release_family(package)
        return cls(family.partition("-")[2], variant.format(family=family), overlap)


def release_family(package: str | None) -> str:
    """The family of the release folder ``package`` (a dotted path: its last part is the folder)."""
    from specstate.model.releases import family_of_folder

    assert package, "a release's oracle module lives in its release's folder"
    return family_of_folder(package.rpartition(".")[2])


def server_args_kwargs(cfg: dict[str, Any], models: str, *, overlap: bool) -> dict[str, Any]:
    """The ``ServerArgs`` both releases' oracles start from: the workload's config (``cfg``, a
    ``SpecConfig`` as JSON) on CPU, EAGLE with dummy weights from ``models``, torch attention,
    the workload's page size (``--page-size``; 1 where a config has none); ``overlap``: the overlap
    scheduler (the v2 worker)."""
    return dict(
        model_path=f"{models}/target", speculative_algorithm="EAGLE", speculative_draft_model_path=f"{models}/draft",
        speculative_num_steps=cfg["speculative_num_steps"], speculative_eagle_topk=cfg["speculative_eagle_topk"],
        speculative_num_draft_tokens=cfg["speculative_num_draft_tokens"], disable_overlap_schedule=not overlap,
        attention_backend="torch_native", sampling_backend="pytorch", load_format="dummy", skip_tokenizer_init=True,
        random_seed=0, device="cpu", max_total_tokens=cfg["target_kv_pool_size"],
        chunked_prefill_size=cfg["chunked_prefill_size"], max_prefill_tokens=cfg["max_prefill_tokens"],
        max_running_requests=cfg["max_running_requests"], schedule_conservativeness=cfg["schedule_conservativeness"],
        disable_radix_cache=cfg["disable_radix_cache"], context_length=cfg["context_len"],
        page_size=cfg.get("page_size", 1))


#: upstream's own invariant checks, each switched on in the oracle's process where the release's
#: ``environ.py::Envs`` declares it (``enable_strict_checks``): name -> (value, what it turns on)
STRICT_CHECKS: dict[str, tuple[str, str]] = {
    # 0.5.12 on: ``Scheduler.event_loop_*`` runs ``self_check_during_busy`` after every iteration
    # (0.5.17 on: ``SchedulerInvariantChecker.self_check_during_busy``): the pool accounting
    # ``available + evictable + protected + uncached == total`` while requests run, an ``assert``
    "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY": ("1", "the pool accounting after every busy iteration"),
    # upstream's default (true): a leak found when idle raises (``raise_error_or_warn``) instead of warning
    "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE": ("1", "a leak when idle raises instead of warning"),
    # 0.5.17 on (sglang PR #27731): ``SchedulerInvariantChecker._check_kv_page_invariants`` after the
    # busy check: ``0 <= kv_committed_len <= kv_allocated_len <= row width`` per request, no page of a
    # request's ``req_to_token`` row in the free pool (use after free), no page twice in the free pool
    # (double free): what the accounting cannot see while it stays balanced
    "SGLANG_CHECK_KV_PAGE_INVARIANTS": ("1", "the page-level checks after every busy iteration"),
    # 0.5.17 on: ``utils/invariants.py::resolve_level`` STRICT: every ``expect(Invariant, ...)`` whose
    # bucket is GUARD or FATAL crashes (``torch._assert_async``, raising at once on CPU) instead of
    # counting; CI's default upstream
    "SGLANG_INVARIANT_CHECK": ("2", "InvariantCheckLevel.STRICT for every declared value invariant"),
}
#: the files of upstream's invariant checks: an exception raised in one of them is upstream's own
#: check failing (``upstream_check_of``), not the harness breaking
UPSTREAM_CHECK_FILES = ("managers/scheduler_components/invariant_checker.py",  # 0.5.17 on
                        "managers/scheduler_runtime_checker_mixin.py",  # 0.5.12
                        "utils/invariants.py")  # 0.5.17 on: ``expect``

_ENABLED: list[str] = []


def enable_strict_checks() -> tuple[str, ...]:
    """Switch on every check of ``STRICT_CHECKS`` that the release running in this process
    declares (``sglang.srt.environ.Envs``; ``envs.X.get()`` reads ``os.environ`` at each call);
    the names switched on, kept for ``enabled_strict_checks``. A release without one (0.5.12 has
    neither the page checks nor ``SGLANG_INVARIANT_CHECK``) runs without it."""
    from sglang.srt.environ import Envs

    _ENABLED.clear()
    for name, (value, _why) in STRICT_CHECKS.items():
        if name in vars(Envs):
            os.environ[name] = value
            _ENABLED.append(name)
    return tuple(_ENABLED)


def enabled_strict_checks() -> tuple[str, ...]:
    """The checks ``enable_strict_checks`` switched on in this process (the child reports them)."""
    return tuple(_ENABLED)


def upstream_check_of(tb: Any) -> str | None:
    """``file::function`` of the innermost frame of traceback ``tb`` that lies in one of upstream's
    invariant-check files (``UPSTREAM_CHECK_FILES``); ``None``: the exception did not come from
    one of upstream's own checks."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        path = code.co_filename.replace(os.sep, "/")
        for f in UPSTREAM_CHECK_FILES:
            if path.endswith("/sglang/srt/" + f):
                found = f"{f}::{getattr(code, 'co_qualname', code.co_name)}"
        tb = tb.tb_next
    return found



_files = itertools.count()


def private_dir() -> str:
    """The oracle process's own folder for the files upstream wants (the gloo store, the adaptive
    config), made once (mode 0700) and removed when the process exits: nothing is left in
    ``$TMPDIR``, and no other user can plant or race a file there (``tempfile.mktemp`` could)."""
    global _PRIVATE
    if _PRIVATE is None or not os.path.isdir(_PRIVATE):
        _PRIVATE = tempfile.mkdtemp(prefix="specstate-oracle-", dir=socket_base())
        atexit.register(shutil.rmtree, _PRIVATE, True)
    return _PRIVATE


_PRIVATE: str | None = None


def private_file(name: str) -> str:
    """A fresh path in ``private_dir`` (nothing there yet)."""
    return os.path.join(private_dir(), f"{next(_files)}-{name}")


def init_distributed() -> None:
    """A one-process gloo group (upstream's ``init_distributed_environment``): the scheduler's
    TP / PP / world groups and ``set_finish_with_abort`` need one."""
    from sglang.srt.distributed import parallel_state as ps

    ps.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                    distributed_init_method="file://" + private_file("gloo-store"))
    ps.initialize_model_parallel(tensor_model_parallel_size=1)


def no_watchdog() -> None:
    """The hang watchdog is upstream's no-op one (``watchdog.py``, what ``watchdog_timeout=None``
    gives): a real one is a thread per ``Scheduler`` that never stops and keeps the scheduler
    alive (one leaked per workload); it only ever kills a loop stuck for minutes."""
    from sglang.srt.managers import scheduler
    from sglang.srt.utils.watchdog import Watchdog

    scheduler.create_scheduler_watchdog = lambda *args, **kwargs: Watchdog.create("oracle", None)


def construct_scheduler(sa: Any) -> Any:
    """Upstream's ``Scheduler`` on ``ServerArgs`` ``sa``, constructed by its own ``__init__``
    (rank 0 of one of everything), after ``set_global_server_args_for_scheduler``."""
    from sglang.srt.server_args import PortArgs, set_global_server_args_for_scheduler

    set_global_server_args_for_scheduler(sa)
    from sglang.srt.managers.scheduler import Scheduler

    return Scheduler(sa, PortArgs.init_new(sa), gpu_id=0, tp_rank=0, moe_ep_rank=0, pp_rank=0, attn_cp_rank=0,
                     moe_dp_rank=0, dp_rank=None)


def assign_req_to_token_pool(req_pool_indices: Any, req_to_token: Any, start_offset: Any, end_offset: Any,
                             out_cache_loc: Any, batch_size: int) -> None:
    """``spec_utils.py::assign_req_to_token_pool`` (Triton) in torch: row ``i`` of
    ``req_to_token`` gets ``out_cache_loc``'s next ``end - start`` entries at ``start..end``.

    Addressed as the kernel addresses it, flat (``token_pool = req_to_token + row * pool_len``,
    stores at ``token_pool + start .. token_pool + end``, masked by ``end`` only): positions past
    the row's width land in the next row, as on the GPU (upstream's own comment on the row
    headroom, ``mem_cache/allocation_sizing.py::get_req_to_token_extra_context_len``: "the row
    write silently lands in the neighbor row"). A row-sliced write would instead drop one slot
    past the end without a word (torch broadcasts a 1-element source to the empty slice) and
    raise on two. Past the end of the whole tensor (the last row's overflow) the kernel's store is
    out of bounds, into memory nothing of the scheduler reads: that part is dropped here, and
    upstream's own page check (``committed <= allocated <= row_width``) still sees the row outgrown."""
    width = int(req_to_token.shape[1])
    flat = req_to_token.view(-1)
    pos = 0
    for i in range(batch_size):
        s, e = int(start_offset[i]), int(end_offset[i])
        base = int(req_pool_indices[i]) * width
        stop = min(base + e, flat.numel())
        if stop > base + s:
            flat[base + s:stop] = out_cache_loc[pos:pos + stop - base - s]
        pos += e - s


def noting_eviction(evict: Any, current: Any) -> Any:
    """A radix tree's eviction method that notes ``eviction`` in the running driver's ``reached``
    (``current.driver``) when it shrank the evictable size."""
    def evict_and_note(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = self.evictable_size()
        out = evict(self, *args, **kwargs)
        if self.evictable_size() < before:
            current.driver.reached.add("eviction")
        return out

    return evict_and_note


def raise_if_signalled(code: int | None) -> None:
    """An oracle process that ended by SIGINT / SIGTERM (its quick stop: exit ``128 + signum``;
    or killed by it) was interrupted with its parent, whose own signal may land a moment after
    it reads the process's end: the parent stops as interrupted (exit 130 / 143), never
    reports the end as an error of the oracle."""
    import signal

    from specstate.errors import Interrupted

    for signum in (signal.SIGINT, signal.SIGTERM):
        if code in (128 + signum, -signum):
            raise KeyboardInterrupt if signum == signal.SIGINT else Interrupted(signum)
