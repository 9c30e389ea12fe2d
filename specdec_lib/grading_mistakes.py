"""Deliberately wrong implementations of the exercises: the graders' negative controls.

A grader that has never been shown a wrong answer has not been tested. Each
function here is one plausible student mistake, written in the exact form the
exercise asks for, and :data:`MISTAKES` says which diagnosis the matching
``check_*`` in :mod:`specdec_lib.grading` must give it. ``tests/test_grading.py``
runs every grader on every mistake over many seeds and reports the catch rate;
the "For teachers" page shows the same table. The ``*_reference`` functions are
correct solutions in the student's form, the positive controls.

Never use anything from this module to generate text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .generate import generate
from .sampling import process_logits
from .verify import accept_greedy, accept_sampled_biased

# --- the n-gram (prompt-lookup) drafter --------------------------------------
# Student form: propose(context, k, max_n=8, min_n=3) -> list[int]


def _ngram(
    context,
    k,
    max_n,
    min_n,
    *,
    latest=True,
    longest_first=True,
    self_match=False,
    offset=0,
    limit_k=True,
):
    # Byte token ids, so bytes.find/rfind can do the search quickly: the graders run
    # every mistake on every test context.
    text = bytes(context)
    L = len(text)
    sizes = range(min(max_n, L - 1), min_n - 1, -1)
    for n in sizes if longest_first else reversed(sizes):
        end = L if self_match else L - 1  # the correct search stops before the last token
        start = (text.rfind if latest else text.find)(text[L - n :], 0, end)
        if start >= 0:
            begin = start + n + offset
            return list(text[begin : begin + k] if limit_k else text[begin:])
    return []


def ngram_reference(context: list[int], k: int, max_n: int = 8, min_n: int = 3) -> list[int]:
    """Correct: longest suffix first (max_n down to min_n), its latest earlier occurrence."""
    return _ngram(context, k, max_n, min_n)


def ngram_earliest_match(context, k, max_n=8, min_n=3):
    """Wrong: takes the first occurrence in the context instead of the latest."""
    return _ngram(context, k, max_n, min_n, latest=False)


def ngram_shortest_first(context, k, max_n=8, min_n=3):
    """Wrong: tries min_n first, so a short, ambiguous match beats a long one."""
    return _ngram(context, k, max_n, min_n, longest_first=False)


def ngram_matches_itself(context, k, max_n=8, min_n=3):
    """Wrong: the search includes the suffix itself, which has nothing after it."""
    return _ngram(context, k, max_n, min_n, self_match=True)


def ngram_copies_the_match(context, k, max_n=8, min_n=3):
    """Wrong: off by one, copies from the last matched token instead of the one after it."""
    return _ngram(context, k, max_n, min_n, offset=-1)


def ngram_ignores_k(context, k, max_n=8, min_n=3):
    """Wrong: returns everything that followed the match, however long."""
    return _ngram(context, k, max_n, min_n, limit_k=False)


def ngram_ignores_min_n(context, k, max_n=8, min_n=3):
    """Wrong: falls back to matching a single token when nothing of length min_n matches."""
    return _ngram(context, k, max_n, 1)


def ngram_ignores_max_n(context, k, max_n=8, min_n=3):
    """Wrong: starts from the longest suffix that fits, however long, instead of max_n."""
    return _ngram(context, k, len(context), min_n)


# --- greedy verification ---------------------------------------------------------
# Student form: accept_greedy(target_logits, proposed) -> (emitted, n_accepted)


def greedy_reference(target_logits: torch.Tensor, proposed: Sequence[int]) -> tuple[list[int], int]:
    """Correct: keep the prefix that matches the argmax, then one token from the target."""
    best = target_logits.argmax(-1).tolist()
    n = 0
    while n < len(proposed) and proposed[n] == best[n]:
        n += 1
    return list(proposed[:n]) + [best[n]], n


def greedy_no_bonus(target_logits, proposed):
    """Wrong: when every proposal matches, emits nothing from the target's last row."""
    emitted, n = greedy_reference(target_logits, proposed)
    return (emitted[:-1], n) if n == len(proposed) and n > 0 else (emitted, n)


