"""sglang 0.5.9's parts above the model (``specstate.model.sglang_0_5_9``): its CPU oracle over
0.5.12's (``oracle``) and its worker oracle (``worker_oracle``). It has no adapter of its own."""
