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
- ``_run``: a checked run, the sweep, the fuzzer, the breadth-first search;
- ``_report``: a rank-disagreement trace as text.
"""

from specstate.multirank._config import DpLaunch, RankConfig, dp_flags, dp_launch
from specstate.multirank._invariants import MULTI_INVARIANTS, RankViolation, check_multi
from specstate.multirank._policy import POLICIES, MultiPolicy, get_policy, policy_names
from specstate.multirank._records import Collective, RankIteration, RankPath, SyncEntry, SyncRecord
from specstate.multirank._run import (ExploreResult, MultiResult, MultiRun, explore_multi, fuzz_multi, make_model,
                                      run_multi, sweep_multi)
from specstate.multirank._state import MultiState, initial_multi_state
from specstate.multirank._step import MultiModel, MultiOutcome, multi_step

__all__ = ["DpLaunch", "RankConfig", "dp_flags", "dp_launch", "MULTI_INVARIANTS", "RankViolation", "check_multi",
           "POLICIES", "MultiPolicy", "get_policy", "policy_names", "Collective", "RankIteration", "RankPath",
           "SyncEntry", "SyncRecord", "ExploreResult", "MultiResult", "MultiRun", "explore_multi", "fuzz_multi",
           "make_model", "run_multi", "sweep_multi", "MultiState", "initial_multi_state", "MultiModel",
           "MultiOutcome", "multi_step"]
