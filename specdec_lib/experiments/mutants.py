"""Chapter 7b's bugs from the wild, as one-change mutants of the course's engine.

Each :class:`Mutant` is modelled on a bug reported in a public engine's tracker. It is
not a second implementation: while :meth:`Mutant.active` is entered, exactly one thing in
the real engine is different (a function rebound with :func:`rebind`, or the drafter
wrapped), and everything else is the code that ships. So a test that catches the mutant
catches that bug in the code the course runs, and a test that misses it would miss it
there too. The tests that hunt them are :mod:`specdec_lib.experiments.mutant_battery`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, replace
from unittest import mock

import torch

from specdec_lib.engine import drafters as drafters_module
from specdec_lib.engine import verify
from specdec_lib.engine.drafters import (
    Drafter,
    Proposal,
)
from specdec_lib.engine.sampling import SamplingParams

# --- one change to the engine -----------------------------------------------------------


def rebind(original: object, replacement: object) -> ExitStack:
    """Patch every name in the library's loaded modules that refers to ``original``.

    The engine imports its rules by name into more than one module (``verify`` defines
    them, ``generate`` calls them); rebinding every reference, wherever the engine keeps
    it, is what makes the change the same for every caller."""
    stack = ExitStack()
    for module in [m for n, m in list(sys.modules.items()) if n.startswith("specdec_lib")]:
        for name, value in list(vars(module).items()):
            if value is original:
                stack.enter_context(mock.patch.object(module, name, replacement))
    return stack


class _TorchWith:
    """The torch module with ``rand`` replaced: patched into ``verify`` only, so the
    change reaches the acceptance uniforms and nothing else that draws."""

    def __init__(self, rand: Callable[..., torch.Tensor]) -> None:
        self.rand = rand

    def __getattr__(self, name: str) -> object:
        return getattr(torch, name)


@dataclass(frozen=True)
class Mutant:
    """A named bug: the public thread it is modelled on, and the one change that makes it."""

    name: str
    thread: str  # e.g. "huggingface/transformers#32867"
    url: str
    fix: str  # the thread that fixed it, or "" when none is cited
    description: str
    patches: Callable[[], AbstractContextManager] = ExitStack
    wrap_drafter: Callable[[Drafter], Drafter] | None = None
    #: Where the output law comes from (:mod:`specdec_lib.experiments.mutant_battery`):
    #: "enumerated" (the mutated code run on every branch of its draws), "reused" (the
    #: first token enumerated, the round from theory: one uniform meets two thresholds,
    #: and the enumeration assumes one) or "correct" (theory: uniforms from another
    #: stream are still independent uniforms, so one request's law is the correct one;
    #: the enumerator cannot hold a stream the rule does not take from its generator).
    law: str = "enumerated"

    @contextmanager
    def active(self) -> Iterator[None]:
        """The engine with this mutant's change applied, for the duration of the block."""
        with self.patches():
            yield

    def drafter(self, base: Drafter) -> Drafter:
        """``base``, wrapped if this mutant changes the drafter rather than the engine."""
        return base if self.wrap_drafter is None else self.wrap_drafter(base)


def _argmax_sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    return int(probs.argmax())


def _drafts_greedily() -> AbstractContextManager:
    # Only the drafter's ``sample``: verification still samples its replacements.
    return mock.patch.object(drafters_module, "sample", _argmax_sample)


class _ReportsUnfiltered:
    """A drafter that samples from its filtered distribution (top-k, top-p) but reports
    the unfiltered one as q: the wrapped drafter's own rows, before the filters."""

    def __init__(self, inner: Drafter) -> None:
        self.inner = inner
        self.name = f"{inner.name}, unfiltered q"

    def propose(
        self,
        context: list[int],
        k: int,
        params: SamplingParams,
        generator: torch.Generator | None = None,
    ) -> Proposal:
        unfiltered: list[torch.Tensor] = []
        real = drafters_module.process_logits

        def recording(logits: torch.Tensor, p: SamplingParams) -> torch.Tensor:
            unfiltered.append(real(logits, replace(p, top_k=None, top_p=1.0)))
            return real(logits, p)

        with mock.patch.object(drafters_module, "process_logits", recording):
            proposal = self.inner.propose(context, k, params, generator)
        if not proposal.tokens or params.greedy:
            return proposal
        return Proposal(proposal.tokens, torch.stack(unfiltered), proposal.draft_passes)