def greedy_off_by_one_rows(target_logits, proposed):
    """Wrong: checks proposed[i] against row i + 1 (and takes the bonus from the last row)."""
    best = target_logits.argmax(-1).tolist()
    k = len(proposed)
    n = 0
    while n < k and proposed[n] == best[min(n + 1, k)]:
        n += 1
    return list(proposed[:n]) + [best[min(n + 1, k)]], n


def greedy_emits_rejected(target_logits, proposed):
    """Wrong: at the first mismatch, emits the rejected proposal instead of the target's token."""
    emitted, n = greedy_reference(target_logits, proposed)
    if n < len(proposed):
        emitted[-1] = int(proposed[n])
    return emitted, n


def greedy_keeps_going(target_logits, proposed):
    """Wrong: does not stop at the first mismatch; keeps every proposal that matches its row."""
    best = target_logits.argmax(-1).tolist()
    kept = [int(x) for i, x in enumerate(proposed) if x == best[i]]
    return kept + [best[len(proposed)]], len(kept)


# --- sampled verification (the residual rule) -------------------------------------
# Student form: accept_sampled(target_logits, draft_probs, proposed, params, generator=None)


def _uniform(generator):
    return float(torch.rand((), generator=generator, dtype=torch.float64))


def _draw(probs, generator):
    return int(torch.multinomial(probs, 1, generator=generator))


def _sampled(
    target_logits,
    draft_probs,
    proposed,
    params,
    generator,
    *,
    accept,
    replace,
    bonus=True,
    row_shift=0,
):
    p = process_logits(target_logits, params)
    q = draft_probs.to(torch.float64)
    k = len(proposed)
    for i, x in enumerate(proposed):
        row = p[min(i + row_shift, k)]
        if _uniform(generator) < accept(float(row[x]), float(q[i, x])):
            continue
        return list(proposed[:i]) + [replace(row, q[i], generator)], i
    if not bonus:
        return list(proposed), k
    return list(proposed) + [_draw(p[k], generator)], k


def _ratio(p_x, q_x):
    return min(1.0, p_x / q_x)


def _residual(p, q, generator):
    residual = (p - q).clamp(min=0)
    return _draw(residual / residual.sum(), generator)


def sampled_reference(target_logits, draft_probs, proposed, params, generator=None):
    """Correct: accept x with min(1, p(x)/q(x)); on rejection draw from norm(max(0, p - q))."""
    return _sampled(
        target_logits, draft_probs, proposed, params, generator, accept=_ratio, replace=_residual
    )


