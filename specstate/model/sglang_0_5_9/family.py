"""The sglang 0.5.9 family: its base, its overrides, its release range, its variants.

Derived from the 0.5.12 family (``Family.base``), which is the shared core: the ``Ops`` table's
defaults with 0.5.9's sequential graph copy (``replay.py``), 0.5.9's admission budgets
(``admission.py``), its idle reset and its retraction's last resort (``scheduler.py``); all but the
copy read in 0.5.9's source or found by the CPU oracle for 0.5.9 (``specstate oracle --engine
0.5.9``, 0 mismatches on 200 workloads at each of page sizes 1, 16 and 64):

| operation | 0.5.9 | 0.5.10+ (the base) |
| --- | --- | --- |
| ``replay_prepare`` (target) | one ``copy_`` per source, ``input_ids`` first | one grouped ``_foreach_copy_``, every source's dtype read first |
| ``add_one_req``, ``schedule_prefill`` | no page of overhead per request in ``PrefillAdder``'s budgets | ``+ page_size`` per request |
| ``arrive`` | ``max_new_tokens`` clamped to ``max_req_len`` only | also to the pool, less a page |
| ``schedule_prefill`` | ``get_num_allocatable_reqs`` not capped by free ``req_to_token`` rows | capped |
| ``idle`` | ``new_token_ratio`` reset at every iteration without a batch | only when fully idle |
| ``retract_decode`` | ``ValueError`` when even the last request does not fit | that request aborted |

Paged KV (``--page-size`` > 1) is the base's otherwise: 0.5.9's paged allocator, radix cache page
alignment, paged verify and draft allocation and ``req_to_token`` row were read against 0.5.12's
(``ledger.py``, ``REVIEWED_PAGED``; docs/model-0.5.9.md).

Release range: 0.5.9 only (its own citations checked against 0.5.9's source). The base's
citations it keeps are compared from 0.5.12 to 0.5.9 (``specstate/citations.py``); those whose
0.5.9 source differs are listed in ``ledger.py`` as not reviewed: the family claims 0.5.9's graph
copy, its overrides and what the oracle compares (the scheduler half), and for the rest only that the seed's route (prefill, ``merge_batch``, the speculative
early return of ``prepare_for_decode``, ``forward_target_extend``, ``can_run``) leaves the batch as
0.5.12's does (every-rank.md §0-1: measured with upstream's own ``ScheduleBatch``, ``RadixCache``,
``PrefillAdder``, ``ForwardBatch.init_new``, ``CudaGraphRunner.can_run`` on both releases).

Variants: each v1 policy (``sglang_0_5_12/policies.py``) again over this family, named
``NAME@sglang-0.5.9`` (``--engine sglang-0.5.9 --variant NAME`` picks it: ``_engine_option.py``);
the default is ``fixed-threshold@sglang-0.5.9``. The known bugs are 0.5.12's only.
"""

from __future__ import annotations

from typing import Any, Callable

from specstate.model.family_registry import Family, register_family
from specstate.model.sglang_0_5_12 import policies as _policies  # noqa: F401  (registers the policies named below)
from specstate.model.sglang_0_5_12.family import prepare
from specstate.model.sglang_0_5_9.admission import add_one_req_0_5_9, arrive_0_5_9, schedule_prefill_0_5_9
from specstate.model.sglang_0_5_9.ledger import GONE, UNREVIEWED
from specstate.model.sglang_0_5_9.replay import replay_prepare_0_5_9
from specstate.model.sglang_0_5_9.scheduler import idle_0_5_9, retract_decode_0_5_9
from specstate.model.variant_registry import SEED_THRESHOLD_FLAG, Variant, get_variant, register

__all__ = ["FAMILY", "OVERRIDES", "VARIANTS", "NAME", "variant_name"]

NAME = "sglang-0.5.9"

FAMILY = register_family(Family(
    NAME, "sglang 0.5.9: the 0.5.12 family with 0.5.9's sequential CUDA-graph copies (the seed's release: its "
    "patch raises 160 vs 2 here)",
    f"fixed-threshold@{NAME}", prepare, lambda c: c.disable_batch_threshold, adaptive=False,
    release_range=("0.5.9",), base="sglang-0.5.12", patch_flags=(SEED_THRESHOLD_FLAG,),
    overridden_citations=GONE, unreviewed_citations=UNREVIEWED))

#: the 0.5.12 family's operations (the table's defaults) with 0.5.9's replacements
OVERRIDES: dict[str, Callable[..., Any]] = {"replay_prepare": replay_prepare_0_5_9, "add_one_req": add_one_req_0_5_9,
             "schedule_prefill": schedule_prefill_0_5_9, "arrive": arrive_0_5_9, "idle": idle_0_5_9,
             "retract_decode": retract_decode_0_5_9}

#: the v1 policies this family runs, each as ``NAME@sglang-0.5.9``
_POLICIES = ("always-spec", "naive-threshold", "naive-threshold-eager", "fixed-threshold", "steps0-verify",
             "seed-patch", "seed-patch-alloc")


def variant_name(base: str) -> str:
    """``seed-patch`` -> ``seed-patch@sglang-0.5.9``."""
    return f"{base}@{NAME}"


def _over(base: str) -> Variant:
    b = get_variant(base)
    return register(Variant(
        variant_name(base), f"{b.summary} (sglang 0.5.9's sequential graph copies and admission budgets)", overrides=OVERRIDES, base=base,
        expected_invariant=b.expected_invariant, reference=b.reference, correct=b.correct, family=NAME))


VARIANTS = tuple(_over(name) for name in _POLICIES)
