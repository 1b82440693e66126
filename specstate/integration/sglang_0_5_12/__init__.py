"""The sglang 0.5.12 adapter (the v1 ``EAGLEWorker`` family): its declaration (``adapter``) and the
conformance of its recordings with ``specstate.model.sglang_0_5_12`` (``conformance``), its CPU
oracle (``oracle``) and its worker oracle (``worker_oracle``). Its recorder, patch and engine
arguments are still the core's files for now (``sglang_recorder.py``, ``sglang_patch.py``,
``sglang_driver.engine_kwargs``); the adapter names them."""
