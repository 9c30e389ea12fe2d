"""Exact output distributions of a verification rule: enumeration, no random numbers.

Two kinds of exactness, kept apart on purpose.

*The formula.* For one draft position the first emitted token y has probability

    P(y) = q(y)·a(y) + R · r(y),   a(x) = min(1, p(x)/q(x)),   R = sum_x q(x)·(1 - a(x)),

where p is the target's (processed) distribution, q the draft's and r the rule's
replacement distribution: the residual norm(max(0, p - q)) for the correct rule, p itself
for the biased one. :func:`exact_first_token_distribution` evaluates it, summing over the
proposal x. That proves the *formula* right, to rounding error; it never runs a rule.

*The code.* :func:`exact_output_distribution` runs the rule itself, the shipped
``accept_sampled`` or anyone's function with its signature, once per branch of its
random draws. It hands the rule an :class:`EnumeratedDraws` in place of a
``torch.Generator``; while it runs, ``torch.rand`` and ``torch.multinomial`` answer
calls that carry that stand-in, and any other source of randomness is refused. A
uniform draw can only matter through comparisons with it, so the enumerator finds the
value where the rule's behaviour changes (one comparison, u < threshold, is assumed and
checked at the threshold) and follows both sides with their probabilities. A
categorical draw returns a placeholder token and records the distribution it was asked
to draw from; the emitted placeholder then stands for that whole distribution (checked
once per distribution by re-running with a real token). The result is the exact output
distribution of the code that ships, to within 2^-53, the spacing of ``torch.rand``'s
float64 draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import Replacement, residual_distribution

Rule = Callable[..., tuple[list[int], int]]

# --- driving the real function: its random draws, enumerated -----------------------

#: The largest value ``torch.rand`` can return in float64 (its draws are multiples of 2^-53).
_U_MAX = 1.0 - 2.0**-53
_GRID = 2**53
_PLACEHOLDER = -1_000_000  # categorical draw j returns _PLACEHOLDER - j
#: A guessed switch point is confirmed by runs this far (relatively) either side of it.
_GUESS_MARGIN = 1e-12


def _placeholder_index(token: int) -> int | None:
    return _PLACEHOLDER - token if token <= _PLACEHOLDER else None


class _NeedUniform(BaseException):
    """Raised inside the rule when it asks for a uniform draw the script has not decided.

    A BaseException, so a rule's own ``except Exception`` cannot swallow it."""


@dataclass
class EnumeratedDraws:
    """Stand-in for a ``torch.Generator`` whose draws are scripted, not random.

    ``uniforms`` are the values its successive ``torch.rand`` calls return; each
    ``torch.multinomial`` call returns a placeholder token (or ``forced[j]`` for
    draw j) and records the distribution it was asked to draw from in ``draws``.
    """

    uniforms: Sequence[float]
    forced: Mapping[int, int] = field(default_factory=dict)
    draws: list[torch.Tensor] = field(default_factory=list)
    used: int = 0


def _refuse(what: str) -> ValueError:
    return ValueError(
        f"the rule {what}: only torch.rand and torch.multinomial with the generator "
        "it was given can be enumerated"
    )


@contextmanager
def _answering() -> Iterator[None]:
    """While active, torch.rand / torch.multinomial answer an EnumeratedDraws and refuse
    every other caller (an unenumerated random draw would make the result a sample)."""
    rand, multinomial = torch.rand, torch.multinomial

    def fake_rand(*size, generator=None, dtype=None, **kwargs):
        if not isinstance(generator, EnumeratedDraws):
            raise _refuse("called torch.rand without the generator it was given")
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
        if math.prod(shape) != 1:
            raise _refuse(f"drew a uniform tensor of shape {shape}, not one number")
        if generator.used == len(generator.uniforms):
            raise _NeedUniform
        u = generator.uniforms[generator.used]
        generator.used += 1
        return torch.full(shape, u, dtype=dtype or torch.get_default_dtype())

    def fake_multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
        if not isinstance(generator, EnumeratedDraws):
            raise _refuse("called torch.multinomial without the generator it was given")
        if num_samples != 1 or input.dim() != 1:
            raise _refuse("drew several tokens in one torch.multinomial call")
        weights = input.detach().to(torch.float64)
        j = len(generator.draws)
        generator.draws.append(weights / weights.sum())
        return torch.tensor([generator.forced.get(j, _PLACEHOLDER - j)])

    torch.rand, torch.multinomial = fake_rand, fake_multinomial
    try:
        yield
    finally:
        torch.rand, torch.multinomial = rand, multinomial


