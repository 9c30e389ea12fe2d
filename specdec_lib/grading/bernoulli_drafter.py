"""Chapter 9's exercise, a drafter with a set acceptance, in one module: the answer in the
student's form, its slips, and the check.

``BernoulliDrafter(n_prompt, reference, alpha, seed)``, whose ``propose(context, k,
params, generator=None)`` proposes the reference's next k tokens, each kept with
probability alpha and spoiled (its id + 1) otherwise, one coin per token from its own
seeded generator. The slips are the ways such a drafter misses its alpha: spoiling with
probability alpha instead of 1 - alpha, one coin for a whole proposal (tokens kept or
spoiled together), and more than k tokens. The check draws 150 proposals at alpha 0.3
and 0.8 and z-tests the rate of kept tokens, and the rate after a kept token (which a
shared coin raises).
"""

from __future__ import annotations

import torch

from specdec_lib.analysis.hypothesis import z_score
from specdec_lib.engine.sampling import SamplingParams

from .mistakes import register
from .report import Diagnosis as D
from .report import Report
from .sandbox import Abort, as_tokens, call_student, run_check

# --- the answer, and its slips ---------------------------------------------------------


def _bernoulli(spoil_if_kept: bool = False, per_round: bool = False, cap: bool = True) -> type:
    """The chapter 9 drafter: the reference's next k tokens, each spoiled (its id + 1) with
    probability 1 - alpha; or with probability alpha, one coin per round, or past k."""

    class BernoulliDrafter:
        def __init__(self, n_prompt, reference, alpha, seed):
            self.n_prompt, self.reference, self.alpha = n_prompt, reference, alpha
            self.rng = torch.Generator().manual_seed(seed)

        def propose(self, context, k, params=None, generator=None):
            done = len(context) - self.n_prompt
            tokens = list(self.reference[done : done + k if cap else None])
            coins = torch.rand(1 if per_round else len(tokens), generator=self.rng).tolist()
            kept = [(c < self.alpha) != spoil_if_kept for c in coins * len(tokens)]
            return [t if keep else t + 1 for t, keep in zip(tokens, kept, strict=False)]

    return BernoulliDrafter


register(
    "check_bernoulli_drafter",
    _bernoulli(),
    ("spoils with probability alpha", _bernoulli(spoil_if_kept=True), D.INVERTED_SPOIL),
    ("one coin per round", _bernoulli(per_round=True), D.DEPENDENT_SPOILS),
    ("ignores k", _bernoulli(cap=False), D.IGNORES_K),
)


# --- the check -------------------------------------------------------------------------

_T1 = SamplingParams(temperature=1.0)
_Z_LIMIT = 4.0  # |z| beyond this is a failure: two-sided p ~ 6e-5 for a correct drafter


def check_bernoulli_drafter(drafter: type, seed: int = 0, timeout: float | None = 60.0) -> Report:
    """Check chapter 9's ``BernoulliDrafter(n_prompt, reference, alpha, seed).propose``: the
    reference's next k tokens, each kept at rate alpha, independently (z-tests, alpha 0.3, 0.8)."""

    def body(name: str) -> Report:
        prompt, reference, evidence = [7] * 10, list(range(100, 400)), {}
        for alpha in (0.3, 0.8):
            instance = call_student(drafter, name, len(prompt), reference, alpha, seed)
            kept: list[bool] = []
            after: list[bool] = []
            for i in range(150):
                done, k = 7 * i % 300, 1 + i % 6
                context = prompt + reference[:done]
                got = call_student(instance.propose, name, context, k, _T1, during=f"k = {k}")
                got, want = (
                    as_tokens(getattr(got, "tokens", got), "the proposal"),
                    reference[done:][:k],
                )
                if len(got) != len(want):
                    details = f"With k = {k} and {len(reference) - done} tokens left: {len(got)}."
                    raise Abort(D.IGNORES_K if len(got) > k else D.WRONG_LENGTH, details)
                flags = [g == w for g, w in zip(got, want, strict=True)]
                kept += flags
                after += [b for a, b in zip(flags, flags[1:], strict=False) if a]
            rate, z = sum(kept) / len(kept), z_score(sum(kept), len(kept), alpha)
            enough = len(after) * min(alpha, 1 - alpha) >= 5
            z_after = z_score(sum(after), len(after), alpha) if enough else 0.0
            evidence[f"alpha = {alpha}: z of kept, kept after kept"] = f"{z:+.1f}, {z_after:+.1f}"
            details = f"At alpha = {alpha} it kept {rate:.3f} of {len(kept)} tokens (z = {z:+.1f})."
            if abs(z) > _Z_LIMIT and abs(z_score(sum(kept), len(kept), 1 - alpha)) <= _Z_LIMIT:
                raise Abort(D.INVERTED_SPOIL, details, **evidence)  # the spoil rate, not alpha
            if abs(z_after) > _Z_LIMIT or abs(z) > _Z_LIMIT:  # tokens kept together, or not alpha
                details += f" After a kept token it kept {sum(after) / max(len(after), 1):.3f}."
                found = D.DEPENDENT_SPOILS if abs(z_after) > _Z_LIMIT else D.SPOIL_RATE
                raise Abort(found, details, **evidence)
        passed = "Correct: at alpha = 0.3 and 0.8 it keeps each token at rate alpha, independently."
        return Report("check_bernoulli_drafter", name, True, passed, None, evidence)

    return run_check("check_bernoulli_drafter", drafter, body, seed, timeout)
