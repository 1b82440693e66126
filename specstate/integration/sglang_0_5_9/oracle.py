"""The oracle for sglang 0.5.9: upstream's ``Scheduler`` and ``event_loop_normal`` (spec v1,
``EAGLEWorker``, overlap off) on CPU, with a fake model worker: 0.5.12's oracle
(``integration/sglang_0_5_12/oracle.py``: what is upstream's and what is the oracle's) over 0.5.9's
classes: its fake ``EAGLEWorker``, draft and verify inputs, builder and loop, given 0.5.9's field
names (``FIELDS``) and what 0.5.9's worker does differently (``_FakeEagle9``).

What differs from 0.5.12's harness, each 0.5.9's own API, none of it scheduler state:

- ``EagleDraftInput`` carries ``verified_id`` (0.5.12: ``bonus_tokens``), ``EagleVerifyInput``
  ``retrive_*`` (0.5.12: ``retrieve_*``);
- ``EAGLEWorker.forward_batch_generation`` calls ``forward_draft_extend_after_decode`` only while a
  accepted token is left (``batch.spec_info.verified_id.shape[0] > 0``: every unfinished row's
  accepted tokens, flat) and ignores what it returns: the fake leaves the next ``EagleDraftInput``
  of the unfinished rows (``accept_length_cpu``) on the batch, as the draft forward does (0.5.12's
  returns it);
- ``EAGLEWorker.verify`` reads ``enable_nan_detection`` (off); where every row finished,
  ``EagleVerifyInput.verify`` leaves ``EagleDraftInput.create_idle_input`` at the model's hidden
  size (0.5.12: none), which a later ``merge_batch`` concatenates with the fake's ``HIDDEN``-wide
  states: the fake puts its own empty draft input there (zero rows either way);
- the paged allocator's ``alloc_extend_kernel`` takes one more constexpr (the port ignores it),
  and ``alloc_extend`` compares the extend with Triton's ``TRITON_MAX_TENSOR_NUMEL`` (set on the
  stub: both branches are the same allocation, the port and ``alloc_extend_naive``).

Upstream's ``ScheduleBatch.retract_decode`` raises ``ValueError`` where even the last request does
not fit (0.5.12 aborts it: ``oom-abort``); reached as ``oom-crash``, and the 0.5.9 family predicts
it (``retract_decode_0_5_9``: the differential counts a predicted exception as agreement).

Page sizes 1, 16 and 64 run upstream's allocators and paged verify as 0.5.12's oracle does
(``_paged.py``); the model compared with is the 0.5.9 family (``always-spec@sglang-0.5.9``).
"""

from __future__ import annotations

from typing import Any

from specstate.integration.sglang_0_5_12 import oracle as v12
from specstate.oracle._core import OracleRelease, init_distributed, no_watchdog, noting_eviction
from specstate.oracle.driver import Driver

__all__ = ["build", "RELEASE", "ORACLE", "run", "FIELDS"]

#: the release is this module's folder's, compared with its family's ``always-spec``
ORACLE = OracleRelease.of(__package__, variant="always-spec@{family}", overlap=False)
RELEASE = ORACLE.release
#: ``triton/language/core.py::TRITON_MAX_TENSOR_NUMEL`` (Triton 3)
TRITON_MAX_TENSOR_NUMEL = 1048576
#: 0.5.9's names: ``eagle_info.py::EagleDraftInput.verified_id``, ``EagleVerifyInput.retrive_index``
#: (and ``retrive_next_token`` ...), ``EAGLEWorker.__init__``'s ``enable_nan_detection``
FIELDS = v12.SpecFields(bonus="verified_id", retrieve="retrive_", worker=(("enable_nan_detection", False),))


def _patch_workers() -> None:
    v12.patch_workers(_fake_eagle_class())
    # 0.5.9's ``PagedTokenToKVPoolAllocator.alloc_extend`` reads Triton's tensor limit to choose the
    # kernel or ``alloc_extend_naive``: the stub's attribute is a class, Triton's value an int
    import triton.language as tl

    tl.core.TRITON_MAX_TENSOR_NUMEL = TRITON_MAX_TENSOR_NUMEL


def _fake_eagle_class() -> type:
    base = v12.fake_eagle_class(FIELDS)

    class _FakeEagle9(base):  # type: ignore[misc, valid-type]
        """0.5.9's ``EAGLEWorker`` without models: 0.5.12's fake (``v12.fake_eagle_class``) on 0.5.9's
        fields, with what 0.5.9's worker does differently (the module doc)."""

        @property
        def draft_model_runner(self) -> Any:
            return self._model_runner

        def verify(self, batch: Any, spec_info: Any) -> Any:
            out = super().verify(batch, spec_info)
            if batch.spec_info.verified_id.shape[0] == 0:  # every row finished: upstream's idle draft
                batch.spec_info = v12._draft_input(0, self.topk, None, FIELDS)  # input, at the fake's hidden width
            return out

        def forward_draft_extend_after_decode(self, batch: Any) -> None:
            rows = len(batch.spec_info.accept_length_cpu)  # the unfinished rows (``verify``'s draft input)
            batch.spec_info = v12._draft_input(rows, self.topk, batch.spec_info.verified_id.new_zeros(rows), FIELDS)

    return _FakeEagle9


def _once() -> None:
    """Per process (``_hf.prepare_process``): the gloo group, the fake workers, the retraction
    record, no watchdog."""
    from specstate.oracle._hf import prepare_process

    prepare_process(v12._Current, [init_distributed, _patch_workers, _record_retractions, no_watchdog])


def build(cfg: dict[str, Any], models: str) -> Any:
    """Upstream's ``Scheduler``, constructed by its own ``__init__`` on 0.5.9's fake workers."""
    return v12.build(cfg, models, once=_once)


def run(cfg: dict[str, Any], driver: Driver, models: str) -> None:
    """The driver's workload through upstream's ``event_loop_normal`` (0.5.12's loop, this builder)."""
    v12.run(cfg, driver, models, builder=build)


def _record_retractions() -> None:
    from sglang.srt.managers.schedule_batch import ScheduleBatch

    orig = ScheduleBatch.retract_decode
    current = v12._Current

    def retract_decode(self: Any, server_args: Any) -> Any:
        try:
            out = orig(self, server_args)
        except ValueError:  # 0.5.9: "Out of memory even after retracting all other requests" (0.5.12 aborts)
            current.driver.reached.add("oom-crash")
            raise
        current.driver.retracted.extend(int(str(r.rid)[1:]) for r in out[0])
        if out[0]:
            current.driver.reached.add("retraction")
        return out

    ScheduleBatch.retract_decode = retract_decode
    from sglang.srt.mem_cache.radix_cache import RadixCache

    RadixCache.evict = noting_eviction(RadixCache.evict, current)
