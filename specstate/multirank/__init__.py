"""The multi-rank model: sglang's DP attention, every rank's batch and the collectives they share.

General layout (each private module one concept; this module re-exports them):

- ``_config``: ``RankConfig`` (dp / tp sizes, DP attention, how the MLP input is gathered) and the
  reading of the DP flags out of a launch;
- ``_state``: ``MultiState``: one single-rank ``ModelState`` per rank (the single-rank model,
  composed, never changed), the request -> rank map, the round-robin counter;
- ``_records``: the MLP-sync record each iteration gathers, each rank's path, each collective
  a rank enters with its per-rank row counts;
- ``_collectives``: the DP-gather layout of a target forward (graph bucket x width, or the padded
  eager list);
- ``_policy``: who decides speculate / plain across ranks (locally, or once from the gather);
- ``_step``: ``multi_step``: one action on every rank;
- ``_invariants``: the named cross-rank invariants;
- ``_routing``: which rank an arrival reaches (round robin, ``total_requests``, an explicit rank);
- ``_run``: a checked run, the sweep, the fuzzer;
- ``_explore``: the breadth-first search, reduced by rank rotation (why that is sound: its doc);
- ``_prove``: every vector of per-rank batch sizes up to a bound, up to rank order;
- ``_report``: a rank-disagreement trace as text.
"""

from specstate._lazy import lazy_exports

#: imported on first use (``specstate/_lazy.py``): the commands ask ``_config`` / ``_policy`` on
#: every call (is this a DP launch?) without importing the model
_FROM = {
    "_config": ("DpLaunch", "RankConfig", "dp_flags", "dp_launch", "per_rank_config"),
    "_invariants": ("MULTI_INVARIANTS", "RankViolation", "check_multi"),
    "_policy": ("POLICIES", "MultiPolicy", "get_policy", "policy_names"),
    "_records": ("Collective", "RankIteration", "RankPath", "SyncEntry", "SyncRecord"),
    "_explore": ("ExploreResult", "explore_multi", "multi_key"),
    "_routing": ("RoutedArrive", "LOAD_BALANCE_METHODS"),
    "_run": ("MultiResult", "MultiRun", "fuzz_multi", "make_model", "run_multi", "sweep_multi"),
    "_state": ("MultiState", "initial_multi_state"),
    "_step": ("MultiModel", "MultiOutcome", "multi_step"),
}
__getattr__, __dir__ = lazy_exports(__name__, {n: f"specstate.multirank.{m}" for m, ns in _FROM.items() for n in ns})

__all__ = [n for ns in _FROM.values() for n in ns]
