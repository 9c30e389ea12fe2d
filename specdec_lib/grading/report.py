"""What a check says about a student's code: a verdict, a message, a diagnosis, the numbers.

Each :data:`Diagnosis` carries its headline and its advice: every failing message is that
advice followed by the numbers of the case that showed it, one style for every check.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field
from enum import Enum, unique
from typing import Any


class _Diagnosis(Enum):
    """A named reason for a failing report: ``(headline, advice)``, each headline its own."""

    @property
    def headline(self) -> str:
        return self.value[0]

    @property
    def advice(self) -> str:
        """What to do about it: the first sentence of every message with this diagnosis."""
        return self.value[1]

    @property
    def key(self) -> str:
        """The diagnosis as it is written in a grading log or CSV: ``not_implemented``."""
        return self.name.lower()


def _table(text: str) -> dict[str, tuple[str, str]]:
    """``NAME | headline | advice`` rows."""
    rows = (line.split(" | ") for line in text.strip("\n").splitlines())
    return {name: (headline, advice) for name, headline, advice in rows}


#: Every diagnosis: its name, its headline (the verdict's), its advice (the message's start).
Diagnosis = unique(
    _Diagnosis(
        "Diagnosis",
        _table("""
NOT_IMPLEMENTED | not attempted yet (NotImplementedError) | Replace `raise NotImplementedError()`.
RAISED | raised an exception | Fix the error and run this check again.
NOT_A_FUNCTION | not a function | Pass the function itself, without calling it.
WRONG_TYPE | returned the wrong type | Return what the exercise asks for.
TIMEOUT | ran too long | Look for a loop whose condition never changes.
NO_PROGRESS | stopped making progress | Every round must emit at least one token.
GRADER_ERROR | the check itself could not run | Please report this.
NOTEBOOK_ERROR | the notebook raised an error or did not run to the end | Fix its first error.
NOT_RUN | the check never ran | Keep its cell, and run the notebook to the end.
DELEGATES | calls the library's own implementation | Write it yourself; do not call the library's.
IGNORES_GENERATOR | draws from another generator | Draw everything with the generator passed in.
WRONG_ANSWER | differs from the library's answer | Compare your code with the exercise.
EARLIEST_MATCH | uses the earliest match instead of the latest | Copy after the latest occurrence.
SHORTEST_FIRST | tries short suffixes before long ones | Try n = max_n down to min_n, in that order.
NEVER_PROPOSES | proposes nothing where a match exists | Skip the suffix itself: nothing follows it.
COPIES_THE_MATCH | off by one: copies the match's last token | Copy from start + n, after the match.
IGNORES_K | proposes more than k tokens | Propose at most k tokens.
IGNORES_MIN_N | matches suffixes shorter than min_n | Never match a suffix shorter than min_n.
IGNORES_MAX_N | matches suffixes longer than max_n | Start from n = max_n at most.
NO_BONUS | no bonus token when all proposals are accepted | Then emit a bonus token from row k.
OFF_BY_ONE | off by one between proposals and target rows | Verify proposed[i] with row i.
EMITS_REJECTED | emits the rejected proposal instead of the target's token | Emit the target's.
KEEPS_GOING | keeps accepting after the first mismatch | Stop at the first mismatch.
INVALID_OUTPUT | emitted tokens inconsistent with the proposals | Emit the accepted, then one more.
ACCEPT_WITH_P_TARGET | accepting with probability p_target(x) alone | Accept with min(1, p/q).
RESAMPLE_FROM_TARGET | resampling from p_target on rejection | Resample from norm(max(0, p - q)).
UNNORMALISED_RESIDUAL | residual not renormalised | Divide max(0, p - q) by its sum first.
IGNORES_PARAMS | sampling parameters not applied to the target | Use process_logits(logits, params).
WRONG_ACCEPTANCE | wrong acceptance probability | Accept x with min(1, p(x)/q(x)).
WRONG_DISTRIBUTION | output not distributed as p_target | Check the acceptance test and residual.
WRONG_LENGTH | returns the wrong number of tokens | Return exactly the number of tokens asked for.
OUTPUT_MISMATCH | output differs from plain greedy decoding | Verify with the last m + 1 rows.
NOT_SPECULATING | one target pass per token: no speculation | Verify all proposals in one pass.
TOO_MANY_PASSES | more target passes than speculation needs | Make each round one target pass.
TIED_TWICE | counts the tied embedding twice | Count each tensor once, as model.parameters() does.
NO_KV_CACHE | leaves out the KV cache | Add a key and a value per layer per context token.
COUNTS_PARAMETERS | counts parameters, not bytes | Multiply by each parameter's element_size().
KEYS_ONLY | counts keys but not values | The cache holds a key AND a value per layer.
IGNORES_GQA | caches a key and a value for every query head | Cache config.kv_heads heads only.
INVERTED_RATIO | the ratio is upside down | Solve (T + c D) / E = 1 for c: (E - T) / D.
TARGET_PASSES_FREE | leaves out the target passes | The T target passes count too: (E - T) / D.
PER_TOKEN | divides by the emitted tokens | Divide the passes saved by the draft passes D.
MISSES_BUG | misses the biased rule | Raise its power: more rounds, or a sharper statistic.
FALSE_ALARMS | fails the correct rule more often than its alpha | Test once, at a size fixed first.
WRONG_NULL | fails the correct rule almost every time | Test against process_logits(logits, params).
IGNORES_SEED | gives the same p-value at every seed | Draw every round from the seed you are given.
WRONG_TAIL | tests the wrong tail | The bug makes d too frequent: test that tail.
COUNTS_PENDING | counts the pending token | The cache holds the context but its last token.
NO_ROLLBACK | forgets the rollback | Rejected positions are cropped from the cache.
ACCEPTED_ONLY | counts only the accepted proposals | The context grows by every emitted token.
RESETS_CACHE | resets the cache instead of cropping it | Crop each row to what it keeps; never to 0.
SHARED_ROLLBACK | rolls every row back by the same count | Roll each row back by its own rejections.
WRONG_ROW | gives rows each other's accepted counts | Look each row's count up by its request id.
DROPS_PENDING | drops the pending token the pass wrote | Keep it: the length grows by 1 + accepted.
FREES_PARTIAL_BLOCK | frees a partly used block | Keep every block that holds a kept entry.
DRAFT_LAST_DRAFT | keeps a draft the draft model never fed | Its last draft never entered its cache.
DRAFT_NO_ROLLBACK | forgets the draft model's rollback | The draft keeps only the drafts accepted.
DRAFT_REWINDS_BY_COUNT | rewinds the draft by the rejected count | Count from what it fed.
DRAFT_EMPTY_ROUND | moves the draft's cache in an empty round | No drafts: it stays as it was.
SPOIL_RATE | keeps the wrong share of proposals | Keep each token with probability alpha.
INVERTED_SPOIL | spoils with probability alpha | Spoil with probability 1 - alpha.
DEPENDENT_SPOILS | spoils tokens together | Draw one coin per token.
POINT_ESTIMATE | claims a crossover from the point estimate | Read the interval: speedup_high < 1.
WRONG_END | reads the wrong end of the interval | Below 1 means speedup_high < 1.
ASSUMES_SORTED | assumes the rows are sorted by batch size | Return the smallest batch size.
NO_TARGET_TOKEN | leaves out the target's own token | A round adds one token of the target's.
ADDS_RATES | adds the rates instead of multiplying them | Draft i needs drafts 0 to i all kept.
FIRST_RATE_ONLY | uses the first rate at every position | Draft i is accepted at rates[i].
ONE_RATE_TOO_FEW | multiplies one rate too few | Draft i is kept at rates[0] x ... x rates[i].
POSITIONS_BY_INDEX | position ids by node index, not by depth | Each node sits one past its parent.
SEES_NON_ANCESTOR | a node sees a sibling or another non-ancestor | Mask all but its ancestors.
MISSES_SELF | a node does not see itself | A node attends to its own slot too.
MISSES_CONTEXT | a node does not see the context | Every node attends to every context slot.
MISSES_ANCESTORS | a node does not see every ancestor | Follow the parents up to the root.
STALE_RESIDUAL | residual not updated between siblings | Test each child against the residual.
DIVIDES_BY_Q | divides by q, not by what each child was drawn from | Take the siblings out of q.
SEES_THE_FUTURE | drafts from tokens not yet written | Draft from prompt + output[:done] only.
DRAFTS_PAST_THE_END | drafts past the tokens left to write | Draft min(k, tokens left - 1).
LAGGING_CONTEXT | drafts from a context without the target's last token | Add every emitted token.
BATCH_MEAN | plans every row with the batch's mean acceptance | Plan each row with its own alpha.
BLIND_TO_LOAD | prices the round as if the batch were one row | B rows cost cost.predict(B, w).
NEVER_OFF | never turns speculation off | Try w = 0 too: under load, not speculating can win.
TOKENS_OFF_BY_ONE | counts expected tokens off by one | Drafting k emits 1 + alpha + ... + alpha^k.
IGNORES_DRAFTING | leaves the drafting time out | Add draft_seconds per drafted token to the round.
OWN_PROBABILITY | ranks a node by its own probability, not its path's | Sum logprobs along its path.
ORPHANS | keeps a node without its parent | Rank no node above its parent; ties go to the parent.
SKIPS_ELDER | keeps a node without an elder sibling | Rank none above its elder; ties go to it.
RANK_ORDER | returns the kept nodes in rank order, not tree order | Return them in increasing order.
TIES_REVERSED | keeps the later node first on a tie | On equal ranks keep the lower index first.
BUDGET_OFF_BY_ONE | keeps one node too many or too few | Keep min(budget, len(parents)) nodes.
KEEPS_WRONG_COUNT | keeps the wrong number of nodes | Keep min(budget, len(parents)) nodes.
"""),
        module=__name__,
        qualname="Diagnosis",
    )
)


def _format_value(value: Any) -> str:
    """A number as evidence shows it: four significant digits, ``nan`` spelled out."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


