"""The "agreeing" weights: target and EAGLE-3 draft that agree, so drafts get accepted.

With ``load_format="dummy"`` both models are random and the target rejects almost every
draft (accept length about 1.03). Under ``SPECSTATE_AGREE=1`` the plugin rewrites the
weights right after each model is loaded (``ModelRunner.load_model``, before any CUDA
graph is captured) so that:

- target: every attention ``o_proj`` and MLP ``down_proj`` is zero, so the residual stream
  is the token embedding ``E[x]`` through all layers (and so are the EAGLE-3 aux hidden
  states, ``[E[x], E[x], E[x]]``); the final norm weight is 1; ``lm_head`` row ``j`` is
  ``sum(E[x] for x with succ(x) == j)``: the target's next token after ``x`` is ``succ(x)``.
- draft (1 layer): ``fc`` copies the first aux block (``E[x]``), ``o_proj``/``down_proj``
  are zero, final norm 1, so the draft's hidden is ``E[d]`` (``d`` the input token of the
  last accepted position) at every draft step; ``lm_head`` row ``j`` is
  ``sum(E[x] for x with succ(succ(x)) == j)``, except rows of "poisoned" tokens, which are
  zero. The draft therefore proposes ``succ(succ(d))`` at every depth of the tree.

``succ(t) = t`` on absorbing tokens (``t % ABSORB == 0`` and the last id) and ``t + 1``
elsewhere. A request walks up to the next absorbing token and then repeats it. While it
walks, the draft's depth-1 token is right and the deeper ones are wrong: accept length 2.
Once absorbed, every depth is right: accept length ``steps + 1`` (4). When the token the
draft should propose is poisoned: accept length 1. ``max_new_tokens`` cuts the last
verify of a request short (any length). Embeddings are unit rows of a seeded Gaussian
matrix: correct logits are about 16 (RMSNorm scales a unit row to norm 16), wrong ones
about N(0, 1).

Only torch is needed; the functions are checked on CPU by simulating the two models.
"""

from __future__ import annotations

from typing import Any, Iterable, Tuple

__all__ = [
    "ABSORB",
    "POISON_MOD",
    "succ_table",
    "embeddings",
    "target_head",
    "draft_head",
    "poisoned",
    "apply_agree",
    "expected_accept_len",
]

ABSORB = 16
POISON_MOD = 7
SEED = 20261129


def succ_table(vocab: int, absorb: int = ABSORB):
    import torch

    t = torch.arange(vocab, dtype=torch.int64)
    nxt = t + 1
    fixed = (t % absorb == 0) | (t == vocab - 1)
    return torch.where(fixed, t, nxt)


def poisoned(vocab: int, poison_mod: int = POISON_MOD):
    """Tokens whose draft lm_head row is zero (the draft cannot propose them)."""
    import torch

    t = torch.arange(vocab, dtype=torch.int64)
    if poison_mod <= 0:
        return torch.zeros(vocab, dtype=torch.bool)
    # a hash, not a plain modulus, so it does not line up with ABSORB
    return ((t * 2654435761) % 1000003) % poison_mod == 0


_E_CACHE: dict[Tuple[int, int, int], Any] = {}  #: (vocab, hidden, seed) -> the embedding


def embeddings(vocab: int, hidden: int, seed: int = SEED):
    """Unit-norm rows of a seeded Gaussian matrix, float32, CPU (cached)."""
    import torch

    key = (vocab, hidden, seed)
    if key not in _E_CACHE:
        g = torch.Generator(device="cpu")
        g.manual_seed(seed)
        e = torch.randn(vocab, hidden, generator=g, dtype=torch.float32)
        e = e / e.norm(dim=1, keepdim=True)
        _E_CACHE[key] = e
    return _E_CACHE[key]


def target_head(e, succ):
    """Row j = sum of E[x] over x with succ(x) == j."""
    import torch

    head = torch.zeros_like(e)
    head.index_add_(0, succ, e)
    return head


def draft_head(e, succ, poison):
    """Row j = sum of E[x] over x with succ(succ(x)) == j; poisoned rows zero."""
    head = target_head(e, succ[succ])
    head[poison] = 0
    return head


def expected_accept_len(d: int, succ, poison, steps: int = 3) -> int:
    """The accept length of a verify whose last accepted input token was ``d`` (so the
    bonus token is ``succ(d)``), under the ideal model (draft proposes ``succ(succ(d))`` at
    every depth; the deeper alternatives of the tree are noise)."""
    s = [int(d)]
    for _ in range(steps + 1):
        s.append(int(succ[s[-1]]))
    # s[1] = bonus (root), s[2] = right depth-1 token, s[3] depth 2, ...
    proposal = s[2]
    if bool(poison[proposal]):
        return 1
    n = 1
    for depth in range(1, steps + 1):
        if s[1 + depth] == proposal:
            n += 1
        else:
            break
    return n


def _named(model) -> dict:
    return dict(model.named_parameters())


def _set(p, value) -> None:
    import torch

    with torch.no_grad():
        p.data.copy_(value.to(device=p.device, dtype=p.dtype))


def apply_agree(model, *, is_draft: bool, vocab: int, hidden: int, num_aux: int = 3) -> list[str]:
    """Rewrite ``model``'s parameters in place (see the module docstring).

    Returns the names of the parameters it changed (for the log)."""
    import torch

    params = _named(model)
    changed: list[str] = []
    e = embeddings(vocab, hidden)
    succ = succ_table(vocab)
    for name, p in params.items():
        if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
            with torch.no_grad():
                p.data.zero_()
            changed.append(name)
        elif name.endswith("norm.weight") and p.dim() == 1 and p.shape[0] == hidden:
            with torch.no_grad():
                p.data.fill_(1.0)
            changed.append(name)
        elif name.endswith("embed_tokens.weight") and tuple(p.shape) == (vocab, hidden):
            _set(p, e)
            changed.append(name)
    head = params.get("lm_head.weight")
    if head is None or tuple(head.shape) != (vocab, hidden):
        raise RuntimeError(f"agree: lm_head.weight missing or not {(vocab, hidden)}")
    if is_draft:
        _set(head, draft_head(e, succ, poisoned(vocab)))
        fc = params.get("model.fc.weight")
        if fc is None or tuple(fc.shape) != (hidden, hidden * num_aux):
            raise RuntimeError(f"agree: draft model.fc.weight missing or not {(hidden, hidden * num_aux)}")
        w = torch.zeros(hidden, hidden * num_aux)
        w[:, :hidden] = torch.eye(hidden)
        _set(fc, w)
        changed.append("model.fc.weight")
    else:
        _set(head, target_head(e, succ))
    changed.append("lm_head.weight")
    return changed


def simulate_accept_lengths(last_tokens: Iterable[int], vocab: int = 512, steps: int = 3, n_verify: int = 10):
    """Ideal-model accept lengths for requests whose prompts end with ``last_tokens``
    (for docs and tests)."""
    succ = succ_table(vocab)
    poison = poisoned(vocab)
    out = []
    for x in last_tokens:
        seq = []
        d = int(x)  # prefill: target predicts succ(x) = bonus; d = last input token
        for _ in range(n_verify):
            n = expected_accept_len(d, succ, poison, steps)
            seq.append(n)
            for _ in range(n):
                d = int(succ[d])
        out.append(seq)
    return out
