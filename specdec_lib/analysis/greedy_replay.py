"""Greedy speculation replayed without the target: its counts, predicted from what it writes.

Greedy speculative decoding writes exactly what plain greedy decoding writes, so once that
output is known nothing about a round is left to the target. A round drafts from the
context so far (prompt plus the output written), keeps the longest prefix of the proposal
that the output continues with, and emits that prefix plus one token of the target's (the
correction, or the bonus after a full accept), which the next round's context then holds.
:func:`replay_greedy` plays those rounds with the drafter alone and returns the
``SpeculationStats`` that ``speculative_generate`` would return, every count and every
round record equal: a prediction made before the run, which the run can refute.

``greedy_round_openings`` (in ``benchmarks/measures.py``) replays rounds from a draft
model's token-by-token agreement, which does not depend on where a round starts. A copying
drafter's proposal does (it looks up the suffix of the context the round starts from), so
here each round asks the drafter itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from specdec_lib.checks import check_ids, check_int, check_proposal
from specdec_lib.engine.drafters import VOCAB_SIZE, Drafter, LibraryDrafter, NgramDrafter
from specdec_lib.engine.generate import RoundRecord, SpeculationStats
from specdec_lib.engine.sampling import SamplingParams


def common_prefix(proposed: Sequence[int], written: Sequence[int]) -> int:
    """How many leading ``proposed`` tokens ``written`` starts with: the drafts greedy
    verification accepts when the target goes on to write ``written``."""
    n = 0
    while n < min(len(proposed), len(written)) and proposed[n] == written[n]:
        n += 1
    return n


def replay_greedy(
    prompt: Sequence[int],
    output: Sequence[int],
    k: int,
    drafter: Drafter | None = None,
    stats: SpeculationStats | None = None,
) -> SpeculationStats:
    """The stats of greedy ``speculative_generate(target, drafter, prompt,
    SamplingParams(max_tokens=len(output)), k, stats=...)``, given ``output``, what plain
    greedy decoding of ``target`` writes after ``prompt`` with the same parameters.

    ``drafter`` defaults to prompt lookup (``NgramDrafter()``); any drafter whose greedy
    proposal depends only on the context replays exactly (a draft model too, which then
    runs). Pass ``stats`` to pool several replays, as with ``speculative_generate``.

    The engine's budget rules are followed, because they decide the counts: a round never
    drafts past ``max_tokens`` (it drafts at most ``k`` and at most the tokens left but one,
    as the target adds one), so the last round may draft fewer than ``k`` or nothing; the
    prefill shares the first round's pass, so target passes equal rounds; and the engine
    has no stop token, so only the budget ends a run.
    """
    drafter = NgramDrafter() if drafter is None else drafter
    if not (hasattr(drafter, "name") and callable(getattr(drafter, "propose", None))):
        raise ValueError(f"drafter must have a name and a propose method, got {drafter!r:.60}")
    vocab = getattr(drafter, "vocab_size", VOCAB_SIZE)
    context = check_ids("prompt", prompt, vocab)
    written = check_ids("output", output, vocab)
    if not context:
        raise ValueError("prompt must hold at least 1 token, got an empty prompt")
    if not written:
        raise ValueError("output must hold at least 1 token (max_tokens >= 1), got none")
    k = check_int("k", k)
    if stats is not None and not isinstance(stats, SpeculationStats):
        raise ValueError(f"stats must be a SpeculationStats or None, got {type(stats).__name__}")
    stats = SpeculationStats() if stats is None else stats
    params = SamplingParams(max_tokens=len(written))
    done = 0
    while done < len(written):
        m = min(k, len(written) - done - 1)
        if isinstance(drafter, LibraryDrafter):  # trusted with its context, as the engine does
            proposal = drafter.draft(context, m, params, None)
        else:
            proposal = drafter.propose(context, m, params)
            proposal = check_proposal(proposal, drafter.name, m, params, vocab)
        n_acc = common_prefix(proposal.tokens, written[done:])
        emitted = written[done : done + n_acc + 1]
        # The cache keeps the pending token and the accepted drafts; the rest rolls back.
        record = RoundRecord(proposal.tokens, n_acc, emitted, k, len(context) + n_acc)
        stats.record(record, proposal.draft_passes)
        context += emitted
        done += len(emitted)
    return stats