def sampled_resample_from_target(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: on rejection resample from p_target (the library's own negative control)."""
    return accept_sampled_biased(target_logits, draft_probs, proposed, params, generator)


def sampled_accept_with_target_prob(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: accepts x with probability p_target(x), ignoring p_draft(x)."""
    return _sampled(
        target_logits,
        draft_probs,
        proposed,
        params,
        generator,
        accept=lambda p_x, q_x: p_x,
        replace=_residual,
    )


def sampled_no_bonus(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: when all k proposals are accepted, returns them without the bonus token."""
    return _sampled(
        target_logits,
        draft_probs,
        proposed,
        params,
        generator,
        accept=_ratio,
        replace=_residual,
        bonus=False,
    )


def sampled_off_by_one_rows(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: verifies proposed[i] against target row i + 1 (the bonus from the last row)."""
    return _sampled(
        target_logits,
        draft_probs,
        proposed,
        params,
        generator,
        accept=_ratio,
        replace=_residual,
        row_shift=1,
    )


def _unnormalised_residual(p, q, generator):
    # Inverse-CDF draw from weights that sum to less than 1: when u lands past
    # the total, it falls off the end (clamped here to the last token id).
    cdf = (p - q).clamp(min=0).cumsum(0)
    u = torch.rand((), generator=generator, dtype=torch.float64)
    return min(int(torch.searchsorted(cdf, u, right=True)), p.shape[0] - 1)


def sampled_unnormalised_residual(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: samples the replacement from max(0, p - q) without dividing by its sum."""
    return _sampled(
        target_logits,
        draft_probs,
        proposed,
        params,
        generator,
        accept=_ratio,
        replace=_unnormalised_residual,
    )


# --- speculative decoding (greedy) ---------------------------------------------------
# Student form: speculative_generate(target, drafter, prompt_token_ids, params, k) -> list[int]


def _speculate(
    target, drafter, prompt_token_ids, params, k, *, cap=True, rows=0, keep_correction=True
):
    tokens = [int(t) for t in prompt_token_ids]
    n_prompt = len(tokens)
    with torch.no_grad():
        while len(tokens) - n_prompt < params.max_tokens:
            remaining = params.max_tokens - (len(tokens) - n_prompt)
            proposal = drafter.propose(tokens, min(k, remaining - 1) if cap else k, params)
            m = len(proposal.tokens)
            logits = target(torch.tensor([tokens + proposal.tokens]))[0]  # (T, V)
            end = logits.shape[0] - rows
            emitted, n = accept_greedy(logits[end - (m + 1) : end], proposal.tokens)
            tokens.extend(emitted if keep_correction else emitted[:n])
    return tokens[n_prompt:]


def speculative_reference(target, drafter, prompt_token_ids, params, k):
    """Correct (the textbook version without a KV cache): draft, verify in one pass, repeat."""
    return _speculate(target, drafter, prompt_token_ids, params, k)


def speculative_overshoots(target, drafter, prompt_token_ids, params, k):
    """Wrong: drafts k tokens even near the end, so the last round can overrun max_tokens."""
    return _speculate(target, drafter, prompt_token_ids, params, k, cap=False)


def speculative_off_by_one_rows(target, drafter, prompt_token_ids, params, k):
    """Wrong: verifies with the logits one position too early."""
    return _speculate(target, drafter, prompt_token_ids, params, k, rows=1)


def speculative_drops_correction(target, drafter, prompt_token_ids, params, k):
    """Wrong: emits only the accepted proposals, so a fully rejected round emits nothing."""
    return _speculate(target, drafter, prompt_token_ids, params, k, keep_correction=False)


def speculative_plain_decoding(target, drafter, prompt_token_ids, params, k):
    """Wrong: ignores the drafter and decodes one token per pass (right tokens, no speed-up)."""
    return generate(target, prompt_token_ids, params)


@dataclass(frozen=True)
class Mistake:
    """One wrong implementation and the diagnosis its grader must give."""

    function: Callable
    diagnosis: str
    description: str


MISTAKES: dict[str, dict[str, Mistake]] = {
    "check_ngram_drafter": {
        "earliest match": Mistake(
            ngram_earliest_match, "earliest_match", "first occurrence instead of the latest"
        ),
        "shortest first": Mistake(
            ngram_shortest_first, "shortest_first", "tries min_n before max_n"
        ),
        "matches itself": Mistake(
            ngram_matches_itself, "never_proposes", "the suffix matches itself, so nothing follows"
        ),
        "copies the match": Mistake(
            ngram_copies_the_match,
            "copies_the_match",
            "off by one: copies from the last matched token",
        ),
        "ignores k": Mistake(ngram_ignores_k, "ignores_k", "returns more than k tokens"),
        "ignores min_n": Mistake(
            ngram_ignores_min_n, "ignores_min_n", "matches suffixes shorter than min_n"
        ),
        "ignores max_n": Mistake(
            ngram_ignores_max_n, "ignores_max_n", "matches suffixes longer than max_n"
        ),
    },
    "check_accept_greedy": {
        "no bonus token": Mistake(
            greedy_no_bonus, "no_bonus", "all accepted, no token from the last row"
        ),
        "off-by-one rows": Mistake(
            greedy_off_by_one_rows, "off_by_one", "proposed[i] checked against row i + 1"
        ),
        "emits the rejected proposal": Mistake(
            greedy_emits_rejected, "emits_rejected", "the correction is the rejected token"
        ),
        "keeps going after a mismatch": Mistake(
            greedy_keeps_going, "keeps_going", "accepts matches after the first mismatch"
        ),
    },
    "check_accept_sampled": {
        "resample from p_target": Mistake(
            sampled_resample_from_target,
            "resample_from_target",
            "on rejection draws from p_target, not the residual",
        ),
        "accept with p_target(x)": Mistake(
            sampled_accept_with_target_prob,
            "accept_with_p_target",
            "acceptance probability p(x) instead of min(1, p/q)",
        ),
        "no bonus token": Mistake(
            sampled_no_bonus, "no_bonus", "all accepted, no token from the last row"
        ),
        "off-by-one rows": Mistake(
            sampled_off_by_one_rows, "off_by_one", "proposed[i] verified against row i + 1"
        ),
        "residual not renormalised": Mistake(
            sampled_unnormalised_residual,
            "unnormalised_residual",
            "samples max(0, p - q) without dividing by its sum",
        ),
    },
    "check_speculative_generate": {
        "overshoots max_tokens": Mistake(
            speculative_overshoots, "wrong_length", "drafts k tokens even when fewer remain"
        ),
        "off-by-one rows": Mistake(
            speculative_off_by_one_rows, "mismatch", "verifies with logits one position too early"
        ),
        "drops the correction token": Mistake(
            speculative_drops_correction, "no_progress", "a fully rejected round emits nothing"
        ),
        "plain decoding": Mistake(
            speculative_plain_decoding, "not_speculating", "one target pass per token"
        ),
    },
}

REFERENCES: dict[str, Callable] = {
    "check_ngram_drafter": ngram_reference,
    "check_accept_greedy": greedy_reference,
    "check_accept_sampled": sampled_reference,
    "check_speculative_generate": speculative_reference,
}


def catch_rates(
    check_name: str, seeds: Sequence[int], **check_kwargs
) -> dict[str, tuple[int, int]]:
    """How often ``check_name`` gives each mistake its diagnosis, over ``seeds``.

    Returns ``{mistake: (caught, runs)}`` and, under ``"false alarms"``, how often
    the correct reference failed: ``(failed, runs)``.
    """
    from . import grading

    check = getattr(grading, check_name)
    rates = {}
    for label, mistake in MISTAKES[check_name].items():
        caught = sum(
            check(mistake.function, seed=seed, **check_kwargs).diagnosis == mistake.diagnosis
            for seed in seeds
        )
        rates[label] = (caught, len(seeds))
    reference = REFERENCES[check_name]
    rates["false alarms"] = (
        sum(not check(reference, seed=seed, **check_kwargs).passed for seed in seeds),
        len(seeds),
    )
    return rates


def main() -> None:
    """Print every grader's catch rate on every mistake, and its false-alarm rate."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seeds", type=int, default=100, help="seeds per mistake (default 100)")
    parser.add_argument("--checks", nargs="+", default=list(MISTAKES), choices=list(MISTAKES))
    args = parser.parse_args()
    print("| check | mistake | expected diagnosis | caught |")
    print("| --- | --- | --- | --- |")
    for check_name in args.checks:
        # Speculative decoding runs real models and is deterministic: a few seeds suffice.
        n = min(args.seeds, 3) if check_name == "check_speculative_generate" else args.seeds
        rates = catch_rates(check_name, list(range(n)))
        for label, (count, runs) in rates.items():
            diagnosis = (
                MISTAKES[check_name][label].diagnosis if label in MISTAKES[check_name] else "-"
            )
            print(f"| {check_name} | {label} | {diagnosis} | {count}/{runs} |")


if __name__ == "__main__":
    main()