@dataclass
class Report:
    """The verdict of one check on one student function; ``bool(report)`` is ``passed``;
    ``evidence`` holds the numbers the verdict rests on, for display only."""

    check: str
    subject: str
    passed: bool
    message: str
    diagnosis: Diagnosis | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def attempted(self) -> bool:
        """False for a stub that still raises ``NotImplementedError``."""
        return self.diagnosis is not Diagnosis.NOT_IMPLEMENTED

    @property
    def headline(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED" if self.attempted else "TO DO"
        text = f"{verdict} {self.check}({self.subject})"
        return text + (f": {self.diagnosis.headline}" if self.diagnosis else "")

    def __str__(self) -> str:
        lines = [self.headline, "", self.message]
        if self.evidence:
            lines += ["", "evidence:"]
            lines += [f"  {key}: {_format_value(value)}" for key, value in self.evidence.items()]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.passed else "#c62828" if self.attempted else "#8d6e00"
        rows = "".join(
            f"<tr><td style='padding:0 1em 0 0'>{html.escape(str(k))}</td>"
            f"<td><code>{html.escape(_format_value(v))}</code></td></tr>"
            for k, v in self.evidence.items()
        )
        evidence = f"<details><summary>evidence</summary><table>{rows}</table></details>"
        return (
            f"<div style='border-left:4px solid {colour};padding:0.3em 0.8em;margin:0.3em 0'>"
            f"<strong style='color:{colour}'>{html.escape(self.headline)}</strong>"
            f"<p style='margin:0.4em 0'>{html.escape(self.message)}</p>"
            f"{evidence if rows else ''}</div>"
        )

    def raise_if_failed(self) -> Report:
        """Return the report if it passed; raise ``AssertionError`` with it if an attempt
        failed. A stub's report ("not attempted yet") is returned too, so that a notebook run
        top to bottom goes on to its next exercise, except under nbgrader's autograder or
        validator (``NBGRADER_EXECUTION`` set), where it raises ``NotImplementedError``: a
        test cell that raises scores nothing."""
        if self.passed:
            return self
        if not self.attempted:
            if os.environ.get("NBGRADER_EXECUTION"):
                raise NotImplementedError(str(self))
            return self
        raise AssertionError(str(self))

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for the grading log and the CSV of ``coursework.py grade``."""
        entry = dict(vars(self), diagnosis=self.diagnosis.key if self.diagnosis else "")
        return entry | {"evidence": {k: _format_value(v) for k, v in self.evidence.items()}}
