"""What a check says about a student's code: a verdict, a message, a diagnosis, the numbers.

Diagnoses are an :class:`~enum.Enum` rather than free strings so that a typo is an
error, a diagnosis cannot be emitted without a headline, and the CSV of a graded
class and the catch-rate table of the graders speak the same words.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from enum import Enum, unique
from typing import Any


@unique
class Diagnosis(Enum):
    """A named reason for a failing report; the value is its headline (each its own)."""

    # the student's code could not be judged
    NOT_IMPLEMENTED = "not implemented yet"
    RAISED = "raised an exception"
    NOT_A_FUNCTION = "not a function or class"
    WRONG_SIGNATURE = "wrong signature"
    WRONG_TYPE = "returned the wrong type"
    TIMEOUT = "ran too long"
    NO_PROGRESS = "stopped making progress"
    GRADER_ERROR = "the check itself could not run"
    NOTEBOOK_ERROR = "the notebook raised an error or did not run to the end"
    # the n-gram drafter
    NGRAM_MISMATCH = "proposals differ from prompt lookup"
    EARLIEST_MATCH = "uses the earliest match instead of the latest"
    SHORTEST_FIRST = "tries short suffixes before long ones"
    NEVER_PROPOSES = "proposes nothing where a match exists"
    COPIES_THE_MATCH = "off by one: copies the match's last token"
    IGNORES_K = "proposes more than k tokens"
    IGNORES_MIN_N = "matches suffixes shorter than min_n"
    IGNORES_MAX_N = "matches suffixes longer than max_n"
    # verification, greedy and sampled
    GREEDY_MISMATCH = "emits other tokens than greedy verification"
    NO_BONUS = "no bonus token when all proposals are accepted"
    OFF_BY_ONE = "off by one between proposals and target rows"
    EMITS_REJECTED = "emits the rejected proposal instead of the target's token"
    KEEPS_GOING = "keeps accepting after the first mismatch"
    INVALID_OUTPUT = "emitted tokens inconsistent with the proposals"
    RESAMPLE_FROM_TARGET = "resampling from p_target on rejection"
    ACCEPT_WITH_P_TARGET = "accepting with probability p_target(x) alone"
    UNNORMALISED_RESIDUAL = "residual not renormalised"
    IGNORES_PARAMS = "sampling parameters not applied to the target"
    WRONG_ACCEPTANCE = "wrong acceptance probability"
    WRONG_DISTRIBUTION = "output not distributed as p_target"
    # speculative decoding
    WRONG_LENGTH = "returns the wrong number of tokens"
    OUTPUT_MISMATCH = "output differs from plain greedy decoding"
    NOT_SPECULATING = "one target pass per token: no speculation"
    TOO_MANY_PASSES = "more target passes than speculation needs"

    @property
    def key(self) -> str:
        """The diagnosis as it is written in a grading log or CSV: ``not_implemented``."""
        return self.name.lower()


def format_value(value: Any) -> str:
    """A number as evidence shows it: four significant digits, ``nan`` spelled out."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


@dataclass
class Report:
    """The verdict of one check on one student function.

    ``passed`` is the verdict, ``message`` says what to do next, ``diagnosis`` names
    the mistake (``None`` when passed) and ``evidence`` holds the numbers it rests
    on, for display only. ``bool(report)`` is ``report.passed``.
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
        verdict = "PASSED" if self.passed else "FAILED"
        text = f"{verdict} {self.check}({self.subject})"
        if self.diagnosis is not None:
            text += f": {self.diagnosis.value}"
        return text

    def __str__(self) -> str:
        lines = [self.headline, "", self.message]
        if self.evidence:
            lines += ["", "evidence:"]
            lines += [f"  {key}: {format_value(value)}" for key, value in self.evidence.items()]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.passed else "#c62828"
        rows = "".join(
            f"<tr><td style='padding:0 1em 0 0'>{html.escape(str(k))}</td>"
            f"<td><code>{html.escape(format_value(v))}</code></td></tr>"
            for k, v in self.evidence.items()
        )
        evidence = (
            f"<details><summary>evidence</summary><table>{rows}</table></details>" if rows else ""
        )
        message = html.escape(self.message).replace("\n", "<br>")
        return (
            f"<div style='border-left:4px solid {colour};padding:0.3em 0.8em;margin:0.3em 0'>"
            f"<strong style='color:{colour}'>{html.escape(self.headline)}</strong>"
            f"<p style='margin:0.4em 0'>{message}</p>{evidence}</div>"
        )

    def raise_if_failed(self) -> Report:
        """Return the report if it passed; otherwise raise, with the report as the message.

        Use it where a chapter asserts that its own solution passes:
        ``check_accept_greedy(my_accept_greedy).raise_if_failed()``. In the student
        version the same line raises ``NotImplementedError`` while the exercise is
        still a stub (the one error a fresh student notebook may show), and
        ``AssertionError`` once the student's attempt runs but is wrong.
        """
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
            "evidence": {k: format_value(v) for k, v in self.evidence.items()},
        }