@dataclass(frozen=True)
class Outcome:
    """One branch of a rule's random draws: its probability, what the rule returned
    (placeholders where a categorical draw landed) and the distribution of each draw."""

    probability: float
    emitted: tuple[int, ...]
    n_accepted: int
    draws: tuple[torch.Tensor, ...]
    uniforms: tuple[float, ...]  # values of the uniform draws that reproduce this branch

    def token_distribution(self, position: int, vocab_size: int) -> torch.Tensor:
        """Distribution (V,) of ``emitted[position]`` on this branch."""
        token = self.emitted[position]
        j = _placeholder_index(token)
        if j is not None:
            return self.draws[j]
        if not 0 <= token < vocab_size:
            raise ValueError(f"the rule emitted token {token}, outside [0, {vocab_size - 1}]")
        return torch.nn.functional.one_hot(torch.tensor(token), vocab_size).to(torch.float64)


def enumerate_outcomes(
    call: Callable[[EnumeratedDraws], tuple[list[int], int]],
    guesses: Mapping[int, float] | None = None,
    checked: set[bytes] | None = None,
) -> list[Outcome]:
    """Every branch of ``call(generator)``'s random draws, with its probability.

    ``call`` runs the rule once with the generator it is given. ``guesses[i]`` is
    where uniform draw i is expected to switch the rule's behaviour (for the
    residual rule, min(1, p(x)/q(x))): two runs either side of it confirm the
    switch; without a guess, or if the guess is wrong, the switch is found by
    bisection over the 2^53 possible values. ``checked`` collects the draw
    distributions whose placeholder has been checked; pass one set to many calls on
    the same rule to check each distribution once. Must run inside :func:`_answering`.
    """
    guesses = guesses or {}
    cache: dict[tuple[float, ...], tuple] = {}
    state = torch.get_rng_state()

    def run(script: tuple[float, ...], forced: Mapping[int, int] | None = None) -> tuple:
        """("leaf", emitted, n_accepted, uniforms used, draws) or ("more", draws so far)."""
        if forced is None and script in cache:
            return cache[script]
        g = EnumeratedDraws(script, dict(forced or {}))
        try:
            emitted, n_accepted = call(g)
            result = (
                "leaf",
                tuple(int(t) for t in emitted),
                int(n_accepted),
                g.used,
                tuple(g.draws),
            )
        except _NeedUniform:
            result = ("more", tuple(g.draws))
        if not torch.equal(torch.get_rng_state(), state):
            raise _refuse("drew from torch's global random generator")
        if forced is None:
            cache[script] = result
        return result

    def signature(result: tuple) -> tuple:
        return result[:-1] + tuple(d.numpy().tobytes() for d in result[-1])

    def split(script: tuple[float, ...]) -> list[tuple[float, float]] | None:
        """(representative u, probability) of each side of uniform draw i = len(script),
        or None if a guess was given for draw i and the rule never made it."""
        i = len(script)
        side = lambda u: signature(run(script + (u,)))  # noqa: E731
        guess = guesses.get(i)
        if guess is not None and 0 < guess < 1:
            below, above = guess * (1 - _GUESS_MARGIN), min(guess * (1 + _GUESS_MARGIN), _U_MAX)
            low = run(script + (below,))
            if low[0] == "leaf" and low[3] <= i:  # the rule never made draw i
                return None
            if side(below) != side(above):  # the switch lies in [below, above]
                return [(below, guess), (above, 1.0 - guess)]
        low, high = side(0.0), side(_U_MAX)
        if low == high:
            return [(0.0, 1.0)]
        lo, hi = 0, _GRID - 1  # side(lo / 2^53) == low, side(hi / 2^53) == high
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if side(mid / _GRID) == low else (lo, mid)
        return [(0.0, hi / _GRID), (_U_MAX, 1.0 - hi / _GRID)]

    def leaf(result: tuple, weight: float, script: tuple[float, ...]) -> Outcome:
        return Outcome(weight, result[1], result[2], result[4], script[: result[3]])

    outcomes: list[Outcome] = []
    stack: list[tuple[tuple[float, ...], float]] = [((), 1.0)]  # uniforms decided, probability
    while stack:
        script, weight = stack.pop()
        if len(script) not in guesses:  # no guess: first see whether the rule stops here
            result = run(script)
            if result[0] == "leaf":
                outcomes.append(leaf(result, weight, script))
                continue
        sides = split(script)
        if sides is None:  # the guessed draw never came: the rule stopped before it
            outcomes.append(
                leaf(run(script + (guesses[len(script)] * (1 - _GUESS_MARGIN),)), weight, script)
            )
            continue
        for u, prob in sides:
            if prob > 0:
                stack.append((script + (u,), weight * prob))

    # A placeholder stands for its whole distribution only if the rule passes the drawn
    # token through untouched: check once per distribution with a real token.
    checked = set() if checked is None else checked
    for o in outcomes:
        for j, dist in enumerate(o.draws):
            key = dist.numpy().tobytes()
            if key in checked:
                continue
            checked.add(key)
            token = int(dist.argmax())
            again = run(o.uniforms, {j: token})
            expected = tuple(token if t == _PLACEHOLDER - j else t for t in o.emitted)
            if again[0] != "leaf" or again[1] != expected:
                raise _refuse("treats a drawn token other than by passing it on")
    return outcomes


