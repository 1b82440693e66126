"""Whether the model predicted what the engine did at start.

A GPU run launches the engine with keyword arguments (``sglang_driver.engine_kwargs``: the
``ServerArgs`` field names). The model reads them as sglang reads its flags
(``specstate.server_args``, as ``parse_launch`` does: ``ServerArgs.__post_init__``'s checks, a launch sglang
refuses is a ``UsageError`` there) and starts the family's modelled engine
(``Variant.configure`` runs ``Family.start``: the capture and shared-buffer sizing of
``model/sglang_0_5_17/start.py``, as ``specstate check``'s start part does). :func:`predict_start` is that verdict; :func:`compare_start` sets it
beside what the engine did (``verdicts.start_failure``): both started, both refused (and with the
same exception class, where the engine's is known, and the same sizes, where the model names the
buffer's asked and held rows and the engine's message is known), or a disagreement, which the driver counts as
a problem of the run: a model that is wrong about the start is wrong about everything after it.

Only families whose start is modelled are judged (the v2 families); for the others
``predict_start`` says "not modelled" and nothing is compared. An argument that is not one of the
release's flags (none of the driver's today) is left out and named.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["ENGINE_VARIANT", "predict_start", "compare_start"]



def _engine_variants() -> dict[str, str]:
    from specstate.integration.catalog import ADAPTERS

    return {a.family: a.engine_variant for a in ADAPTERS if a.engine_variant is not None}


#: the variant that models an engine run without a patch, per ``--engine`` (the release adapters' ``engine_variant``)
ENGINE_VARIANT = _engine_variants()


def predict_start(engine_kwargs: Mapping[str, Any], variant: Any) -> dict[str, Any]:  # noqa: ANN401  (a name or a Variant)
    """``{"status": "starts" | "refuses" | "not modelled" | "outside the model", "why", "upstream", "where",
    "left_out"}`` ("outside the model": a bound of the model's own, never reported as sglang's refusal)."""
    from specstate.errors import InvalidConfig, UsageError
    from specstate.model import as_variant
    from specstate.model.families import get_family
    from specstate.server_args import known_flags, parse_launch, release_of_family
    from specstate.server_args._launch import flag_name, tokens_from_mapping

    v = as_variant(variant)
    release = release_of_family(v.family_name)
    flags = known_flags(release, v.all_flags()) if release is not None else {}
    kept = {k: val for k, val in engine_kwargs.items() if flag_name(k) in flags}
    base: dict[str, Any] = {"variant": v.name, "left_out": sorted(set(engine_kwargs) - set(kept))}
    if getattr(get_family(v.family_name), "start", None) is None:
        return {**base, "status": "not modelled", "why": f"the engine start of {v.family_name} is not modelled"}
    try:
        launch = parse_launch(tokens_from_mapping(kept), v)
    except UsageError as e:  # sglang's ServerArgs refuses the launch before anything is built
        if getattr(e, "model_limit", False):  # the model's own bound: never shown as the engine's refusal
            return {**base, "status": "outside the model", "why": f"{e} (the model's own limit, not sglang's)"}
        return {**base, "status": "refuses", "why": f"server arguments: {e}", "upstream": "ValueError",
                "where": "server_args.py::ServerArgs.__post_init__"}
    try:
        v.configure(launch.config)
    except InvalidConfig as e:
        # the family's start refused (its InvalidConfig names upstream's exception and where it
        # raises: EngineStartRefused in the release's folder); another one is the variant's own
        if not hasattr(e, "upstream"):
            raise
        buffer = getattr(e, "buffer", None)
        sizes = {} if buffer is None else {"buffer": buffer, "asked": getattr(e, "asked", None),
                                           "held": getattr(e, "held", None)}
        return {**base, "status": "refuses", "why": str(e), "upstream": e.upstream, "where": getattr(e, "where", None),
                **sizes}
    return {**base, "status": "starts", "why": "every runtime state built, every capture fits"}


def compare_start(model: Mapping[str, Any], start_error: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"agrees": bool | None, "line": str}``: the model's start beside the engine's
    (``start_error``: ``verdicts.start_failure``'s result, ``None`` when it started)."""
    if model.get("status") == "not modelled":
        return {"agrees": None, "line": f"the model does not judge this start ({model.get('why')})"}
    if model.get("status") == "outside the model":
        engine = "it started" if start_error is None else f"it refused ({start_error.get('cls')})"
        return {"agrees": None, "line": f"not judged: the config is outside the model ({model.get('why')}); "
                                        f"the engine's own verdict: {engine}"}
    if start_error is not None and start_error.get("cls") is None:
        # no exception to compare: the engine was ended (the driver's --start-timeout, the
        # kernel's OOM killer) or hung before its start finished; it neither started nor refused
        verdict = "refuses" if model.get("status") == "refuses" else "starts"
        return {"agrees": None, "line": f"not judged: the engine did not finish starting ({start_error.get('msg')}); "
                                        f"the model {verdict} this config: {model.get('why')}"}
    engine_refused = start_error is not None
    model_refused = model.get("status") == "refuses"
    if engine_refused != model_refused:
        engine = (f"the engine refused it ({start_error.get('cls')})" if start_error is not None
                  else "the engine started")
        return {"agrees": False, "line": f"the model {'refuses' if model_refused else 'starts'} this config but "
                                         f"{engine}: {model.get('why')}"}
    if not engine_refused:
        return {"agrees": True, "line": "the model predicted it: it starts this config too"}
    cls = start_error.get("cls") if start_error is not None else None
    if cls and model.get("upstream") and cls != model["upstream"]:
        return {"agrees": False, "line": f"the model refuses this config too, but with {model['upstream']} "
                                         f"(the engine: {cls}): {model.get('why')}"}
    other = _other_sizes(model, start_error)
    if other:
        return {"agrees": False, "line": f"the model refuses this config with {cls or model.get('upstream')} too, but with "
                                         f"other sizes: {other}"}
    return {"agrees": True, "line": f"the model predicted it: {model.get('why')}"}


def _other_sizes(model: Mapping[str, Any], start_error: Mapping[str, Any] | None) -> str:
    """Where the model names the sizes of a failed size check (``asked`` / ``held``) and the engine's
    message does not carry both, how they differ ("" when they agree or either is not known): a start is
    as modelled only when class and sizes agree."""
    import re

    msg = (start_error or {}).get("msg")
    if not msg or model.get("asked") is None or model.get("held") is None:
        return ""
    numbers = set(re.findall(r"\d+", str(msg)))
    if str(model["asked"]) in numbers and str(model["held"]) in numbers:
        return ""
    return f"the model's {model.get('buffer')}: asked {model['asked']}, held {model['held']}; the engine: {str(msg)[:200]}"
