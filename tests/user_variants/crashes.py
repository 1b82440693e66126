"""A user's variants that model the real worker crashing, through the public surface alone
(``specstate.variant``: ``guarded``, ``sglang_assert``): the run reports a ``worker-crash`` at
the symbol they name (or the running release's own, for a graph replay), as the model's own
operations do, not a ``VariantFailure`` of the user's code."""

from specstate.variant import DEFAULT_OPS, Worker, evolve, guarded, sglang_assert, threshold_decision

WHERE = "eagle_worker.py::EAGLEWorker.forward_batch_generation"


class AssertsAboveTwoRows:
    """the corrected fallback, on a worker whose decode asserts at most 2 rows"""

    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805, ANN001, ANN201 - operations take the Ops table first
        guarded(WHERE, {"bs": batch.batch_size},
                lambda: sglang_assert(batch.batch_size <= 2, f"at most 2 rows, got {batch.batch_size}"))
        return threshold_decision(ops, tx, batch)


def one_token_too_many(ops, runner, fb, graphs, iteration, config):  # noqa: ANN001, ANN201
    """The target's replay copies one ``input_ids`` token more than the runner captured: the copy
    into its static buffer fails inside the release's own runner."""
    if runner.worker == Worker.TARGET:
        fb = evolve(fb, input_ids=(fb.input_ids[0] + 1,) + tuple(fb.input_ids[1:]))
    return DEFAULT_OPS.replay_prepare(ops, runner, fb, graphs, iteration, config)


class OverflowingReplay:
    """sglang 0.5.12: the target graph replay's copy overflows"""

    base = "fixed-threshold"
    replay_prepare = one_token_too_many


class OverflowingReplay17:
    """sglang 0.5.17: the target graph replay's copy overflows"""

    base = "upstream-adaptive"
    replay_prepare = one_token_too_many


class OverflowingReplay23:
    """sglang 0.5.23: the target graph replay's copy overflows"""

    base = "upstream-v23"
    replay_prepare = one_token_too_many


def two_node_trivial_tree(ops, tx, batch, lens):  # noqa: ANN001, ANN201
    """The steps-0 verify input as a 2-node tree (2 draft tokens per request) that still declares
    1 token per request, the width the steps-0 runtime state's TARGET_VERIFY graph was captured for:
    ``can_run_graph``'s width check passes and the replay copies 2 tokens per request into a
    1-token-per-request slice."""
    v = DEFAULT_OPS.build_trivial_verify_input(ops, tx, batch, lens)
    bs = batch.batch_size
    return evolve(v, draft_token=(2 * bs,), positions=(2 * bs,), draft_token_num=2, num_tokens_per_req=1,
                  custom_mask=(2 * (sum(lens) + 2 * bs),), retrieve_index=(bs, 2), retrieve_next_token=(bs, 2),
                  retrieve_next_sibling=(bs, 2))


class WideTrivialTree17:
    """sglang 0.5.17: the steps-0 verify feeds 2 tokens per request into the 1-token graph"""

    base = "upstream-adaptive"
    build_trivial_verify_input = two_node_trivial_tree