# --- exact enumeration -------------------------------------------------------------


def _as_distribution(x: torch.Tensor, name: str) -> torch.Tensor:
    x = torch.as_tensor(x).detach().to(torch.float64)
    if x.dim() != 1:
        raise ValueError(f"{name} must be one distribution of shape (V,), got {tuple(x.shape)}")
    if not torch.isfinite(x).all() or (x < 0).any() or abs(float(x.sum()) - 1) > 1e-6:
        raise ValueError(f"{name} must be finite, >= 0 and sum to 1")
    return x


def exact_first_token_distribution(
    p: torch.Tensor, q: torch.Tensor, replacement: Replacement = residual_distribution
) -> torch.Tensor:
    """The formula: first-token distribution for target ``p``, draft ``q`` (both (V,)) and
    the rule that draws from ``replacement`` after a rejection. Runs no rule."""
    p = p.to(torch.float64)
    q = q.to(torch.float64)
    support = q > 0
    accept = torch.zeros_like(q)
    accept[support] = torch.clamp(p[support] / q[support], max=1.0)
    reject_mass = float((q * (1 - accept)).sum())
    return q * accept + reject_mass * replacement(p, q)


def exact_mismatched_distribution(
    p: torch.Tensor,
    drawn_from: torch.Tensor,
    claimed: torch.Tensor,
    replacement: Replacement = residual_distribution,
) -> torch.Tensor:
    """First-token distribution when the proposal is drawn from ``drawn_from`` but the
    verifier is told it came from ``claimed``.

    This is the bug of a drafter that samples at one temperature and reports the
    probabilities of another. The verifier divides by ``claimed`` and subtracts it
    in the residual, while proposals arrive with frequencies ``drawn_from``:

        P(y) = drawn(y)·a(y) + sum_x drawn(x)·(1 - a(x)) · r(y),  a = min(1, p/claimed).

    With ``claimed == drawn_from`` this is :func:`exact_first_token_distribution`.
    """
    p = _as_distribution(p, "p")
    drawn = _as_distribution(drawn_from, "drawn_from")
    claimed = _as_distribution(claimed, "claimed")
    if ((drawn > 0) & (claimed <= 0)).any():
        raise ValueError(
            "claimed must be > 0 wherever drawn_from is: the verifier refuses a proposal "
            "its draft distribution says is impossible"
        )
    accept = torch.zeros_like(p)
    support = claimed > 0
    accept[support] = torch.clamp(p[support] / claimed[support], max=1.0)
    reject_mass = float((drawn * (1 - accept)).sum())
    return drawn * accept + reject_mass * replacement(p, claimed)


