"""Argument checks: the one place the library validates what callers hand it.

Public functions validate at the edge and raise ``ValueError`` naming the parameter
and the range it must lie in; this is the one place that spells those checks.
``bool`` is refused although it is an ``int`` subclass: ``k=True`` is a mistake, not 1.
NumPy scalars are numbers like any other (``np.int64(4)`` is a valid ``k``,
``np.float32(0.7)`` a valid temperature); the checks return plain Python values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Protocol

import torch

# Tolerance for "a probability row sums to 1": loose enough for float32 softmax
# output, tight enough to catch unnormalised scores or a wrong row.
_SUM_TOLERANCE = 1e-4


class _Batched(Protocol):
    batch_size: int


class _ModelShape(Protocol):
    vocab_size: int
    block_size: int


def _is_int(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer >= ``minimum``, else ``ValueError``."""
    if not _is_int(value) or value < minimum:  # type: ignore[operator]
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)  # type: ignore[arg-type]


def check_ints(obj: object, names: Sequence[str], minimum: int = 1) -> None:
    """:func:`check_int` on each of ``obj``'s attributes ``names`` (a config's sizes)."""
    for name in names:
        check_int(name, getattr(obj, name), minimum)


def check_real(
    name: str, value: object, allowed: str, ok: Callable[[float], bool] = lambda v: True
) -> float:
    """``value`` as a finite ``float`` for which ``ok`` holds, else ``ValueError``.

    The message says ``name`` must be ``allowed`` (e.g. ``"a number in (0, 1]"``).
    """
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if not ok(float(value)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return float(value)


def check_ids(name: str, ids: object, vocab_size: int) -> list[int]:
    """A flat sequence of token ids in ``[0, vocab_size)`` as a list of ints, else ``ValueError``.

    Text, floats, bools and nested sequences are refused rather than converted: ``"65"``
    is not token 6 then token 5, and ``1.5`` is not token 1.
    """
    if (
        isinstance(ids, str | bytes)
        or not isinstance(ids, Sequence | range)
        and not hasattr(ids, "tolist")
    ):
        raise ValueError(f"{name} must be a sequence of token ids, got {type(ids).__name__}")
    values = ids.tolist() if hasattr(ids, "tolist") else list(ids)  # type: ignore[union-attr]
    if not isinstance(values, list):  # a 0-d array or tensor: one number, not a sequence
        raise ValueError(f"{name} must be a sequence of token ids, got a scalar {values!r}")
    if not all(type(t) is int for t in values):  # the common case, checked at C speed
        for t in values:
            if not _is_int(t):
                raise ValueError(f"{name} must hold integer token ids, got {t!r}")
        values = [int(t) for t in values]
    if values and not (0 <= min(values) and max(values) < vocab_size):
        bad = next(t for t in values if not 0 <= t < vocab_size)
        raise ValueError(f"{name} must lie in [0, {vocab_size - 1}], got {bad}")
    return values


def check_prompt(prompt_token_ids: object, config: _ModelShape, max_tokens: int) -> list[int]:
    """The prompt as a list of ints that leaves room for ``max_tokens`` in the window."""
    if isinstance(prompt_token_ids, str | bytes):
        raise ValueError("prompt_token_ids must be a sequence of token ids; encode text first")
    vocab, block = config.vocab_size, config.block_size
    ids = check_ids("prompt_token_ids", prompt_token_ids, vocab)
    if not ids:
        raise ValueError("prompt_token_ids must contain at least 1 token, got an empty prompt")
    if len(ids) >= block:
        raise ValueError(
            f"prompt_token_ids must be shorter than the context window ({block} tokens), "
            f"got {len(ids)}"
        )
    if len(ids) + max_tokens > block:
        raise ValueError(
            f"max_tokens must be <= {block - len(ids)} for this {len(ids)}-token prompt "
            f"(context window {block}), got {max_tokens}"
        )
    return ids


def check_prompts(
    prompts: object,
    config: _ModelShape,
    max_tokens: int,
    k_max: int = 0,
    max_nodes: int | None = None,
) -> list[list[int]]:
    """Each of at least one prompt checked by :func:`check_prompt`, and room after the longest
    for ``max_tokens`` and then: with more than one prompt, a round's ``k_max`` drafted
    positions, which a padded row of a finished or nearly finished request still takes; and
    a token tree's ``max_nodes`` (if given), written past the tokens it may keep."""
    if isinstance(prompts, str | bytes) or not hasattr(prompts, "__len__") or not len(prompts):
        raise ValueError("prompts must hold at least 1 prompt (a sequence of token-id lists)")
    seqs = [check_prompt(p, config, max_tokens) for p in prompts]
    block, longest = config.block_size, max(len(s) for s in seqs)
    if len(seqs) > 1 and longest + max_tokens + k_max > block:
        raise ValueError(
            f"k must be <= {block - longest - max_tokens} here: batched speculation needs "
            f"prompt length + max_tokens + k <= block_size={block}, got {longest} + "
            f"{max_tokens} + {k_max}"
        )
    if max_nodes is not None and longest + max_tokens + check_int("max_nodes", max_nodes) > block:
        raise ValueError(
            f"max_nodes must be <= {block - longest - max_tokens} here (prompt + max_tokens + "
            f"max_nodes <= block_size={block}), got {max_nodes}"
        )
    return seqs


def check_drafters(drafters: object, n: int) -> list:
    """``drafters`` as a list if it holds ``n`` objects with a ``name`` and a ``propose`` (a
    chain drafter) or a ``draft_tree`` method (a tree drafter)."""
    if not isinstance(drafters, Sequence) or len(drafters) != n:
        got = len(drafters) if isinstance(drafters, Sequence) else type(drafters).__name__
        raise ValueError(f"drafters must hold one drafter per prompt ({n}), got {got}")
    for d in drafters:
        method = getattr(d, "propose", None) or getattr(d, "draft_tree", None)
        if not (hasattr(d, "name") and callable(method)):
            raise ValueError(
                f"drafter must have a name and a propose or draft_tree method, got {d!r}"
            )
    return list(drafters)


def check_draft_params(params: object) -> None:
    """``ValueError`` if ``params`` is ``None``: a drafter that samples (a draft model, an
    EAGLE head) needs the round's sampling parameters, where prompt lookup needs none."""
    if params is None:
        raise ValueError("params must be the SamplingParams the draft samples with")


def check_model_config(config: object) -> None:
    """A TinyGPT shape: integer sizes >= 1, an even head size, a rotary base > 1, a positive
    norm epsilon, and query heads that split evenly among the key/value heads."""
    check_ints(config, ("block_size", "vocab_size", "n_layer", "n_head", "n_embd", "n_hidden"))
    n_embd, n_head = config.n_embd, config.n_head  # type: ignore[attr-defined]
    if n_embd % n_head or (n_embd // n_head) % 2:
        raise ValueError(
            f"n_embd / n_head must be an even integer, got n_embd={n_embd}, n_head={n_head}"
        )
    check_real("rope_theta", config.rope_theta, "a number > 1", lambda t: t > 1)  # type: ignore[attr-defined]
    check_real("rms_norm_eps", config.rms_norm_eps, "a number > 0", lambda e: e > 0)  # type: ignore[attr-defined]
    n_kv = config.n_kv_head  # type: ignore[attr-defined]
    if n_kv is not None:
        check_int("n_kv_head", n_kv)
        if n_head % n_kv:
            raise ValueError(f"n_head must be a multiple of n_kv_head, got {n_head} and {n_kv}")


def check_forward(
    idx: torch.Tensor, cache: _Batched | None, logits_to_keep: int, block_size: int
) -> tuple[int, int]:
    """``(B, T)`` of a forward pass's ``idx`` if it fits its cache (or, uncached, the
    window) and ``logits_to_keep`` lies in [0, T]; else ``ValueError``."""
    if idx.dim() != 2:
        raise ValueError(f"idx must have shape (B, T), got {tuple(idx.shape)}")
    B, T = idx.shape
    if not 0 <= logits_to_keep <= T:
        raise ValueError(f"logits_to_keep must lie in [0, T={T}], got {logits_to_keep}")
    if cache is None and T > block_size:
        raise ValueError(f"sequence length must be <= block_size={block_size}, got {T}")
    if cache is not None and cache.batch_size != B:
        raise ValueError(f"cache batch size {cache.batch_size} != input batch size {B}")
    return B, T


def check_sampling_params(params: object, min_temperature: float) -> dict[str, object]:
    """``params``' fields as plain Python numbers, NumPy scalars included, else ``ValueError``."""
    t, top_k, top_p = params.temperature, params.top_k, params.top_p  # type: ignore[attr-defined]
    greedy_or_min = f"0 (greedy) or a finite number >= {min_temperature}"
    return {
        "temperature": check_real(
            "temperature", t, greedy_or_min, lambda v: v == 0 or v >= min_temperature
        ),
        "top_k": None if top_k is None else check_int("top_k", top_k),
        "top_p": check_real("top_p", top_p, "a number in (0, 1]", lambda v: 0 < v <= 1),
        "max_tokens": check_int("max_tokens", params.max_tokens),  # type: ignore[attr-defined]
    }


class _Proposal(Protocol):
    tokens: Sequence[int]

    def dense_probs(self, vocab_size: int) -> torch.Tensor: ...


class _Tree(Protocol):
    tokens: list[int]
    probs: torch.Tensor | None
    depths: list[int]

    def __len__(self) -> int: ...


class _Greedy(Protocol):
    greedy: bool


class _KRange(Protocol):
    min_k: int
    max_k: int


def check_k(k: object, adaptive_k: _KRange | None) -> int:
    """``k`` as an int >= 1, inside ``adaptive_k``'s range if there is one."""
    k = check_int("k", k)
    if adaptive_k is not None and not adaptive_k.min_k <= k <= adaptive_k.max_k:
        raise ValueError(
            f"k must lie in [{adaptive_k.min_k}, {adaptive_k.max_k}] for this adaptive_k, got {k}"
        )
    return k


def check_target_logits(
    target_logits: object, proposed: Sequence[int]
) -> tuple[torch.Tensor, list[int]]:
    """``(target_logits, proposed ids)`` if the logits are (k+1, V) with a distribution in
    every row and the k proposals are ids below V; else ``ValueError``."""
    if not isinstance(target_logits, torch.Tensor) or target_logits.dim() != 2:
        raise ValueError("target_logits must be a 2-D tensor of shape (k+1, vocab_size)")
    ids = check_ids("proposed token ids", proposed, target_logits.shape[-1])
    if target_logits.shape[0] != len(ids) + 1:
        raise ValueError(
            f"target_logits must have shape (k+1, vocab_size) = ({len(ids) + 1}, V) for "
            f"k={len(ids)} proposals, got {tuple(target_logits.shape)}"
        )
    # NaN would make min(1, p/q) read as 1 (accept) and argmax pick the NaN; +inf or a
    # row that is -inf everywhere has no distribution at all. -inf entries are fine.
    if torch.isnan(target_logits).any() or torch.isposinf(target_logits).any():
        raise ValueError("target_logits must not hold NaN or +inf")
    if torch.isneginf(target_logits).all(-1).any():
        raise ValueError("target_logits must have a finite entry in every row (a row is all -inf)")
    return target_logits, ids


def check_draft_probs(draft_probs: object, proposed: list[int], vocab_size: int) -> torch.Tensor:
    """``draft_probs`` if it holds the k distributions the ``proposed`` tokens came from."""
    k = len(proposed)
    if not isinstance(draft_probs, torch.Tensor) or tuple(draft_probs.shape) != (k, vocab_size):
        shape = tuple(draft_probs.shape) if isinstance(draft_probs, torch.Tensor) else None
        raise ValueError(
            f"draft_probs must have shape (k, vocab_size) = ({k}, {vocab_size}), "
            f"got {shape or type(draft_probs).__name__}"
        )
    q = draft_probs.detach().to(torch.float64)
    if k and (not torch.isfinite(q).all() or (q < 0).any()):
        raise ValueError("draft_probs must be finite and >= 0")
    sums = q.sum(-1)
    if ((sums - 1).abs() > _SUM_TOLERANCE).any():
        raise ValueError(
            f"each row of draft_probs must sum to 1 (within {_SUM_TOLERANCE}), got sums "
            f"{[round(float(s), 6) for s in sums]}"
        )
    drawn = q[torch.arange(k), torch.as_tensor(proposed, dtype=torch.long)]
    if (drawn <= 0).any():
        i = int((drawn <= 0).nonzero()[0])
        raise ValueError(
            f"draft_probs[{i}, proposed[{i}]] must be > 0: a proposal cannot have been "
            "drawn from a distribution that gives it probability 0"
        )
    return draft_probs


def check_proposal(proposal: _Proposal, name: str, k: int, params: _Greedy, vocab_size: int):
    """A foreign drafter's ``proposal`` if it holds at most ``k`` ids below ``vocab_size``
    and, when sampling, the distributions they came from; else ``ValueError``."""
    tokens = check_ids(f"tokens proposed by drafter {name!r}", proposal.tokens, vocab_size)
    if len(tokens) > k:
        raise ValueError(f"drafter {name!r} proposed {len(tokens)} tokens, more than k={k}")
    if not params.greedy:
        check_draft_probs(proposal.dense_probs(vocab_size), tokens, vocab_size)
    return dataclasses.replace(proposal, tokens=tokens)


def check_tree(tree: _Tree, drafter: object, max_nodes: int | None, depth: int, vocab_size: int):
    """A tree drafter's ``tree`` if it holds at most ``max_nodes`` nodes (``None``: any number)
    over at most ``depth`` levels, with valid ids and, if given, one distribution a node."""
    name = getattr(drafter, "name", type(drafter).__name__)
    levels = max(tree.depths, default=-1) + 1
    if (max_nodes is not None and len(tree) > max_nodes) or levels > depth:
        raise ValueError(
            f"{name} drafted {len(tree)} nodes over {levels} levels; "
            f"max_nodes is {max_nodes}, the depth allowed {depth}"
        )
    check_ids(f"{name}'s tree tokens", tree.tokens, vocab_size)
    if tree.probs is not None and tuple(tree.probs.shape) != (len(tree), vocab_size):
        raise ValueError(f"{name}'s tree probs must have shape {(len(tree), vocab_size)}")
    return tree
