"""Call student code without letting it crash, hang or disturb the notebook.

A check never raises because of the student's code: an exception, a wrong return
type or a hang (a limit on CPU time) become failing reports, so a notebook that calls
a check keeps running. A check seeds and then restores the global random generators
and runs on one torch thread, so it prints the same report every time and leaves the
notebook's state as it found it. Student code is called one way, :func:`call_student`;
:func:`compare` is the whole of a check whose exercise has one right answer per input.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .mistakes import Mistake
from .report import Diagnosis, Report

# Where ``scripts/coursework.py grade`` collects the reports of a notebook.
LOG_ENV = "SPECDEC_GRADING_LOG"

# The limit is on CPU time, which a runaway loop burns and a busy machine does not
# inflate; a wall-clock backstop at WALL_FACTOR times it catches code that only waits.
WALL_FACTOR = 5

# Frames in this package are the grader's and the engine's, not the student's.
LIBRARY = Path(__file__).resolve().parents[1]


class Abort(Exception):
    """Ends a check with a failing report: the diagnosis's advice, then ``details``."""

    def __init__(self, diagnosis: Diagnosis, details: str, **evidence: Any) -> None:
        self.message = f"{diagnosis.advice} {details}".strip()
        super().__init__(self.message)
        self.diagnosis, self.evidence = diagnosis, evidence


class NoProgress(BaseException):
    """Raised from inside student code whose loop stopped advancing (a BaseException, like
    the timeout, so that student code catching ``Exception`` cannot swallow it)."""


