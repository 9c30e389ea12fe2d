"""Autograders for the exercises: the course's negative controls, aimed at student code.

Each ``check_*`` takes the student's function (or class) and returns a
:class:`Report`: ``passed``, a ``message`` a student can act on, the name of the
mistake it recognised (``diagnosis``) and the numbers behind the verdict
(``evidence``). A check never raises because of the student's code: an exception
(``NotImplementedError`` is "not implemented yet"), a wrong return type, a hang
(a per-check time limit) all become failing reports, so a notebook that calls a
check keeps running.

Why the checks are shaped this way:

* **Deterministic where the truth is deterministic.** Prompt lookup and greedy
  verification have one right answer per input; the checks compare with the
  library on many inputs and name the mistake whose outputs the student's
  reproduce (the wrong implementations live in :mod:`specdec_lib.grading_mistakes`).
* **Exact, then sampled, for the residual rule.** :func:`check_accept_sampled`
  first runs probes whose correct outcome has probability 1 (p == q must accept
  everything and add a bonus token; a proposal the target gives probability 0
  must be rejected; a replacement can never be the rejected one-hot proposal),
  then seeded distribution tests (z-scores, chi-square) against the exact output
  distribution, which :func:`specdec_lib.stats.exact_first_token_distribution`
  enumerates. Each classic mistake has a signature no correct rule can produce,
  so a diagnosis comes with its evidence and the correct rule almost never
  raises a false alarm (thresholds at p < 1e-4).
* **Seeded and sandboxed.** A check seeds and then restores the global random
  generators and runs on one torch thread, so it prints the same report every
  time and leaves the notebook's state as it found it.
"""

from __future__ import annotations

import html
import inspect
import json
import math
import os
import random
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .drafters import DraftModelDrafter, NgramDrafter, one_hot_probs
from .sampling import SamplingParams, process_logits
from .stats import exact_first_token_distribution
from .verify import target_distribution
from .verify import accept_greedy as _library_accept_greedy

__all__ = [
    "DIAGNOSES",
    "Report",
    "check_accept_greedy",
    "check_accept_sampled",
    "check_ngram_drafter",
    "check_speculative_generate",
]

# Where ``python -m specdec_lib.coursework grade`` collects the reports of a notebook.
LOG_ENV = "SPECDEC_GRADING_LOG"

DIAGNOSES: dict[str, str] = {
    "not_implemented": "not implemented yet",
    "raised": "raised an exception",
    "not_a_function": "not a function or class",
    "wrong_signature": "wrong signature",
    "wrong_type": "returned the wrong type",
    "timeout": "ran too long",
    "no_progress": "stopped making progress",
    "grader_error": "the check itself could not run",
    # n-gram drafter
    "earliest_match": "uses the earliest match instead of the latest",
    "shortest_first": "tries short suffixes before long ones",
    "never_proposes": "proposes nothing where a match exists",
    "copies_the_match": "off by one: copies the match's last token",
    "ignores_k": "proposes more than k tokens",
    "ignores_min_n": "matches suffixes shorter than min_n",
    "ignores_max_n": "matches suffixes longer than max_n",
    # verification
    "no_bonus": "no bonus token when all proposals are accepted",
    "off_by_one": "off by one between proposals and target rows",
    "emits_rejected": "emits the rejected proposal instead of the target's token",
    "keeps_going": "keeps accepting after the first mismatch",
    "invalid_output": "emitted tokens inconsistent with the proposals",
    "resample_from_target": "resampling from p_target on rejection",
    "accept_with_p_target": "accepting with probability p_target(x) alone",
    "unnormalised_residual": "residual not renormalised",
    "ignores_params": "sampling parameters not applied to the target",
    "wrong_acceptance": "wrong acceptance probability",
    "wrong_distribution": "output not distributed as p_target",
    # speculative decoding
    "wrong_length": "returns the wrong number of tokens",
    "mismatch": "output differs from plain greedy decoding",
    "not_speculating": "one target pass per token: no speculation",
    "too_many_passes": "more target passes than speculation needs",
}

# ---------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


