"""What a check says about a student's code: a verdict, a message, a diagnosis, the numbers.

Diagnoses are an :class:`~enum.Enum` so that a typo is an error, and each carries its
headline and its advice: every failing message is that advice followed by the numbers
of the case that showed it, one style for every check. The CSV of a graded class and
the catch-rate table of the graders speak the same words.
"""

from __future__ import annotations

import html
import math
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
    """``NAME | headline | advice`` rows; an indented line continues the row above."""
    rows: list[str] = []
    for line in text.strip("\n").splitlines():
        rows[-1:] = [rows[-1] + " " + line.strip()] if line.startswith(" ") else [*rows[-1:], line]
    return {name: (headline, advice) for name, headline, advice in (r.split(" | ") for r in rows)}


#: Every diagnosis: its name, its headline (the verdict's), its advice (the message's start).
Diagnosis = unique(
    _Diagnosis(
        "Diagnosis",
        _table("""
NOT_IMPLEMENTED | not implemented yet | Replace the `raise NotImplementedError()` line.
RAISED | raised an exception | Fix the error and run this check again.
NOT_A_FUNCTION | not a function | Pass the function itself, without calling it.
WRONG_TYPE | returned the wrong type | Return what the exercise asks for.
TIMEOUT | ran too long | Look for a loop whose condition never changes.
NO_PROGRESS | stopped making progress | Every round must emit at least one token.
GRADER_ERROR | the check itself could not run | Please report this.
NOTEBOOK_ERROR | the notebook raised an error or did not run to the end | Run the notebook top to
    bottom and fix the first error.
WRONG_ANSWER | differs from the library's answer | Compare your code with the exercise.
EARLIEST_MATCH | uses the earliest match instead of the latest | Copy what followed the latest
    earlier occurrence of the suffix, not the earliest.
SHORTEST_FIRST | tries short suffixes before long ones | Try n = max_n down to min_n and stop at the
    first n that occurred before.
NEVER_PROPOSES | proposes nothing where a match exists | Search only windows that end before the
    last token: the suffix itself has nothing after it.
COPIES_THE_MATCH | off by one: copies the match's last token | Propose what follows the match,
    context[start + n : start + n + k].
IGNORES_K | proposes more than k tokens | Propose at most k tokens.
IGNORES_MIN_N | matches suffixes shorter than min_n | Never match a suffix shorter than min_n; with
    no such match propose nothing.
IGNORES_MAX_N | matches suffixes longer than max_n | Start from n = max_n at most.
NO_BONUS | no bonus token when all proposals are accepted | When all k proposals are accepted, emit
    one more token from row k, the bonus.
OFF_BY_ONE | off by one between proposals and target rows | Row i scores the token after context +
    proposed[:i]: verify proposed[i] with row i.
EMITS_REJECTED | emits the rejected proposal instead of the target's token | At the first mismatch
    emit the target's own token, not the rejected proposal.
KEEPS_GOING | keeps accepting after the first mismatch | Stop at the first mismatch: later proposals
    followed a token that is not emitted.
INVALID_OUTPUT | emitted tokens inconsistent with the proposals | A round emits the accepted
    proposals, then exactly one token of the target.
ACCEPT_WITH_P_TARGET | accepting with probability p_target(x) alone | Accept x with probability
    min(1, p(x)/q(x)), not p(x).
RESAMPLE_FROM_TARGET | resampling from p_target on rejection | On rejection draw from norm(max(0, p
    - q)), not from p: it can never be a one-hot drafter's token.
UNNORMALISED_RESIDUAL | residual not renormalised | Divide max(0, p - q) by its sum before sampling
    from it.
IGNORES_PARAMS | sampling parameters not applied to the target | Process the target's logits with
    process_logits(target_logits, params).
WRONG_ACCEPTANCE | wrong acceptance probability | Accept x with min(1, p(x)/q(x)).
WRONG_DISTRIBUTION | output not distributed as p_target | Check the acceptance test and the residual
    against the theorem.
WRONG_LENGTH | returns the wrong number of tokens | Return exactly max_tokens new tokens: a round
    can emit one more than it drafts.
OUTPUT_MISMATCH | output differs from plain greedy decoding | Verify m proposals with the last m + 1
    rows of logits and keep what accept_greedy returns.
NOT_SPECULATING | one target pass per token: no speculation | Score all proposals in one target pass
    and keep every accepted token.
TOO_MANY_PASSES | more target passes than speculation needs | Each round costs one target pass over
    the context plus the proposals.
TIED_TWICE | counts the tied embedding twice | The embedding and the output layer share one tensor:
    count it once (model.parameters() does).
NO_KV_CACHE | leaves out the KV cache | A decode step also reads the cache: a key and a value per
    layer per context token.
COUNTS_PARAMETERS | counts parameters, not bytes | Multiply each parameter by its size in bytes
    (element_size(), 4 for float32).
KEYS_ONLY | counts keys but not values | The cache holds a key AND a value per layer.
INVERTED_RATIO | the ratio is upside down | Solve (T + c D) / E = 1 for c: target passes saved per
    draft pass, (E - T) / D.
TARGET_PASSES_FREE | leaves out the target passes | The T target passes are paid too: c* = (E - T) /
    D, not E / D.
PER_TOKEN | divides by the emitted tokens | Divide the passes saved by the draft passes D, not by
    the tokens E.
MISSES_BUG | misses the biased rule | Raise the test's power: more rounds, a token whose p(1 - p) is
    large, a statistic aimed where the bug pushes (the drafted token's frequency).
FALSE_ALARMS | fails the correct rule more often than its alpha | Test once, at one size fixed in
    advance: taking the smallest p-value of many looks (growing prefixes, several statistics)
    inflates the false-alarm rate.
WRONG_NULL | fails the correct rule almost every time | Compare with the target's distribution as
    the rule samples it: process_logits(logits, params), temperature included.
IGNORES_SEED | gives the same p-value at every seed | Draw every round from
    torch.Generator().manual_seed(seed): a test that ignores its seed has no error rates to measure.
WRONG_TAIL | tests the wrong tail | The bug raises the drafted token's frequency: small p-values
    must mean 'too often'.
COUNTS_PENDING | counts the pending token | The cache holds the whole context except its last token:
    context - 1.
NO_ROLLBACK | forgets the rollback | A rejected proposal's positions are cropped: only the emitted
    tokens stay.
ACCEPTED_ONLY | counts only the accepted proposals | The context grows by the emitted tokens: the
    accepted ones plus the target's token.
POINT_ESTIMATE | claims a crossover from the point estimate | Call speculation slower only where its
    whole interval lies below 1 (speedup_high < 1).
WRONG_END | reads the wrong end of the interval | An interval lies below 1 when its upper end,
    speedup_high, is below 1.
ASSUMES_SORTED | assumes the rows are sorted by batch size | Return the smallest batch size,
    whatever order the rows come in.
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
    """The verdict of one check on one student function; ``bool(report)`` is ``passed``.

    ``message`` says what to do next, ``diagnosis`` names the mistake (``None`` when
    passed) and ``evidence`` holds the numbers it rests on, for display only.
    """

    check: str
    subject: str
    passed: bool
    message: str
    diagnosis: Diagnosis | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def headline(self) -> str:
        text = f"{'_PASSED' if self.passed else 'FAILED'} {self.check}({self.subject})"
        return text + (f": {self.diagnosis.headline}" if self.diagnosis else "")

    def __str__(self) -> str:
        lines = [self.headline, "", self.message]
        if self.evidence:
            lines += ["", "evidence:"]
            lines += [f"  {key}: {_format_value(value)}" for key, value in self.evidence.items()]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.passed else "#c62828"
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
        """Return the report if it passed; else raise ``NotImplementedError`` for a stub and
        ``AssertionError`` for a wrong attempt, with the report as the message."""
        if self.passed:
            return self
        if self.diagnosis is Diagnosis.NOT_IMPLEMENTED:
            raise NotImplementedError(str(self))
        raise AssertionError(str(self))

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for the grading log and the CSV of ``coursework.py grade``."""
        return {
            "check": self.check,
            "subject": self.subject,
            "passed": self.passed,
            "diagnosis": self.diagnosis.key if self.diagnosis is not None else "",
            "message": self.message,
            "evidence": {k: _format_value(v) for k, v in self.evidence.items()},
        }