def _default_params_in_verification() -> AbstractContextManager:
    real = verify.process_logits

    def defaults(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        return real(logits, SamplingParams(temperature=1.0, max_tokens=params.max_tokens))

    return mock.patch.object(verify, "process_logits", defaults)


def _target_replacement() -> AbstractContextManager:
    real = verify.sampled_rule

    def rule(*args, replacement=None, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if len(args) > 5:
            args = args[:5]
        return real(*args, replacement=verify.target_distribution, **kwargs)

    return rebind(real, rule)


def _one_uniform_per_round() -> AbstractContextManager:
    real = verify.sampled_rule

    def rule(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        first: list[torch.Tensor] = []

        def rand(*size, generator=None, dtype=None, **kw):  # noqa: ANN002, ANN003, ANN202
            if not first:
                first.append(torch.rand(*size, generator=generator, dtype=dtype, **kw))
            return first[0].clone()

        with mock.patch.object(verify, "torch", _TorchWith(rand)):
            return real(*args, **kwargs)

    return rebind(real, rule)


#: Seed of the one stream the seedless mutant draws every request's uniforms from.
_FIXED_SEED = 0


def _uniforms_ignore_the_seed() -> AbstractContextManager:
    streams: dict[int, tuple[object, torch.Generator]] = {}

    def rand(*size, generator=None, dtype=None, **kw):  # noqa: ANN002, ANN003, ANN202
        if id(generator) not in streams:  # the request's generator is kept, so ids stay unique
            streams[id(generator)] = (generator, torch.Generator().manual_seed(_FIXED_SEED))
        return torch.rand(*size, generator=streams[id(generator)][1], dtype=dtype, **kw)

    return mock.patch.object(verify, "torch", _TorchWith(rand))


def _last_index_on_ties() -> AbstractContextManager:
    real = verify.greedy_rule

    def rule(target_logits: torch.Tensor, proposed: list[int]) -> tuple[list[int], int]:
        # The real rule on the vocabulary read backwards: its argmax (the first maximum)
        # is then the last maximum of the original order.
        v = target_logits.shape[-1]
        emitted, n = real(target_logits.flip(-1), [v - 1 - t for t in proposed])
        return [v - 1 - t for t in emitted], n

    return rebind(real, rule)


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "greedy draft",
        "huggingface/transformers#32867",
        "https://github.com/huggingface/transformers/issues/32867",
        "huggingface/transformers#33534",
        "the drafter proposes its argmax, but reports its sampled distribution as q",
        _drafts_greedily,
    ),
    Mutant(
        "unfiltered q",
        "huggingface/transformers#47932",
        "https://github.com/huggingface/transformers/issues/47932",
        "huggingface/transformers#47961",
        "the drafter samples after top-k, but reports the distribution before it as q",
        wrap_drafter=_ReportsUnfiltered,
    ),
    Mutant(
        "target without params",
        "vllm-project/vllm#9834",
        "https://github.com/vllm-project/vllm/issues/9834",
        "vllm-project/vllm#10198",
        "verification computes p with default parameters (temperature 1, no top-k or top-p)",
        _default_params_in_verification,
    ),
    Mutant(
        "one uniform per round",
        "",
        "",
        "",
        "the first uniform of a round is reused at every drafted position",
        _one_uniform_per_round,
        law="reused",
    ),
    Mutant(
        "seedless uniforms",
        "vllm-project/vllm#6038",
        "https://github.com/vllm-project/vllm/issues/6038",
        "vllm-project/vllm#6034",
        "the acceptance uniforms come from one fixed-seed stream per request, not its generator",
        _uniforms_ignore_the_seed,
        law="correct",
    ),
    Mutant(
        "resample from target",
        "the course's own (chapter 7)",
        "",
        "",
        "on rejection, the replacement is drawn from p instead of the residual",
        _target_replacement,
    ),
    Mutant(
        "tie broken last",
        "",
        "",
        "",
        "greedy verification breaks a tie of the target's logits at the last index",
        _last_index_on_ties,
    ),
)

#: The correct engine, run through the same tests: its catch rate is the false-alarm rate.
CORRECT = Mutant("correct engine", "", "", "", "no change")


def mutant(name: str) -> Mutant:
    """The mutant called ``name`` (or :data:`CORRECT` for ``"correct engine"``)."""
    for m in (CORRECT, *MUTANTS):
        if m.name == name:
            return m
    raise ValueError(f"name must be one of {[m.name for m in (CORRECT, *MUTANTS)]}, got {name!r}")
