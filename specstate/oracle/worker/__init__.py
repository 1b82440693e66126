"""The worker oracle: upstream's own worker-side functions on CPU, fed the model's batches.

General layout: ``catalog.py`` (the releases, one module each: ``sglang_0_5_9.py``,
``sglang_0_5_12.py``, each naming its model family and its buffers class), ``batches.py`` (the
model's side: the target forwards that asked a graph runner, as plain data, and what the model
says of each), ``_upstream.py`` (upstream's side, in the oracle's own process: ``ForwardBatch.init_new``,
``CudaGraphRunner.can_run`` / ``replay_prepare`` on a stub model runner), ``child.py`` (that
process), ``signature.py`` (an exception as compared), ``compare.py`` (the comparison and the
process), ``differential.py`` (model runs against the process, per variant), ``fuzz.py``
(Hypothesis). docs/oracle.md, "The worker oracle".
"""
