"""The greedy acceptance rule, in one module: the answer in the student's form, its slips,
and the check. No chapter asks for it; it is there for a teacher who sets the acceptance
loop (chapter 4 shows the library's).

``accept_greedy(target_logits, proposed) -> (emitted, n_accepted)``: accept the proposals
while each equals the argmax of its row (``proposed[i]`` against row i), then emit the
target's own token from the row after the last accepted one, a bonus token from row k when
all k are accepted. The slips are the classic mistakes of this loop: no bonus token, rows
read one position late, the rejected proposal emitted instead of the target's token, and
proposals kept after the first mismatch. Two of them, the missing bonus and the shifted
rows, are slips of the residual rule too (:mod:`.accept_sampled` builds its own from them).
The cases hold every number of matching proposals for k = 0 to 6, and proposals that
match again after a mismatch, which a correct rule must not keep.
"""

from __future__ import annotations

import torch

from specdec_lib.engine.tree import walk_greedy
from specdec_lib.engine.verify import accept_greedy, greedy_rule

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import as_verification, call_student, forbidden

# --- the answer, and its slips ---------------------------------------------------------


def one_row_late(target_logits: torch.Tensor) -> torch.Tensor:
    """Row i becomes row i + 1 (the last row stays): proposed[i] meets the wrong row."""
    return torch.cat([target_logits[1:], target_logits[-1:]])  # (k+1, V)


def without_bonus(result: tuple[list[int], int], k: int) -> tuple[list[int], int]:
    """A rule's ``(emitted, n_accepted)`` without the bonus token of a round that accepted
    all k proposals."""
    emitted, n = result
    return (emitted[:-1], n) if n == k > 0 else (emitted, n)


def _greedy_emits_rejected(target_logits, proposed):
    emitted, n = accept_greedy(target_logits, proposed)
    return (emitted[:-1] + [int(proposed[n])] if n < len(proposed) else emitted), n


def _greedy_keeps_going(target_logits, proposed):
    """Each proposal verified on its own, as a one-token proposal; the bonus from row k."""
    rows = enumerate(proposed)
    kept = [int(x) for i, x in rows if accept_greedy(target_logits[i : i + 2], [x])[1]]
    return kept + accept_greedy(target_logits[len(proposed) :], [])[0], len(kept)


def _greedy_reference(target_logits, proposed):
    """Correct: the engine's rule (a function of the grader's, so that a student handing in
    the engine's own ``accept_greedy`` is told so)."""
    return accept_greedy(target_logits, proposed)


register(
    "check_accept_greedy",
    _greedy_reference,
    ("no bonus token", lambda t, x: without_bonus(accept_greedy(t, x), len(x)), D.NO_BONUS),
    ("off-by-one rows", lambda t, x: accept_greedy(one_row_late(t), x), D.OFF_BY_ONE),
    ("emits the rejected proposal", _greedy_emits_rejected, D.EMITS_REJECTED),
    ("keeps going after a mismatch", _greedy_keeps_going, D.KEEPS_GOING),
)


# --- the check -------------------------------------------------------------------------


def _greedy_cases(seed: int) -> list[tuple[torch.Tensor, tuple[int, ...]]]:
    """Vocabularies of 5 and 256, k = 0..6, every number of matching proposals, and
    proposals that match again after a mismatch (a correct rule must not keep those)."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for vocab, k, _ in [(v, k, r) for v in (5, 256) for k in range(7) for r in range(2)]:
        for n_match in range(k + 1):
            logits = torch.randn(k + 1, vocab, generator=gen)  # (k+1, V)
            best = logits.argmax(-1).tolist()
            proposed = best[:n_match]
            for i in range(n_match, k):
                again = i > n_match and torch.rand((), generator=gen) < 0.5
                shift = 0 if again else int(torch.randint(1, vocab, (), generator=gen))
                proposed.append((best[i] + shift) % vocab)
            cases.append((logits, tuple(proposed)))
    return cases


check_accept_greedy = ExactCheck(
    "check_accept_greedy",
    lambda seed: _greedy_cases(seed),
    lambda fn, c: as_verification(call_student(fn, "accept_greedy", c[0].clone(), list(c[1])), ""),
    lambda c: f"argmax per row = {c[0].argmax(-1).tolist()}, proposed = {list(c[1])}",
    """Check ``accept_greedy(target_logits, proposed) -> (emitted, n_accepted)`` on about
    110 random cases: k from 0 to 6, every number of matching proposals.""",
    forbidden(accept_greedy, greedy_rule, walk_greedy),
)
