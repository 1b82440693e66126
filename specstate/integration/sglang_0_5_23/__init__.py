"""sglang 0.5.23's parts above the model (``specstate.model.sglang_0_5_23``): its CPU oracle, a delta
of 0.5.17's (``oracle``). Its recordings are 0.5.17's (no adapter of its own: ``catalog.adapter_modelling``)."""
