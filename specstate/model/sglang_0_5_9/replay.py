"""sglang 0.5.9's target graph copy: one ``copy_`` per source, in order.

``model_executor/input_buffers.py::GraphInputBuffers.populate_from_forward_batch`` (reached from
``cuda_graph_runner.py::CudaGraphRunner.replay_prepare`` with ``raw_num_token = raw_bs *
num_tokens_per_bs``)::

    self.input_ids[:raw_num_token].copy_(forward_batch.input_ids)
    self.req_pool_indices[:raw_bs].copy_(forward_batch.req_pool_indices)
    self.seq_lens[:raw_bs].copy_(forward_batch.seq_lens)
    self.out_cache_loc[:raw_num_token].copy_(forward_batch.out_cache_loc)
    self.positions[:raw_num_token].copy_(forward_batch.positions)

The first source of the wrong length raises PyTorch's own error; a ``None`` source (an
``out_cache_loc`` that ``merge_batch`` set to ``None``) is reached only if every copy before it
fit, and raises torch's ``TypeError`` there. 0.5.10+ (the shared core's copy, 0.5.12's) group the
copies by dtype first, and a ``None`` source raises ``AttributeError`` before any copy.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable

from specstate.model.replay import Copy, prepare_static_buffers
from specstate.model.runner import GraphRunner, guarded
from specstate.model.tensors import Shape, copy_into

if TYPE_CHECKING:
    from specstate.model.config import SpecConfig
    from specstate.model.graph_buffers import GraphBuffers
    from specstate.model.ops_table import Ops
    from specstate.model.records import GraphUse
    from specstate.model.runner import ForwardBatch

__all__ = ["WHERE", "sequential_target_copy", "replay_prepare_0_5_9"]

WHERE = "model_executor/input_buffers.py::GraphInputBuffers.populate_from_forward_batch"


def sequential_target_copy(runner: GraphRunner, copies: list[Copy], dst: Callable[[Copy], Shape]) -> None:
    """The copies one by one, in upstream's order (the first that fails raises)."""
    raw_bs = len(copies[1].owners)
    for c in copies:
        shapes = {"field": c.name, "buffer": [c.extent], "source": None if c.source is None else list(c.source),
                  "num_tokens_per_bs": runner.num_tokens_per_bs, "raw_bs": raw_bs}
        guarded(WHERE, shapes, functools.partial(copy_into, dst(c), c.source))


def replay_prepare_0_5_9(ops: "Ops", runner: GraphRunner, fb: "ForwardBatch", graphs: "GraphBuffers", iteration: int,
                         config: "SpecConfig") -> "GraphUse":
    """``CudaGraphRunner.replay_prepare`` of 0.5.9: the shared replay with the sequential copy."""
    return prepare_static_buffers(ops, runner, fb, graphs, iteration, config, reset_padding=True,
                                  copy_target=sequential_target_copy)