@dataclass
class Report:
    """The verdict of one check on one student function.

    ``passed`` is the verdict, ``message`` says what to do next, ``diagnosis`` is a
    key of :data:`DIAGNOSES` (``None`` when passed) and ``evidence`` holds the
    numbers it rests on. ``bool(report)`` is ``report.passed``.
    """

    check: str
    subject: str
    passed: bool
    message: str
    diagnosis: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def headline(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        text = f"{verdict} {self.check}({self.subject})"
        if self.diagnosis:
            text += f": {DIAGNOSES.get(self.diagnosis, self.diagnosis)}"
        return text

    def __str__(self) -> str:
        lines = [self.headline, "", self.message]
        if self.evidence:
            lines += ["", "evidence:"]
            lines += [f"  {key}: {_fmt(value)}" for key, value in self.evidence.items()]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.passed else "#c62828"
        rows = "".join(
            f"<tr><td style='padding:0 1em 0 0'>{html.escape(str(k))}</td>"
            f"<td><code>{html.escape(_fmt(v))}</code></td></tr>"
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
        if self.diagnosis == "not_implemented":
            raise NotImplementedError(str(self))
        raise AssertionError(str(self))

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for the grading log and the CSV of ``coursework grade``."""
        return {
            "check": self.check,
            "subject": self.subject,
            "passed": self.passed,
            "diagnosis": self.diagnosis or "",
            "message": self.message,
            "evidence": {k: _fmt(v) for k, v in self.evidence.items()},
        }


# ---------------------------------------------------------------------------------
# The harness: call student code without letting it crash, hang or disturb the notebook
# ---------------------------------------------------------------------------------


class _Abort(Exception):
    """Ends a check early with a failing report."""

    def __init__(self, diagnosis: str, message: str, **evidence: Any) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis
        self.message = message
        self.evidence = evidence


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that ``except Exception`` cannot swallow it."""


class _NoProgress(BaseException):
    """Raised from inside student code when its loop visibly stopped advancing."""


# The limit is on CPU time (ITIMER_PROF), which a runaway loop burns and which a busy
# or paused machine does not inflate; a wall-clock backstop at WALL_FACTOR times the
# limit catches code that hangs without computing (waiting on input, say).
WALL_FACTOR = 5


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` of CPU time (main thread, Unix); else no limit.

    The alarms repeat every second, so student code that catches the first
    interruption with a bare ``except:`` is interrupted again.
    """
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout()

    timers = [
        (signal.SIGPROF, signal.ITIMER_PROF, seconds),
        (signal.SIGALRM, signal.ITIMER_REAL, WALL_FACTOR * seconds),
    ]
    saved = []
    start = time.monotonic()
    for signum, which, limit in timers:
        handler = signal.signal(signum, on_alarm)
        saved.append((signum, which, handler, *signal.setitimer(which, limit, 1.0)))
    try:
        yield
    finally:
        for signum, which, handler, outer_delay, outer_interval in saved:
            signal.setitimer(which, 0)
            signal.signal(signum, handler)
            if outer_delay:  # someone else's timer (pytest-timeout, say) was pending: re-arm it
                left = max(outer_delay - (time.monotonic() - start), 1e-3)
                signal.setitimer(which, left, outer_interval)


@contextmanager
def _sandbox(seed: int) -> Iterator[None]:
    """Seed the global generators, restore them afterwards, and use one torch thread.

    Students often ignore the ``generator`` argument and draw from the global
    generator; seeding it keeps their report reproducible. Restoring it keeps the
    notebook's own random stream (and its stored outputs) unaffected by a check.
    One thread because tiny tensors only pay thread start-up costs.
    """
    threads = torch.get_num_threads()
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)
            random.setstate(py_state)
            np.random.set_state(np_state)


def _subject_name(obj: Any) -> str:
    name = getattr(obj, "__name__", None) or type(obj).__name__
    return str(name)


def _where(exc: BaseException) -> str:
    """' (in `f`, line 3: `code`)' for the innermost frame outside this library."""
    frames = traceback.extract_tb(exc.__traceback__)
    here = Path(__file__).parent
    outside = [f for f in frames if Path(f.filename).parent != here and "torch" not in f.filename]
    if not outside:
        return ""
    f = outside[-1]
    code = f" `{f.line.strip()}`" if f.line else ""
    return f" (in `{f.name}`, line {f.lineno}:{code})"


def _call(
    fn: Callable, name: str, args: tuple, kwargs: dict | None = None, during: str = ""
) -> Any:
    """Call student code; turn anything it raises into a failing report."""
    try:
        return fn(*args, **(kwargs or {}))
    except NotImplementedError:
        raise _Abort(
            "not_implemented",
            f"`{name}` is not implemented yet: replace the `raise NotImplementedError` line "
            "with your code, run that cell, then run this check again.",
        ) from None
    except (_Abort, _Timeout, _NoProgress):
        raise
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise _Abort(
            "raised",
            f"`{name}` raised {detail}{_where(exc)}{' ' + during if during else ''}. "
            "Fix the error and run this check again.",
            exception=detail,
        ) from None


def _check_signature(fn: Callable, name: str, n_args: int, expected: str) -> None:
    try:
        inspect.signature(fn).bind(*range(n_args))
    except TypeError:
        raise _Abort(
            "wrong_signature",
            f"`{name}` must be callable as `{expected}`; its signature is "
            f"`{name}{inspect.signature(fn)}`.",
        ) from None
    except ValueError:  # builtins without a signature: just try calling
        pass


def _record(report: Report) -> None:
    """Append the report to the grading log, when ``coursework grade`` asked for one."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    entry = report.as_dict()
    try:
        from IPython import get_ipython

        shell = get_ipython()
        # In[n] is the input of the cell with prompt number n, the running one included
        # (shell.execution_count is already one ahead while a cell runs).
        inputs = shell.user_ns.get("In") if shell is not None else None
        entry["execution_count"] = len(inputs) - 1 if isinstance(inputs, list) else None
    except ImportError:
        entry["execution_count"] = None
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def _run_check(
    check: str, subject: Any, body: Callable[[str], Report], seed: int, timeout: float | None
) -> Report:
    name = _subject_name(subject)
    try:
        if subject is None or not callable(subject) and not hasattr(subject, "propose"):
            raise _Abort(
                "not_a_function",
                f"Pass the function (or class) itself, without calling it: got "
                f"{type(subject).__name__} {subject!r:.60}.",
            )
        with _sandbox(seed), _time_limit(timeout):
            report = body(name)
    except _Abort as abort:
        report = Report(check, name, False, abort.message, abort.diagnosis, abort.evidence)
    except _Timeout:
        report = Report(
            check,
            name,
            False,
            f"`{name}` used more than {timeout:g} s of CPU time and was stopped. Look for a "
            "loop whose condition never changes (for example a round that emits no token), or "
            "for work repeated far more often than needed.",
            "timeout",
            {"cpu_time_limit_s": timeout},
        )
    except _NoProgress as stuck:
        report = Report(check, name, False, str(stuck), "no_progress")
    except Exception as exc:  # a bug in the check, or an object it cannot handle
        report = Report(
            check,
            name,
            False,
            f"The check could not run: {type(exc).__name__}: {exc}. Please report this.",
            "grader_error",
        )
    _record(report)
    return report


# ---------------------------------------------------------------------------------
# Converting what students return
# ---------------------------------------------------------------------------------


def _as_tokens(value: Any, what: str) -> list[int]:
    """A list of int token ids from a list, tuple, 1-D tensor or array of integers."""
    if isinstance(value, torch.Tensor | np.ndarray):
        if value.ndim != 1 or not (
            value.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8)
            or (isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.integer))
        ):
            raise _Abort(
                "wrong_type",
                f"{what} must be a list of int token ids, got a "
                f"{type(value).__name__} of dtype {value.dtype} and shape {tuple(value.shape)}",
            )
        return [int(v) for v in value.tolist()]
    if value is None:
        raise _Abort(
            "wrong_type",
            f"{what} must be a list of int token ids, got None: is a `return` missing, or does "
            "a branch return None where it should return an empty list []?",
        )
    if not isinstance(value, list | tuple):
        raise _Abort(
            "wrong_type",
            f"{what} must be a list of int token ids, got {type(value).__name__}: {value!r:.80}",
        )
    out = []
    for v in value:
        if isinstance(v, torch.Tensor) and v.ndim == 0 and not v.is_floating_point():
            v = v.item()
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise _Abort(
                "wrong_type",
                f"{what} must contain int token ids, found {type(v).__name__} {v!r:.40}",
            )
        out.append(int(v))
    return out


def _as_count(value: Any, what: str) -> int:
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise _Abort(
            "wrong_type", f"{what} must be an int, got {type(value).__name__} {value!r:.40}"
        )
    return int(value)


def _as_verification(value: Any, name: str) -> tuple[list[int], int]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise _Abort(
            "wrong_type",
            f"`{name}` must return a pair `(emitted, n_accepted)`: the emitted token ids and "
            f"the number of proposals accepted; got {type(value).__name__} {value!r:.80}",
        )
    return _as_tokens(value[0], "emitted"), _as_count(value[1], "n_accepted")


def _show_tokens(tokens: Sequence[int], limit: int = 48) -> str:
    """Token ids as readable text when they are printable ASCII bytes, else as a list."""
    tokens = list(tokens)
    cut = tokens[-limit:]
    prefix = "…" if len(tokens) > limit else ""
    if cut and all(32 <= t < 127 or t == 10 for t in cut):
        return prefix + repr(bytes(cut).decode("ascii"))
    return prefix + str(cut)


# ---------------------------------------------------------------------------------
# Fingerprints: which known mistake reproduces the student's wrong outputs?
# ---------------------------------------------------------------------------------


def _fingerprint(
    check: str, cases: list, expected: list, got: list, run: Callable[[Callable, Any], Any]
) -> tuple[str, str] | None:
    """``(diagnosis, "a/b")`` of the mistake the student's outputs agree with, if any.

    A mistake fits when the student agrees with it on at least 90% of the cases
    where that mistake differs from the correct answer, and it explains at least
    60% of the student's wrong answers.
    """
    from .grading_mistakes import MISTAKES

    wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
    best = None
    for mistake in MISTAKES[check].values():
        theirs = [run(mistake.function, case) for case in cases]
        differs = [i for i in range(len(cases)) if theirs[i] != expected[i]]
        if not differs:
            continue
        agree = sum(got[i] == theirs[i] for i in differs)
        explained = sum(got[i] == theirs[i] for i in wrong) / len(wrong)
        if agree >= 0.9 * len(differs) and explained >= 0.6:
            score = (explained, agree / len(differs))
            if best is None or score > best[0]:
                best = (score, mistake.diagnosis, f"{agree}/{len(differs)}")
    return None if best is None else (best[1], best[2])


# ---------------------------------------------------------------------------------
# check_ngram_drafter
# ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _NgramCase:
    context: tuple[int, ...]
    k: int
    max_n: int
    min_n: int
    label: str


def _b(text: str) -> tuple[int, ...]:
    return tuple(text.encode("ascii"))


def _ngram_cases(seed: int) -> list[_NgramCase]:
    cases = [
        _NgramCase(_b("abcdefgh"), 4, 8, 3, "no earlier occurrence of any suffix"),
        _NgramCase(_b("ab"), 3, 8, 3, "context shorter than min_n + 1"),
        _NgramCase(_b("xyzabcQRSTabc"), 3, 8, 3, "one earlier match"),
        _NgramCase(_b("abcdabc"), 8, 8, 3, "fewer than k tokens follow the match"),
        _NgramCase(
            _b("1abcd2 9bcd3 zabcd"),
            4,
            8,
            3,
            "a long match early and a shorter one later: the longest wins",
        ),
        _NgramCase(
            _b("abcX abcY abcZ abc"), 2, 8, 3, "several equal-length matches: the latest wins"
        ),
        _NgramCase(_b("abcX abcY abcZ abc"), 1, 8, 3, "k = 1"),
        _NgramCase(_b("abcX abcY abcZ abc"), 0, 8, 3, "k = 0"),
        _NgramCase(_b("abXYZab"), 4, 8, 3, "only a match shorter than min_n"),
        _NgramCase(_b("abcdef1xcdef2abcdef"), 4, 4, 2, "a match longer than max_n: use max_n"),
        _NgramCase((7,) * 12, 4, 8, 3, "one token repeated"),
        _NgramCase(_b("abababab"), 3, 8, 3, "the match overlaps the suffix"),
        _NgramCase(_b("the cat sat. the cat sat. the c"), 6, 8, 3, "a repeated sentence"),
        _NgramCase(_b("zqabcdefghijXabcdefghij"), 5, 8, 3, "suffix longer than max_n"),
    ]
    rng = random.Random(f"ngram/{seed}")
    settings = [(8, 3), (8, 3), (4, 2), (5, 5), (3, 1), (6, 2)]
    for i in range(60):
        alphabet = rng.choice([2, 3, 4])
        context = tuple(rng.randrange(alphabet) for _ in range(rng.randint(4, 40)))
        max_n, min_n = rng.choice(settings)
        cases.append(_NgramCase(context, rng.randint(1, 8), max_n, min_n, f"random context #{i}"))
    from .data import workload_examples

    for i, ex in enumerate(workload_examples("copy", 4, seed=100 + seed)):
        for j in range(6):
            text = (ex.prompt + ex.reference)[: len(ex.prompt) + rng.randint(0, len(ex.reference))]
            cases.append(_NgramCase(_b(text), rng.randint(1, 8), 8, 3, f"copy prompt #{i}.{j}"))
    return cases


def _ngram_reference(case: _NgramCase) -> list[int]:
    return NgramDrafter(case.max_n, case.min_n).propose(list(case.context), case.k).tokens


def _ngram_caller(obj: Any, name: str) -> tuple[Callable[[_NgramCase], list[int]], tuple | None]:
    """A uniform ``case -> tokens`` for a function, a class or an instance; fixed (max_n, min_n)."""
    params = SamplingParams()
    if inspect.isclass(obj):
        instances: dict[tuple[int, int], Any] = {}

        def from_class(case: _NgramCase) -> Any:
            key = (case.max_n, case.min_n)
            if key not in instances:
                instances[key] = _call(
                    obj,
                    name,
                    (),
                    {"max_n": case.max_n, "min_n": case.min_n},
                    f"when created as `{name}(max_n={key[0]}, min_n={key[1]})`",
                )
            return _call(
                instances[key].propose, f"{name}.propose", (list(case.context), case.k, params)
            )

        return from_class, None
    bound_to = getattr(obj, "__self__", None)
    if not inspect.isroutine(obj) and callable(getattr(obj, "propose", None)):
        instance = obj
    elif bound_to is not None and callable(getattr(bound_to, "propose", None)):
        instance = bound_to
    else:
        _check_signature(obj, name, 2, f"{name}(context, k, max_n=8, min_n=3)")

        def from_function(case: _NgramCase) -> Any:
            return _call(
                obj, name, (list(case.context), case.k), {"max_n": case.max_n, "min_n": case.min_n}
            )

        return from_function, None
    fixed = (getattr(instance, "max_n", 8), getattr(instance, "min_n", 3))

    def from_instance(case: _NgramCase) -> Any:
        return _call(instance.propose, f"{name}.propose", (list(case.context), case.k, params))

    return from_instance, fixed


_NGRAM_ADVICE = {
    "earliest_match": "When the suffix occurred several times, copy what followed its latest "
    "occurrence (the most recent context predicts best); you used the earliest.",
    "shortest_first": "Try the longest suffix first, n = max_n down to min_n, and stop at the "
    "first n that occurred before; you tried short suffixes first, so an ambiguous short "
    "match beat a longer one.",
    "never_proposes": "You proposed nothing on contexts that do contain an earlier occurrence of "
    "their suffix. A common cause: the search also finds the suffix itself (the last n "
    "tokens), which has nothing after it; only search windows that end before the last token.",
    "copies_the_match": "Propose what follows the match: context[start + n : start + n + k]. You "
    "started one token early and copied the match's own last token.",
    "ignores_k": "Propose at most k tokens.",
    "ignores_min_n": "Never match a suffix shorter than min_n: short byte n-grams occur almost "
    "everywhere and what followed them predicts nothing. With no match of length >= min_n, "
    "propose nothing.",
    "ignores_max_n": "Start from n = max_n (or the longest suffix that fits, if shorter), not from "
    "the whole context.",
}


def check_ngram_drafter(
    propose: Any, max_n: int = 8, min_n: int = 3, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check a prompt-lookup (n-gram) drafter against :class:`~specdec_lib.NgramDrafter`.

    The exercise implements::

        def propose(context: list[int], k: int, max_n: int = 8, min_n: int = 3) -> list[int]:
            '''Up to k tokens that followed the latest earlier occurrence of the longest
            suffix of ``context`` of length n, for n = max_n down to min_n; [] if none.'''

    A class with ``__init__(max_n, min_n)`` and ``propose(context, k, params)`` returning a
    list or a :class:`~specdec_lib.Proposal` (like the library's) is accepted too, and
    so is an instance of one (checked at its own ``max_n``/``min_n``). ``max_n`` and
    ``min_n`` here are the defaults of the function form; the check also tries others.
    About 100 contexts: edge cases (no match, fewer than k tokens to copy, longest
    then latest match, min_n and max_n limits, k = 0), random contexts over tiny
    alphabets (``seed`` picks them) and copy-workload text.
    """

    def body(name: str) -> Report:
        call, fixed = _ngram_caller(propose, name)
        cases = _ngram_cases(seed)
        if fixed is not None:
            cases = [_NgramCase(c.context, c.k, *fixed, c.label) for c in cases]
        expected = [_ngram_reference(c) for c in cases]
        got = []
        for case in cases:
            result = call(case)
            got.append(_as_tokens(getattr(result, "tokens", result), "the proposal"))
        wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
        evidence: dict[str, Any] = {"contexts": len(cases), "wrong": len(wrong)}
        if not wrong:
            return Report(
                "check_ngram_drafter",
                name,
                True,
                f"Correct on all {len(cases)} contexts: no match, fewer than k tokens to copy, "
                "longest-then-latest match, the min_n and max_n limits, k = 0 and k = 1, random "
                "contexts and copy-workload text.",
                None,
                evidence,
            )
        first = cases[wrong[0]]
        example = (
            f"First failing context ({first.label}): context = {_show_tokens(first.context)}, "
            f"k = {first.k}, max_n = {first.max_n}, min_n = {first.min_n}: expected "
            f"{expected[wrong[0]]} = {_show_tokens(expected[wrong[0]])}, got {got[wrong[0]]}."
        )
        too_long = [i for i in range(len(cases)) if len(got[i]) > cases[i].k]
        found = None
        if too_long:
            i = too_long[0]
            found = ("ignores_k", f"{len(too_long)} contexts")
            evidence["example"] = f"k = {cases[i].k}, returned {len(got[i])} tokens"
        else:
            found = _fingerprint(
                "check_ngram_drafter",
                cases,
                expected,
                got,
                lambda fn, c: fn(list(c.context), c.k, c.max_n, c.min_n),
            )
        if found is None and all(not got[i] for i in wrong):
            found = ("never_proposes", f"{len(wrong)} contexts")
        if found is None:
            return Report(
                "check_ngram_drafter",
                name,
                False,
                f"Your proposals differ from prompt lookup on {len(wrong)} of {len(cases)} "
                f"contexts. {example}",
                "mismatch",
                evidence,
            )
        diagnosis, agreement = found
        evidence["agrees_with_this_mistake_on"] = agreement
        return Report(
            "check_ngram_drafter",
            name,
            False,
            f"{_NGRAM_ADVICE[diagnosis]} {example}",
            diagnosis,
            evidence,
        )

    return _run_check("check_ngram_drafter", propose, body, seed, timeout)


# ---------------------------------------------------------------------------------
# check_accept_greedy
# ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _GreedyCase:
    logits: torch.Tensor
    proposed: tuple[int, ...]


def _greedy_cases(seed: int) -> list[_GreedyCase]:
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for vocab in (5, 256):
        for k in range(7):
            for n_match in range(k + 1):
                for _ in range(2):
                    logits = torch.randn(k + 1, vocab, generator=gen)  # (k+1, V)
                    best = logits.argmax(-1).tolist()
                    proposed = best[:n_match]
                    for i in range(n_match, k):
                        # After the first mismatch, sometimes match again: a correct
                        # rule must not keep those.
                        shift = 0 if i > n_match and torch.rand((), generator=gen) < 0.5 else None
                        if shift is None:
                            shift = int(torch.randint(1, vocab, (), generator=gen))
                        proposed.append((best[i] + shift) % vocab)
                    cases.append(_GreedyCase(logits, tuple(proposed)))
    return cases


_GREEDY_ADVICE = {
    "no_bonus": "When all k proposals match, the round still emits one more token: the target's "
    "argmax at row k, the bonus token (that is why target_logits has k + 1 rows).",
    "off_by_one": "Row i of target_logits is the target's prediction for the token after "
    "context + proposed[:i], so compare proposed[i] with the argmax of row i, not row i + 1.",
    "emits_rejected": "At the first mismatch, emit the target's own token (the argmax of that "
    "row), not the rejected proposal.",
    "keeps_going": "Stop at the first mismatch: later proposals were drafted after a token that "
    "will not be emitted, so none of them can be kept, even if they happen to match.",
}


def check_accept_greedy(
    accept_greedy: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check greedy verification against :func:`specdec_lib.accept_greedy`.

    The exercise implements::

        def accept_greedy(target_logits, proposed) -> tuple[list[int], int]:
            '''target_logits: (k+1, V), row i scores the token after context + proposed[:i].
            Return (emitted, n_accepted): the longest prefix of ``proposed`` that equals
            the target's argmax, then one token from the target (the correction at the
            first mismatch, or the bonus from row k when all k match).'''

    About 130 random cases (``seed`` picks them): vocabularies of 5 and 256, k from 0 to
    6, every number of matching proposals, and proposals that match again after a
    mismatch.
    """

    def body(name: str) -> Report:
        _check_signature(accept_greedy, name, 2, f"{name}(target_logits, proposed)")
        cases = _greedy_cases(seed)
        expected = [_library_accept_greedy(c.logits, list(c.proposed)) for c in cases]
        got = []
        for c in cases:
            result = _call(
                accept_greedy,
                name,
                (c.logits.clone(), list(c.proposed)),
                during=f"with k = {len(c.proposed)}",
            )
            got.append(_as_verification(result, name))
        wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
        evidence: dict[str, Any] = {"cases": len(cases), "wrong": len(wrong)}
        if not wrong:
            return Report(
                "check_accept_greedy",
                name,
                True,
                f"Correct on all {len(cases)} cases: every number of matching proposals from 0 "
                "to k (k = 0..6), the bonus token, and proposals that match again after a "
                "mismatch.",
                None,
                evidence,
            )
        i = wrong[0]
        c = cases[i]
        example = (
            f"First failing case: k = {len(c.proposed)}, the target's argmax per row = "
            f"{c.logits.argmax(-1).tolist()}, proposed = {list(c.proposed)}: expected "
            f"{expected[i]}, got {got[i]}."
        )
        found = _fingerprint(
            "check_accept_greedy",
            cases,
            expected,
            got,
            lambda fn, case: fn(case.logits, list(case.proposed)),
        )
        if found is None:
            bad_count = [j for j in wrong if got[j][1] != len(got[j][0]) - 1]
            hint = (
                " n_accepted must equal the number of proposals kept, len(emitted) - 1."
                if bad_count
                else ""
            )
            return Report(
                "check_accept_greedy",
                name,
                False,
                f"Wrong on {len(wrong)} of {len(cases)} cases.{hint} {example}",
                "mismatch",
                evidence,
            )
        diagnosis, agreement = found
        evidence["agrees_with_this_mistake_on"] = agreement
        return Report(
            "check_accept_greedy",
            name,
            False,
            f"{_GREEDY_ADVICE[diagnosis]} {example}",
            diagnosis,
            evidence,
        )

    return _run_check("check_accept_greedy", accept_greedy, body, seed, timeout)


# ---------------------------------------------------------------------------------
# check_accept_sampled
# ---------------------------------------------------------------------------------

_V = 8  # a small vocabulary, so that every probability is seen many times
_T1 = SamplingParams(temperature=1.0)
_Z_LIMIT = 4.0  # |z| beyond this is a failure: two-sided p ~ 6e-5 for a correct rule
_P_LIMIT = 1e-4  # chi-square p-values below this are failures


def _probs(*weights: float) -> torch.Tensor:
    p = torch.tensor(weights, dtype=torch.float64)
    return p / p.sum()


def _logits_for(p: torch.Tensor) -> torch.Tensor:
    """Logits whose softmax is ``p``; zero probability becomes -1e4 (exactly 0 after softmax)."""
    return torch.where(p > 0, p.log(), torch.full_like(p, -1e4))


def _z(successes: int, n: int, prob: float) -> float:
    if n == 0:
        return 0.0
    if prob in (0.0, 1.0):
        return 0.0 if successes == prob * n else math.copysign(math.inf, successes - prob * n)
    return (successes - n * prob) / math.sqrt(n * prob * (1 - prob))


def _chi_square(tokens: list[int], p: torch.Tensor) -> tuple[float, float]:
    """(statistic, p-value) of tokens against ``p``; any impossible token gives p-value 0."""
    counts = torch.bincount(
        torch.tensor(tokens, dtype=torch.long).clamp(0, len(p) - 1), minlength=len(p)
    ).to(torch.float64)
    if any(not 0 <= t < len(p) for t in tokens) or bool((counts[p <= 0] > 0).any()):
        return math.inf, 0.0
    support = p > 0
    expected = counts.sum() * p[support]
    stat = float(((counts[support] - expected) ** 2 / expected).sum())
    df = int(support.sum()) - 1
    pvalue = float(
        torch.special.gammaincc(
            torch.tensor(df / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64)
        )
    )
    return stat, pvalue


@dataclass
class _Trial:
    proposed: list[int]
    emitted: list[int]
    n: int


class _SampledRunner:
    """Runs one probe (fixed logits, draft distributions, params) many times."""

    def __init__(self, fn: Callable, name: str, seed: int) -> None:
        self.fn, self.name, self.seed = fn, name, seed
        self.calls = 0

    def run(
        self,
        probe: int,
        logits: torch.Tensor,
        q: torch.Tensor,
        params: SamplingParams,
        trials: int,
        proposals: Callable[[torch.Generator], list[int]],
    ) -> list[_Trial]:
        gen = torch.Generator().manual_seed(self.seed * 1009 + probe)  # for the student
        proposal_gen = torch.Generator().manual_seed(self.seed * 1009 + probe + 500)  # for us
        k = q.shape[0]
        out = []
        for _ in range(trials):
            proposed = proposals(proposal_gen)
            result = _call(
                self.fn,
                self.name,
                (logits.clone(), q.clone(), list(proposed), params, gen),
                during=f"with k = {k} proposals",
            )
            self.calls += 1
            emitted, n = _as_verification(result, self.name)
            self._check_shape(emitted, n, proposed)
            out.append(_Trial(proposed, emitted, n))
        return out

    def _check_shape(self, emitted: list[int], n: int, proposed: list[int]) -> None:
        k = len(proposed)
        problem = None
        if not 0 <= n <= k:
            problem = f"n_accepted = {n} with k = {k} proposals; it must lie in [0, {k}]"
        elif emitted[:n] != proposed[:n]:
            problem = (
                f"emitted = {emitted} does not start with the {n} accepted proposals {proposed[:n]}"
            )
        elif len(emitted) == n < k:
            problem = (
                f"after rejecting proposal {n} you emitted no replacement token "
                f"(emitted = {emitted}); a rejection must emit one token from the residual"
            )
        elif len(emitted) not in (n, n + 1):
            problem = (
                f"emitted {len(emitted)} tokens with n_accepted = {n}; a round emits the "
                "accepted proposals plus exactly one token from the target"
            )
        if problem:
            raise _Abort(
                "invalid_output",
                f"`{self.name}` returned an impossible round: {problem}. (proposed = {proposed})",
            )


_Findings = list[tuple[str, str]]


def _probe_equal(runner: _SampledRunner, ev: dict, findings: _Findings) -> None:
    """p == q at every position: min(1, p/q) = 1, so all k are accepted and a bonus follows."""
    p = _probs(0, 1, 2, 3, 1.5, 1.5, 1, 0)
    k = 3
    logits = _logits_for(p).repeat(k + 1, 1)
    q = process_logits(logits[:k], _T1)
    trials = runner.run(
        1, logits, q, _T1, 60, lambda g: torch.multinomial(q, 1, generator=g)[:, 0].tolist()
    )
    all_in = [t for t in trials if t.n == k]
    missing = sum(len(t.emitted) == k for t in all_in)
    ev["p==q: rounds accepting all 3"] = f"{len(all_in)}/{len(trials)}"
    ev["p==q: bonus token present"] = f"{len(all_in) - missing}/{len(all_in)}"
    if missing:
        findings.append(
            (
                "no_bonus",
                "When all k proposals are accepted the round must still emit one more token, "
                "the bonus, drawn from the target's last row target_logits[k] (that is why "
                "there are k + 1 rows). With p_target == p_draft every proposal is accepted; "
                f"in {missing} of {len(all_in)} such rounds you returned {k} tokens instead "
                f"of {k + 1}.",
            )
        )
    if len(all_in) < len(trials):
        findings.append(
            (
                "wrong_acceptance",
                "With p_target == p_draft, min(1, p/q) = 1 and every proposal must be "
                f"accepted; you rejected one in {len(trials) - len(all_in)} of {len(trials)} "
                "rounds.",
            )
        )


def _probe_shift(runner: _SampledRunner, ev: dict, findings: _Findings) -> None:
    """Row 0 rules the proposal out, row 1 makes it certain: only row 0 may count."""
    x = 5
    logits = torch.stack(
        [_logits_for(_probs(0, 3, 3, 2, 2, 0, 0, 0)), _logits_for(_probs(0, 0, 0, 0, 0, 1, 0, 0))]
    )
    trials = runner.run(2, logits, one_hot_probs([x], _V), _T1, 40, lambda g: [x])
    accepted = sum(t.n for t in trials)
    ev["row 0 gives p(x)=0, row 1 gives p(x)=1: accepted"] = f"{accepted}/{len(trials)}"
    if accepted >= len(trials) / 2:
        findings.append(
            (
                "off_by_one",
                "Row i of target_logits scores the token after context + proposed[:i], so "
                "proposed[i] must be checked against row i. Here row 0 gives proposed[0] "
                "probability 0 (it must always be rejected) and row 1 gives it probability "
                f"1; you accepted it in {accepted} of {len(trials)} trials, so you are "
                "verifying proposed[i] against row i + 1.",
            )
        )
    elif accepted:
        findings.append(
            (
                "wrong_acceptance",
                f"You accepted a proposal the target gives probability 0 in {accepted} of "
                f"{len(trials)} trials; min(1, p(x)/q(x)) is 0 for it.",
            )
        )


def _probe_ratio(runner: _SampledRunner, ev: dict, findings: _Findings) -> None:
    """p(x) = 0.6 > q(x) = 0.2: min(1, p/q) = 1, so the proposal is always accepted."""
    p, q = _probs(0, 6, 1, 1, 1, 1, 0, 0), _probs(0, 2, 2, 2, 2, 2, 0, 0)
    trials = runner.run(3, _logits_for(p).repeat(2, 1), q[None], _T1, 60, lambda g: [1])
    accepted = sum(t.n for t in trials)
    z = _z(accepted, len(trials), float(p[1]))
    ev["p(x)=0.6 > q(x)=0.2: accepted"] = f"{accepted}/{len(trials)}"
    if accepted == len(trials):
        return
    if abs(z) <= _Z_LIMIT:
        findings.append(
            (
                "accept_with_p_target",
                "Accept a proposal x with probability min(1, p_target(x)/p_draft(x)), not "
                "p_target(x). Here p_target(x) = 0.60 and p_draft(x) = 0.20, so it must be "
                f"accepted every time; you accepted it {accepted} of {len(trials)} times "
                f"({accepted / len(trials):.2f}, z = {z:+.1f} against p_target(x) = 0.60).",
            )
        )
    else:
        findings.append(
            (
                "wrong_acceptance",
                "With p_target(x) = 0.60 > p_draft(x) = 0.20, min(1, p/q) = 1 and x must always "
                f"be accepted; you accepted it {accepted} of {len(trials)} times.",
            )
        )


def _probe_rate(runner: _SampledRunner, ev: dict, findings: _Findings) -> None:
    """p(x) = 0.3, q(x) = 0.6: accepted with probability 0.5; replacements from the residual."""
    p, q = _probs(0, 3, 2, 2, 3, 0, 0, 0), _probs(0, 6, 1, 1, 1, 1, 0, 0)
    trials = runner.run(4, _logits_for(p).repeat(2, 1), q[None], _T1, 150, lambda g: [1])
    accepted = sum(t.n for t in trials)
    z = _z(accepted, len(trials), 0.5)
    ev["p(x)=0.3, q(x)=0.6: acceptance (expect 0.5)"] = (
        f"{accepted / len(trials):.3f}, z = {z:+.2f}"
    )
    ev["_z_rate"] = z
    if abs(z) > _Z_LIMIT:
        findings.append(
            (
                "wrong_acceptance",
                "Accept x with probability min(1, p(x)/q(x)). With p(x) = 0.3 and q(x) = 0.6 "
                f"that is 0.5; you accepted {accepted} of {len(trials)} "
                f"({accepted / len(trials):.3f}, z = {z:+.1f}).",
            )
        )
    residual = (p - q).clamp(min=0)
    replacements = [t.emitted[0] for t in trials if t.n == 0]
    outside = sum(not 0 <= y < _V or residual[y] <= 0 for y in replacements)
    if outside:
        findings.append(
            (
                "wrong_distribution",
                "After a rejection the replacement must come from the residual max(0, p - q), "
                f"which is zero wherever p <= q; {outside} of {len(replacements)} replacements "
                "landed outside it.",
            )
        )


def _probe_one_hot(runner: _SampledRunner, ev: dict, findings: _Findings) -> None:
    """A one-hot drafter proposing d: P(d) must be p(d), and a replacement is never d."""
    d = 1
    p = _probs(0, 5, 1, 1, 1, 1, 1, 0)
    q = one_hot_probs([d], _V)
    trials = runner.run(5, _logits_for(p).repeat(2, 1), q, _T1, 200, lambda g: [d])
    first = [t.emitted[0] for t in trials]
    rejections = [t for t in trials if t.n == 0]
    replaced_by_d = sum(t.emitted[0] == d for t in rejections)
    impossible = [
        t.emitted[0] for t in rejections if not 0 <= t.emitted[0] < _V or p[t.emitted[0]] <= 0
    ]
    n_d = sum(y == d for y in first)
    exact = float(exact_first_token_distribution(p, q[0])[d])  # = p(d): the rule is exact
    exact_biased = float(exact_first_token_distribution(p, q[0], target_distribution)[d])
    z = _z(n_d, len(first), exact)
    _, pvalue = _chi_square(first, p)
    ev["one-hot draft: P(drafted token)"] = (
        f"{n_d / len(first):.3f} vs p_target {exact:.3f} (z = {z:+.2f}, N = {len(first)})"
    )
    ev["one-hot draft: chi-square p-value"] = pvalue
    ev["_z_one_hot"] = z
    if replaced_by_d:
        findings.append(
            (
                "resample_from_target",
                "On rejection, draw the replacement from the residual norm(max(0, p_target - "
                "p_draft)), not from p_target. With a one-hot drafter proposing d the "
                "residual is 0 at d, so the replacement can never be d; you emitted d in "
                f"{replaced_by_d} of {len(rejections)} rejections. Overall P(d) = "
                f"{n_d / len(first):.3f} where p_target(d) = {exact:.2f} (z = {z:+.1f}); "
                f"resampling from p_target predicts p(2 - p) = {exact_biased:.2f} (exact "
                "enumeration). The text stays fluent, but it leans towards what the drafter "
                "liked.",
            )
        )
    if impossible:
        mass = float((p - q[0]).clamp(min=0).sum())
        findings.append(
            (
                "unnormalised_residual",
                "Divide the residual max(0, p_target - p_draft) by its sum before sampling "
                f"from it. Here it sums to {mass:.2f}, and in {len(impossible)} of "
                f"{len(rejections)} rejections ({len(impossible) / len(rejections):.2f}) you "
                "emitted a token the target gives probability 0 (ids "
                f"{sorted(set(impossible))}): a draw from weights summing to {mass:.2f} falls "
                f"off the end about {1 - mass:.2f} of the time.",
            )
        )
    if abs(z) > _Z_LIMIT or pvalue < _P_LIMIT:
        findings.append(
            (
                "wrong_distribution",
                "With a one-hot drafter the first emitted token must be distributed as "
                f"p_target. P(drafted token) = {n_d / len(first):.3f} vs {exact:.3f} (z = "
                f"{z:+.1f}); chi-square p-value over all tokens = {pvalue:.2g}.",
            )
        )


def _probe_filtered(runner: _SampledRunner, ev: dict, findings: _Findings) -> None:
    """Temperature 0.8 and top-k 5, a broad draft: the token at position 2 must follow p[1]."""
    params = SamplingParams(temperature=0.8, top_k=5)
    raw = torch.tensor(
        [
            [-1e4, 1.0, 0.5, 0.2, 0.0, -0.3, -0.5, -1e4],
            [-1e4, 0.2, 0.9, -0.4, 0.6, 0.0, 0.4, -1e4],
            [-1e4, -0.5, 0.0, 0.3, -0.2, 1.2, 0.8, -1e4],
        ],
        dtype=torch.float64,
    )
    draft_raw = torch.tensor([-1e4, 0.8, 0.1, 0.7, 0.3, 0.2, -0.2, -1e4], dtype=torch.float64)
    # Row 0 of the draft equals the target's, so position 1 is always accepted and
    # the second emitted token is exactly the output of verifying position 2.
    q = torch.stack([process_logits(raw[0], params), process_logits(draft_raw, params)])
    trials = runner.run(
        6, raw, q, params, 200, lambda g: torch.multinomial(q, 1, generator=g)[:, 0].tolist()
    )
    second = [t.emitted[1] for t in trials if len(t.emitted) > 1]
    _, pvalue = _chi_square(second, process_logits(raw[1], params))
    ev["temperature 0.8, top-k 5: chi-square p-value (position 2)"] = pvalue
    ev["_p_filtered"] = pvalue
    if pvalue >= _P_LIMIT:
        return
    _, pvalue_raw = _chi_square(second, torch.softmax(raw[1], -1))
    if pvalue_raw >= _P_LIMIT:
        findings.append(
            (
                "ignores_params",
                "Process the target's logits with the sampling parameters "
                "(process_logits(target_logits, params)) before comparing with the draft: the "
                "draft's probabilities already had temperature 0.8 and top-k 5 applied. Your "
                "second-position tokens fit softmax of the raw logits (chi-square p = "
                f"{pvalue_raw:.2g}), not the processed p_target (p = {pvalue:.2g}).",
            )
        )
    else:
        findings.append(
            (
                "wrong_distribution",
                "With temperature 0.8 and top-k 5 the token at the second position must be "
                "distributed as the processed p_target at row 1; chi-square p-value = "
                f"{pvalue:.2g} over {len(second)} rounds.",
            )
        )


_PROBES = [
    ("p_target == p_draft", _probe_equal),
    ("row 0 rules the proposal out and row 1 makes it certain", _probe_shift),
    ("p_target(x) = 0.6 > p_draft(x) = 0.2", _probe_ratio),
    ("p_target(x) = 0.3 < p_draft(x) = 0.6", _probe_rate),
    ("the drafter is one-hot", _probe_one_hot),
    ("temperature is 0.8 and top-k is 5", _probe_filtered),
]
# The most specific diagnosis wins; generic ones last.
_PRIORITY = [
    "no_bonus",
    "off_by_one",
    "accept_with_p_target",
    "resample_from_target",
    "unnormalised_residual",
    "ignores_params",
    "wrong_acceptance",
    "wrong_distribution",
]


def check_accept_sampled(
    accept_sampled: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check the residual rule, and name the classic mistake if it finds one.

    The exercise implements (same signature as :func:`specdec_lib.accept_sampled`)::

        def accept_sampled(target_logits, draft_probs, proposed, params, generator=None):
            '''target_logits (k+1, V) raw logits (process them with params);
            draft_probs (k, V) the distributions the k proposals were drawn from.
            Accept proposed[i] = x with probability min(1, p(x)/q(x)); at the first
            rejection emit a token drawn from norm(max(0, p - q)) and stop; if all k
            are accepted, emit a bonus token drawn from row k. Return (emitted, n_accepted).'''

    About 700 seeded calls on a vocabulary of 8 (``seed`` changes every draw):

    * exact probes, whose correct outcome has probability 1: p == q (accept all k,
      then a bonus token); a proposal that row 0 rules out but row 1 makes certain
      (must be rejected); p(x) > q(x) (must be accepted);
    * distribution probes: a one-hot drafter (P(drafted token) must equal p, and the
      replacement can never be the drafted token), an acceptance rate against
      min(1, p/q), and a draft-model-like case with temperature 0.8 and top-k 5
      (chi-square of the token at the second position against the filtered p).

    Recognised by name: resampling from p_target on rejection, accepting with
    probability p_target(x) alone, no bonus token, an off-by-one between proposals
    and target rows, a residual that is not renormalised, and sampling parameters
    not applied.
    """

    def body(name: str) -> Report:
        _check_signature(
            accept_sampled,
            name,
            5,
            f"{name}(target_logits, draft_probs, proposed, params, generator=None)",
        )
        runner = _SampledRunner(accept_sampled, name, seed)
        ev: dict[str, Any] = {}
        findings: _Findings = []
        errors: list[tuple[str, _Abort]] = []
        for situation, probe in _PROBES:
            # A crash in one probe must not hide what the others reveal: the
            # "accept with p(x)" mistake, for one, divides 0 by 0 when p == q.
            try:
                probe(runner, ev, findings)
            except _Abort as abort:
                if abort.diagnosis == "not_implemented":
                    raise
                errors.append((situation, abort))
        numbers = {key: ev.pop(key) for key in list(ev) if key.startswith("_")}
        ev["calls"] = runner.calls
        if findings:
            findings.sort(key=lambda f: _PRIORITY.index(f[0]))
            diagnosis, message = findings[0]
            others = sorted({d for d, _ in findings[1:]} - {diagnosis})
            if others:
                ev["also seen"] = ", ".join(DIAGNOSES[d] for d in others)
            if errors:
                ev["also raised"] = f"{errors[0][1].message} (when {errors[0][0]})"
            return Report("check_accept_sampled", name, False, message, diagnosis, ev)
        if errors:
            situation, abort = errors[0]
            return Report(
                "check_accept_sampled",
                name,
                False,
                f"{abort.message} This happened when {situation}.",
                abort.diagnosis,
                {**ev, **abort.evidence},
            )
        return Report(
            "check_accept_sampled",
            name,
            True,
            "Correct: all exact probes behave as the residual rule must (accept everything "
            "and add a bonus when p == q, reject what row 0 rules out, accept when p > q), "
            "and the sampled outputs match p_target (one-hot draft: z = "
            f"{numbers['_z_one_hot']:+.2f}; acceptance rate: z = {numbers['_z_rate']:+.2f}; "
            f"temperature/top-k case: chi-square p = {numbers['_p_filtered']:.2g}). No classic "
            "mistake detected.",
            None,
            ev,
        )

    return _run_check("check_accept_sampled", accept_sampled, body, seed, timeout)


# ---------------------------------------------------------------------------------
# check_speculative_generate
# ---------------------------------------------------------------------------------


class _WatchedDrafter:
    """Forwards to a drafter, counts calls, stops a loop that asks for one context forever."""

    MAX_REPEATS = 25

    def __init__(self, drafter: Any) -> None:
        self.drafter = drafter
        self.name = drafter.name
        self.calls = 0
        self.max_k = 0
        self._last: int | None = None
        self._repeats = 0

    def propose(self, context: Sequence[int], k: int, params: Any = None, generator: Any = None):
        self.calls += 1
        self.max_k = max(self.max_k, int(k))
        if len(context) == self._last:
            self._repeats += 1
            if self._repeats >= self.MAX_REPEATS:
                raise _NoProgress(
                    f"Your loop stopped making progress: the drafter was asked {self._repeats + 1} "
                    f"times in a row to extend the same {len(context)}-token context. Every round "
                    "must emit at least one token: the accepted proposals plus the target's own "
                    "token (the correction at the first rejection, or the bonus)."
                )
        else:
            self._last, self._repeats = len(context), 0
        return self.drafter.propose(context, k, params, generator)


@contextmanager
def _count_passes(model: torch.nn.Module) -> Iterator[list[int]]:
    counter = [0]
    handle = model.register_forward_pre_hook(
        lambda module, args: counter.__setitem__(0, counter[0] + 1)
    )
    try:
        yield counter
    finally:
        handle.remove()


def check_speculative_generate(
    speculative_generate: Callable,
    target: torch.nn.Module | None = None,
    draft: torch.nn.Module | None = None,
    seed: int = 0,
    timeout: float | None = 120.0,
) -> Report:
    """Check greedy speculative decoding: same tokens as :func:`generate`, fewer target passes.

    The exercise implements::

        def speculative_generate(target, drafter, prompt_token_ids, params, k) -> list[int]:
            '''Repeat: drafter.propose(tokens, up to k, params) -> Proposal; score
            context + proposal in ONE target forward pass; keep what verification
            accepts plus one token from the target. Return exactly params.max_tokens
            new tokens.'''

    Five greedy cases on the trained target (``target``/``draft`` default to the
    shipped models): copy prompts with an n-gram drafter at k = 4 and k = 1, a novel
    prompt, and a draft-model drafter at k = 3, with lengths that do not divide
    evenly into rounds. Each output must equal plain greedy decoding token for
    token and have exactly ``max_tokens`` tokens; target forward passes are counted
    (with a hook) and compared with the library's on the copy prompts, where
    speculation must save passes. The sampled path is what
    :func:`check_accept_sampled` tests.
    """
    from .data import workload_prompts
    from .generate import generate
    from .generate import speculative_generate as library_speculative_generate
    from .tokenizer import Tokenizer
    from .weights import load_model

    def body(name: str) -> Report:
        _check_signature(
            speculative_generate, name, 5, f"{name}(target, drafter, prompt_token_ids, params, k)"
        )
        model = target if target is not None else load_model("target")
        draft_model = draft if draft is not None else load_model("draft")
        tok = Tokenizer()
        copy = [tok.encode(p) for p in workload_prompts("copy", 3, seed=100 + seed)]
        novel = tok.encode(workload_prompts("novel", 1, seed=100 + seed)[0])
        cases = [  # (label, prompt, make_drafter, k, max_tokens, counts towards speed)
            ("copy prompt 1, n-gram drafter, k = 4", copy[0], NgramDrafter, 4, 40, True),
            ("copy prompt 2, n-gram drafter, k = 4", copy[1], NgramDrafter, 4, 37, True),
            ("novel prompt, n-gram drafter, k = 4", novel, NgramDrafter, 4, 23, False),
            (
                "copy prompt 3, draft model, k = 3",
                copy[2],
                lambda: DraftModelDrafter(draft_model),
                3,
                17,
                False,
            ),
            ("copy prompt 1, n-gram drafter, k = 1", copy[0], NgramDrafter, 1, 9, False),
        ]
        ev: dict[str, Any] = {}
        student_passes = library_passes = speed_tokens = 0
        drafter_calls = 0
        for label, prompt, make_drafter, k, max_tokens, for_speed in cases:
            params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
            watched = _WatchedDrafter(make_drafter())
            with _count_passes(model) as counted, torch.no_grad():
                result = _call(
                    speculative_generate,
                    name,
                    (model, watched, list(prompt), params, k),
                    during=f"on the {label}",
                )
            student_count = counted[0]
            got = _as_tokens(result, f"the value `{name}` returns")
            expected = generate(model, prompt, params)
            with _count_passes(model) as counted:
                library_speculative_generate(model, make_drafter(), prompt, params, k)
            reference_passes = counted[0]
            drafter_calls += watched.calls
            if len(got) != max_tokens:
                hint = (
                    "The last round must not overrun: draft at most max_tokens - emitted - 1 "
                    "tokens (a round can emit one more than it drafts), or cut the output."
                    if len(got) > max_tokens
                    else "Keep going until exactly max_tokens new tokens were emitted, and "
                    "return only the new tokens (not the prompt)."
                )
                return Report(
                    "check_speculative_generate",
                    name,
                    False,
                    f"On the {label} with max_tokens = {max_tokens} you returned "
                    f"{len(got)} tokens. {hint}",
                    "wrong_length",
                    {"case": label, "max_tokens": max_tokens, "returned": len(got)},
                )
            if got != expected:
                at = next(i for i in range(max_tokens) if got[i] != expected[i])
                return Report(
                    "check_speculative_generate",
                    name,
                    False,
                    f"Greedy speculative decoding must return exactly what plain greedy decoding "
                    f"returns. On the {label} the outputs first differ at new token {at}: expected "
                    f"{expected[at]} ({_show_tokens(expected[at : at + 1])}), got {got[at]} "
                    f"({_show_tokens(got[at : at + 1])}), after {_show_tokens(expected[:at], 30)}. "
                    "Common causes: verifying with the wrong rows of logits (you need the last "
                    "m + 1 rows for m proposals), appending the rejected proposal, or a KV cache "
                    "that still holds rejected tokens.",
                    "mismatch",
                    {"case": label, "first_difference_at": at},
                )
            if for_speed:
                student_passes += student_count
                library_passes += reference_passes
                speed_tokens += max_tokens
        ev["cases"] = len(cases)
        ev["copy prompts: tokens per target pass (yours)"] = speed_tokens / max(student_passes, 1)
        ev["copy prompts: tokens per target pass (library)"] = speed_tokens / library_passes
        ev["drafter calls"] = drafter_calls
        if student_passes >= speed_tokens:
            why = "are proposals accepted?" if drafter_calls else "the drafter was never called"
            return Report(
                "check_speculative_generate",
                name,
                False,
                f"The tokens are right, but you ran {student_passes} target forward passes for "
                f"{speed_tokens} tokens on copy prompts, at least one per token: that is plain "
                f"decoding ({why}). "
                "Score all proposals in one target pass and keep every accepted token.",
                "not_speculating",
                ev,
            )
        if student_passes > 1.5 * library_passes + 2:
            return Report(
                "check_speculative_generate",
                name,
                False,
                f"The tokens are right, but you ran {student_passes} target forward passes where "
                f"the library needs {library_passes} for the same copy prompts. Each round should "
                "cost exactly one target pass over the context plus the proposals.",
                "too_many_passes",
                ev,
            )
        return Report(
            "check_speculative_generate",
            name,
            True,
            f"Correct: identical to plain greedy decoding on all {len(cases)} cases (n-gram and "
            f"draft-model drafters, k = 1, 3 and 4, lengths that do not divide into rounds), with "
            f"{speed_tokens / student_passes:.2f} tokens per target pass on the copy prompts "
            f"(library: {speed_tokens / library_passes:.2f}).",
            None,
            ev,
        )

    return _run_check("check_speculative_generate", speculative_generate, body, seed, timeout)
