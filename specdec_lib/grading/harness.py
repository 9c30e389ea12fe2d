"""Call student code without letting it crash, hang or disturb the notebook.

A check never raises because of the student's code: an exception
(``NotImplementedError`` is "not implemented yet"), a wrong return type, a hang
(a per-check limit on CPU time) all become failing reports, so a notebook that
calls a check keeps running. A check seeds and then restores the global random
generators and runs on one torch thread, so it prints the same report every time
and leaves the notebook's state as it found it.

The checks themselves live one per module beside this one; what they share is
here: running a check (:func:`run_check`), calling student code
(:func:`call_student`), turning what it returns into plain token ids
(:func:`as_tokens`, :func:`as_verification`), and recognising a known mistake by
its outputs (:func:`fingerprint`).
"""

from __future__ import annotations

import inspect
import json
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .mistakes import Mistake
from .report import Diagnosis, Report

# Where ``scripts/coursework.py grade`` collects the reports of a notebook.
LOG_ENV = "SPECDEC_GRADING_LOG"

# The limit is on CPU time (ITIMER_PROF), which a runaway loop burns and which a busy
# or paused machine does not inflate; a wall-clock backstop at WALL_FACTOR times the
# limit catches code that hangs without computing (waiting on input, say).
WALL_FACTOR = 5

# Frames in this package are the grader's and the engine's, not the student's.
LIBRARY = Path(__file__).resolve().parents[1]


class Abort(Exception):
    """Ends a check early with a failing report."""

    def __init__(self, diagnosis: Diagnosis, message: str, **evidence: Any) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis
        self.message = message
        self.evidence = evidence


class NoProgress(BaseException):
    """Raised from inside student code when its loop visibly stopped advancing.

    A BaseException, like the timeout, so that student code catching ``Exception``
    cannot swallow it.
    """


class _Timeout(BaseException):
    """Raised by the alarm."""


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


def _where(exc: BaseException) -> str:
    """' (in `f`, line 3: `code`)' for the innermost frame outside this library."""
    frames = traceback.extract_tb(exc.__traceback__)
    outside = [
        f
        for f in frames
        if LIBRARY not in Path(f.filename).resolve().parents and "torch" not in f.filename
    ]
    if not outside:
        return ""
    f = outside[-1]
    code = f" `{f.line.strip()}`" if f.line else ""
    return f" (in `{f.name}`, line {f.lineno}:{code})"


def call_student(
    fn: Callable, name: str, args: tuple, kwargs: dict | None = None, during: str = ""
) -> Any:
    """Call student code; turn anything it raises into a failing report."""
    try:
        return fn(*args, **(kwargs or {}))
    except NotImplementedError:
        raise Abort(
            Diagnosis.NOT_IMPLEMENTED,
            f"`{name}` is not implemented yet: replace the `raise NotImplementedError` line "
            "with your code, run that cell, then run this check again.",
        ) from None
    except Abort:
        raise
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise Abort(
            Diagnosis.RAISED,
            f"`{name}` raised {detail}{_where(exc)}{' ' + during if during else ''}. "
            "Fix the error and run this check again.",
            exception=detail,
        ) from None


def check_signature(fn: Callable, name: str, n_args: int, expected: str) -> None:
    """Abort unless ``fn`` accepts ``n_args`` positional arguments."""
    try:
        inspect.signature(fn).bind(*range(n_args))
    except TypeError:
        raise Abort(
            Diagnosis.WRONG_SIGNATURE,
            f"`{name}` must be callable as `{expected}`; its signature is "
            f"`{name}{inspect.signature(fn)}`.",
        ) from None
    except ValueError:  # builtins without a signature: just try calling
        pass


