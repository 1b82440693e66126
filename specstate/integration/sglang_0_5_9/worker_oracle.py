"""The worker oracle for sglang 0.5.9: ``CudaGraphRunner``'s buffers are ``GraphInputBuffers``
(``model_executor/input_buffers.py``), filled by one ``copy_`` per field in order
(``GraphInputBuffers.populate_from_forward_batch``: ``input_ids`` first), so a 2-row
``input_ids`` fails as ``160 vs 2`` before ``out_cache_loc`` is read.

The batches: 0.5.9's own family (``specstate/model/sglang_0_5_9``: the v1 ``EAGLEWorker`` and
scheduler of 0.5.12, with 0.5.9's sequential graph copies).
"""

from __future__ import annotations

from specstate.oracle.worker.catalog import WorkerRelease

__all__ = ["WORKER"]

#: the release and the family are this module's folder's
WORKER = WorkerRelease.of(__package__, buffers="sglang.srt.model_executor.input_buffers:GraphInputBuffers")
