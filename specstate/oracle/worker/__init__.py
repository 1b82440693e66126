"""The worker oracle: upstream's own worker-side functions on CPU, fed the model's batches.

General layout: ``catalog.py`` (the releases, found by folder: each release's
``integration/sglang_X_Y_Z/worker_oracle.py`` declares its ``WORKER``, its buffers class; its
release and model family are its folder's), ``batches.py`` (the
model's side: the target forwards that asked a graph runner, as plain data, and what the model
says of each), ``_upstream.py`` (upstream's side, in the oracle's own process: ``ForwardBatch.init_new``,
``CudaGraphRunner.can_run`` / ``replay_prepare`` on a stub model runner), ``child.py`` (that
process), ``signature.py`` (an exception as compared), ``compare.py`` (the comparison and the
process), ``differential.py`` (model runs against the process, per variant), ``fuzz.py``
(Hypothesis). docs/oracle.md, "The worker oracle".
"""