def _record(report: Report) -> None:
    """Append the report to the grading log, when ``coursework.py grade`` asked for one."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    entry = report.as_dict()
    # Already imported when a notebook kernel runs the check; never imported here.
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    # In[n] is the input of the cell with prompt number n, the running one included
    # (shell.execution_count is already one ahead while a cell runs).
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
        if subject is None or not callable(subject) and not hasattr(subject, "propose"):
            raise Abort(
                Diagnosis.NOT_A_FUNCTION,
                f"Pass the function (or class) itself, without calling it: got "
                f"{type(subject).__name__} {subject!r:.60}.",
            )
        with _sandbox(seed), _time_limit(timeout):
            report = body(name)
    except Abort as abort:
        report = Report(check, name, False, abort.message, abort.diagnosis, abort.evidence)
    except _Timeout:
        report = Report(
            check,
            name,
            False,
            f"`{name}` used more than {timeout:g} s of CPU time and was stopped. Look for a "
            "loop whose condition never changes (for example a round that emits no token), or "
            "for work repeated far more often than needed.",
            Diagnosis.TIMEOUT,
            {"cpu_time_limit_s": timeout},
        )
    except NoProgress as stuck:
        report = Report(check, name, False, str(stuck), Diagnosis.NO_PROGRESS)
    except Exception as exc:  # a bug in the check, or an object it cannot handle
        report = Report(
            check,
            name,
            False,
            f"The check could not run: {type(exc).__name__}: {exc}. Please report this.",
            Diagnosis.GRADER_ERROR,
        )
    _record(report)
    return report


def as_tokens(value: Any, what: str) -> list[int]:
    """A list of int token ids from a list, tuple, 1-D tensor or array of integers."""
    if isinstance(value, torch.Tensor | np.ndarray):
        if value.ndim != 1 or not (
            value.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8)
            or (isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.integer))
        ):
            raise Abort(
                Diagnosis.WRONG_TYPE,
                f"{what} must be a list of int token ids, got a "
                f"{type(value).__name__} of dtype {value.dtype} and shape {tuple(value.shape)}",
            )
        return [int(v) for v in value.tolist()]
    if value is None:
        raise Abort(
            Diagnosis.WRONG_TYPE,
            f"{what} must be a list of int token ids, got None: is a `return` missing, or does "
            "a branch return None where it should return an empty list []?",
        )
    if not isinstance(value, list | tuple):
        raise Abort(
            Diagnosis.WRONG_TYPE,
            f"{what} must be a list of int token ids, got {type(value).__name__}: {value!r:.80}",
        )
    return [_as_int(v, what, "contain int token ids, found") for v in value]


def _as_int(value: Any, what: str, must: str) -> int:
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise Abort(
            Diagnosis.WRONG_TYPE, f"{what} must {must} {type(value).__name__} {value!r:.40}"
        )
    return int(value)


def as_verification(value: Any, name: str) -> tuple[list[int], int]:
    """``(emitted, n_accepted)`` as plain ints, from what a verification rule returned."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise Abort(
            Diagnosis.WRONG_TYPE,
            f"`{name}` must return a pair `(emitted, n_accepted)`: the emitted token ids and "
            f"the number of proposals accepted; got {type(value).__name__} {value!r:.80}",
        )
    return as_tokens(value[0], "emitted"), _as_int(value[1], "n_accepted", "be an int, got")


def show_tokens(
    tokens: Sequence[int], decode: Callable[[list[int]], str | None] | None = None, limit: int = 48
) -> str:
    """The last ``limit`` token ids, as text where ``decode`` can read them, else as a list."""
    tokens = list(tokens)
    cut = tokens[-limit:]
    prefix = "…" if len(tokens) > limit else ""
    text = decode(cut) if decode is not None and cut else None
    return prefix + (repr(text) if text is not None else str(cut))


def fingerprint(
    mistakes: Iterable[Mistake],
    cases: Sequence[Any],
    expected: Sequence[Any],
    got: Sequence[Any],
    run: Callable[[Callable, Any], Any],
) -> tuple[Diagnosis, str] | None:
    """``(diagnosis, "a/b")`` of the known mistake the student's outputs agree with, if any.

    ``run(mistake.function, case)`` is that mistake's output on a case. A mistake
    fits when the student agrees with it on at least 90% of the cases where that
    mistake differs from the correct answer, and it explains at least 60% of the
    student's wrong answers.
    """
    wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
    best = None
    for mistake in mistakes:
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


def failure(
    found: tuple[Diagnosis, str] | None,
    advice: Mapping[Diagnosis, str],
    unrecognised: tuple[Diagnosis, str],
    example: str,
    evidence: dict[str, Any],
) -> Abort:
    """The failing verdict of a check with one right answer per input.

    ``found`` is what :func:`fingerprint` (or a sharper test) recognised: its advice
    heads the message. Otherwise ``unrecognised`` (a diagnosis and a message) does.
    Either way the first failing input, ``example``, follows.
    """
    if found is None:
        diagnosis, message = unrecognised
        return Abort(diagnosis, f"{message} {example}", **evidence)
    diagnosis, agreement = found
    return Abort(
        diagnosis,
        f"{advice[diagnosis]} {example}",
        **evidence,
        agrees_with_this_mistake_on=agreement,
    )
