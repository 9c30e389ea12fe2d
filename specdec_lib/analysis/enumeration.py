"""A function's random draws, enumerated: every branch it can take, with its probability.

To know the exact output distribution of a sampling function (a verification rule, a
drafter's proposal), run it once per branch of its random draws instead of sampling it.
:func:`enumerate_outcomes` hands the function an :class:`EnumeratedDraws` in place of a
``torch.Generator``; while it runs, ``torch.rand`` and ``torch.multinomial`` answer
calls that carry that stand-in, and any other source of randomness is refused. A
uniform draw can only matter through comparisons with it, so the enumerator finds the
value where the function's behaviour changes (one comparison, u < threshold, is assumed
and checked at the threshold) and follows both sides with their probabilities. A
categorical draw returns a placeholder token and records the distribution it was asked
to draw from; the emitted placeholder then stands for that whole distribution (checked
once per distribution by re-running with a real token). What it yields is exact to within
2^-53, the spacing of ``torch.rand``'s float64 draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

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
    the same rule to check each distribution once.
    """
    with _answering():
        return _enumerate(call, guesses or {}, set() if checked is None else checked)


def _enumerate(
    call: Callable[[EnumeratedDraws], tuple[list[int], int]],
    guesses: Mapping[int, float],
    checked: set[bytes],
) -> list[Outcome]:
    """:func:`enumerate_outcomes`, while ``torch.rand`` and ``torch.multinomial`` answer."""
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