def exact_output_distribution(
    rule: Rule,
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    params: SamplingParams,
    drawn_from: torch.Tensor | None = None,
) -> torch.Tensor:
    """Exact first-token distribution (V,) of ``rule``, by running it on every branch.

    For each proposal x that ``drawn_from`` (default: ``draft_probs``) can produce, the
    rule is called as :func:`~specdec_lib.engine.generate.speculative_generate` calls it
    for a one-token draft, ``rule(logits, draft_probs[None], [x], params, generator)``,
    with an :class:`EnumeratedDraws` for the generator (:func:`enumerate_outcomes`);
    the branches' first tokens, weighted by ``drawn_from[x]`` and their probabilities,
    are the distribution. ``target_logits`` (V,) are raw, as the rule receives them;
    ``draft_probs`` (V,) is what the drafter reports. Any function with the rule's
    signature can be enumerated, provided its randomness comes from the generator.
    """
    if params.greedy:
        raise ValueError("params.temperature must be > 0: greedy verification is not sampled")
    logits = torch.as_tensor(target_logits).detach()
    if logits.dim() != 1:
        raise ValueError(f"target_logits must have shape (V,), got {tuple(logits.shape)}")
    q = _as_distribution(draft_probs, "draft_probs")
    drawn = q if drawn_from is None else _as_distribution(drawn_from, "drawn_from")
    if q.shape != logits.shape or drawn.shape != logits.shape:
        raise ValueError("target_logits, draft_probs and drawn_from must all have shape (V,)")
    if ((drawn > 0) & (q <= 0)).any():
        raise ValueError(
            "draft_probs must be > 0 wherever drawn_from is: the verifier refuses a proposal "
            "its draft distribution says is impossible"
        )
    p = process_logits(logits, params)  # only to guess where each acceptance switches
    rows = logits.unsqueeze(0).repeat(2, 1)  # (k+1, V) with k = 1; row 1 is the bonus row
    reported = q.unsqueeze(0)  # (1, V)
    vocab_size = logits.shape[-1]
    out = torch.zeros(vocab_size, dtype=torch.float64)
    checked: set[bytes] = set()
    with _answering():
        for x in torch.nonzero(drawn > 0).flatten().tolist():
            branches = enumerate_outcomes(
                lambda g, x=x: rule(rows, reported, [x], params, g),
                {0: min(1.0, float(p[x]) / float(q[x]))},
                checked,
            )
            for o in branches:
                out += float(drawn[x]) * o.probability * o.token_distribution(0, vocab_size)
    return out


def exact_round_outcomes(
    rule: Rule,
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    proposed: Sequence[int],
    params: SamplingParams,
) -> list[Outcome]:
    """Every branch of one whole verification round of ``rule``, with its probability.

    ``target_logits`` (k+1, V), ``draft_probs`` (k, V) and ``proposed`` (k tokens) are
    the rule's own arguments; the rule runs once per branch (:func:`enumerate_outcomes`),
    with uniform draw i guessed to decide position i at min(1, p(x_i)/q(x_i)).
    """
    if params.greedy:
        raise ValueError("params.temperature must be > 0: greedy verification is not sampled")
    logits = torch.as_tensor(target_logits).detach()
    q = torch.as_tensor(draft_probs).detach().to(torch.float64)
    ids = [int(t) for t in proposed]
    if (
        logits.dim() != 2
        or q.dim() != 2
        or logits.shape[0] != len(ids) + 1
        or q.shape[0] != len(ids)
    ):
        raise ValueError(
            "target_logits must have shape (k+1, V) and draft_probs (k, V) for k proposed tokens"
        )
    p = process_logits(logits, params)
    guesses = {
        i: min(1.0, float(p[i, x]) / float(q[i, x])) for i, x in enumerate(ids) if q[i, x] > 0
    }
    with _answering():
        return enumerate_outcomes(lambda g: rule(logits, q, ids, params, g), guesses)


@dataclass(frozen=True)
class ResidualDecomposition:
    """The pieces of the residual rule for one draft position (all (V,) float64).

    ``accepted`` = q·min(1, p/q) = min(p, q), the mass that arrives by acceptance;
    ``shortfall`` = max(0, p - q), what acceptance leaves each token short of p;
    ``rejected_mass`` = the chance of a rejection, which equals ``shortfall.sum()``;
    ``residual`` = the shortfall normalised; ``output`` = accepted + rejected_mass · residual.
    """

    p: torch.Tensor
    q: torch.Tensor
    accepted: torch.Tensor
    shortfall: torch.Tensor
    residual: torch.Tensor
    rejected_mass: float
    output: torch.Tensor


def residual_decomposition(p: torch.Tensor, q: torch.Tensor) -> ResidualDecomposition:
    """Split the residual rule's output into what acceptance and rejection each contribute."""
    p = _as_distribution(p, "p")
    q = _as_distribution(q, "q")
    accepted = torch.minimum(p, q)
    shortfall = (p - q).clamp(min=0)
    rejected_mass = 1.0 - float(accepted.sum())
    residual = residual_distribution(p, q)
    return ResidualDecomposition(
        p=p,
        q=q,
        accepted=accepted,
        shortfall=shortfall,
        residual=residual,
        rejected_mass=rejected_mass,
        output=accepted + rejected_mass * residual,
    )