class _Timeout(BaseException):
    """Raised by the alarm."""


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` of CPU time (main thread, Unix); else no limit.

    The alarms repeat every second, so code that catches the first with a bare
    ``except:`` is interrupted again.
    """
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout()

    timers = [
        (signal.SIGPROF, signal.ITIMER_PROF, 1),
        (signal.SIGALRM, signal.ITIMER_REAL, WALL_FACTOR),
    ]
    saved = [(signum, signal.signal(signum, on_alarm)) for signum, _, _ in timers]
    for _, which, factor in timers:
        signal.setitimer(which, factor * seconds, 1.0)
    try:
        yield
    finally:
        for (_, which, _), (signum, handler) in zip(timers, saved, strict=True):
            signal.setitimer(which, 0)
            signal.signal(signum, handler)


@contextmanager
def _sandbox(seed: int) -> Iterator[None]:
    """Seed the global generators (students often draw from them), restore them afterwards
    (the notebook's stream stays its own), and use one torch thread (tiny tensors)."""
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


def _where(exc: BaseException) -> str:
    """' (in `f`, line 3: `code`)' for the innermost frame outside this library."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if LIBRARY not in Path(f.filename).resolve().parents and "torch" not in f.filename
    ]
    if not frames:
        return ""
    f = frames[-1]
    return f" (in `{f.name}`, line {f.lineno}:{f' `{f.line.strip()}`' if f.line else ''})"


def call_student(fn: Callable, name: str, *args: Any, during: str = "") -> Any:
    """``fn(*args)``; anything it raises becomes a failing report."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise Abort(Diagnosis.NOT_IMPLEMENTED, f"`{name}` is not implemented yet.") from None
    except Abort:
        raise
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        where = f"{_where(exc)}{' ' + during if during else ''}"
        raise Abort(
            Diagnosis.RAISED, f"`{name}` raised {detail}{where}.", exception=detail
        ) from None


def check_signature(fn: Callable, name: str, expected: str) -> None:
    """Abort unless ``fn`` accepts as many positional arguments as ``expected`` shows."""
    n_args = expected.count(",") + 1 - expected.count("=")
    try:
        inspect.signature(fn).bind(*range(n_args))
    except TypeError:
        raise Abort(
            Diagnosis.WRONG_SIGNATURE,
            f"`{name}` must be callable as `{expected}`; it is `{name}{inspect.signature(fn)}`.",
        ) from None
    except ValueError:  # builtins without a signature: just try calling
        pass


def _record(report: Report) -> None:
    """Append the report to the grading log, when ``coursework.py grade`` asked for one."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    entry = report.as_dict()
    ipython = sys.modules.get("IPython")  # imported when a notebook kernel runs the check
    shell = ipython.get_ipython() if ipython is not None else None
    # In[n] is the input of the cell with prompt number n, the running one included.
    inputs = shell.user_ns.get("In") if shell is not None else None
    entry["execution_count"] = len(inputs) - 1 if isinstance(inputs, list) else None
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def run_check(
    check: str, subject: Any, body: Callable[[str], Report], seed: int, timeout: float | None
) -> Report:
    """Run ``body(name)`` sandboxed and time-limited; whatever happens, return a report."""
    name = str(getattr(subject, "__name__", None) or type(subject).__name__)
    try:
        if not callable(subject):
            raise Abort(Diagnosis.NOT_A_FUNCTION, f"Got {type(subject).__name__} {subject!r:.60}.")
        with _sandbox(seed), _time_limit(timeout):
            report = body(name)
    except Abort as abort:
        report = Report(check, name, False, abort.message, abort.diagnosis, abort.evidence)
    except _Timeout:
        details = f"`{name}` used more than {timeout:g} s of CPU time and was stopped."
        abort = Abort(Diagnosis.TIMEOUT, details, cpu_time_limit_s=timeout)
        report = Report(check, name, False, abort.message, abort.diagnosis, abort.evidence)
    except NoProgress as stuck:
        abort = Abort(Diagnosis.NO_PROGRESS, str(stuck))
        report = Report(check, name, False, abort.message, abort.diagnosis)
    except Exception as exc:  # a bug in the check, or an object it cannot handle
        abort = Abort(Diagnosis.GRADER_ERROR, f"{type(exc).__name__}: {exc}.")
        report = Report(check, name, False, abort.message, abort.diagnosis)
    _record(report)
    return report


def as_int(value: Any, what: str) -> int:
    """An int from an int, a NumPy integer or a 0-d integer tensor; else a failing report."""
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise Abort(Diagnosis.WRONG_TYPE, f"{what} must be an int, got {value!r:.40}.")
    return int(value)


def as_tokens(value: Any, what: str) -> list[int]:
    """A list of int token ids from a list, tuple, 1-D tensor or array of integers."""
    if isinstance(value, torch.Tensor | np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, list | tuple):
        hint = " (is a `return` missing? return [] for nothing)" if value is None else ""
        raise Abort(
            Diagnosis.WRONG_TYPE, f"{what} must be a list of token ids{hint}: {value!r:.60}"
        )
    return [as_int(v, f"each token id of {what}") for v in value]


def as_verification(value: Any, name: str) -> tuple[list[int], int]:
    """``(emitted, n_accepted)`` as plain ints, from what a verification rule returned."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        what = f"`{name}` must return a pair (emitted, n_accepted), got {value!r:.60}."
        raise Abort(Diagnosis.WRONG_TYPE, what)
    return as_tokens(value[0], "emitted"), as_int(value[1], "n_accepted")


def fingerprint(
    mistakes: Mapping[str, Mistake],
    cases: Sequence[Any],
    expected: Sequence[Any],
    got: Sequence[Any],
    answer: Callable[[Callable, Any], Any],
) -> tuple[Diagnosis, str] | None:
    """``(diagnosis, "a/b")`` of the known mistake the student's answers agree with, if any.

    A mistake fits when the student agrees with it on at least 90% of the cases where it
    differs from the right answer, and it explains at least 60% of the student's wrong
    answers; the best fit wins.
    """
    wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
    best = None
    for mistake in mistakes.values():
        theirs = [answer(mistake.function, case) for case in cases]
        differs = [i for i in range(len(cases)) if theirs[i] != expected[i]]
        agree = sum(got[i] == theirs[i] for i in differs)
        explained = sum(got[i] == theirs[i] for i in wrong) / len(wrong)
        if differs and agree >= 0.9 * len(differs) and explained >= 0.6:
            score = (explained, agree / len(differs))
            if best is None or score > best[0]:
                best = (score, mistake.diagnosis, f"{agree}/{len(differs)}")
    return None if best is None else (best[1], best[2])


def compare(
    check: str,
    name: str,
    fn: Callable,
    cases: Sequence[Any],
    answer: Callable[[Callable, Any], Any],
    expected: Sequence[Any],
    mistakes: Mapping[str, Mistake],
    describe: Callable[[Any], str],
) -> Report:
    """The verdict of a check with one right answer per case, naming a known mistake.

    ``answer(fn, case)`` is ``fn``'s answer as plain data (the student's through
    :func:`call_student`), ``expected`` the library's, ``describe(case)`` a case in words.
    """
    got = [answer(fn, case) for case in cases]
    wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
    evidence: dict[str, Any] = {"cases": len(cases), "wrong": len(wrong)}
    if not wrong:
        return Report(check, name, True, f"Correct on all {len(cases)} cases.", None, evidence)
    found = fingerprint(mistakes, cases, expected, got, answer)
    if found is not None:
        evidence["agrees with this mistake on"] = found[1]
    i = wrong[0]
    details = (
        f"Wrong on {len(wrong)} of {len(cases)} cases; the first: {describe(cases[i])}: "
        f"expected {expected[i]!r:.200}, got {got[i]!r:.200}."
    )
    raise Abort(found[0] if found else Diagnosis.WRONG_ANSWER, details, **evidence)
