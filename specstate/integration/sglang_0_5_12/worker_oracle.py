"""The worker oracle for sglang 0.5.12: ``CudaGraphRunner``'s buffers are ``DecodeInputBuffers``
(``model_executor/cuda_graph_runner.py``), filled by one batched copy
(``DecodeInputBuffers.populate_from_forward_batch`` -> ``_grouped_foreach_copy_``): an
``out_cache_loc`` of ``None`` fails on its ``.dtype`` before any copy runs. The batches are the
v1 family's (``sglang-0.5.12``)."""

from __future__ import annotations

from specstate.oracle.worker.catalog import WorkerRelease

__all__ = ["WORKER"]

#: the release and the family are this module's folder's
WORKER = WorkerRelease.of(__package__, buffers="sglang.srt.model_executor.cuda_graph_runner:DecodeInputBuffers")
