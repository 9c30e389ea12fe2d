"""Call student code without letting it crash, hang or disturb the notebook.

Exceptions, wrong types and hangs (a CPU-time limit) become failing reports; a check
seeds, then restores, the global random generators and runs on one torch thread, so its
report repeats and the notebook is left as it was. Student code is called one way:
:func:`call_student`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .mistakes import MISTAKES, REFERENCES
from .report import Diagnosis, Report

# Where ``scripts/coursework.py grade`` collects the reports of a notebook.
LOG_ENV = "SPECDEC_GRADING_LOG"

# The limit is on CPU time, which a runaway loop burns and a busy machine does not
# inflate; a wall-clock backstop at _WALL times it catches code that only waits.
_WALL = 5

# Frames in this package are the grader's and the engine's, not the student's.
_LIBRARY = Path(__file__).resolve().parents[1]


class Abort(BaseException):
    """Ends a check with a failing report: the diagnosis's advice, then ``details``. A
    BaseException, so that student code catching ``Exception`` cannot swallow it."""

    def __init__(self, diagnosis: Diagnosis, details: str, **evidence: Any) -> None:
        self.message = f"{diagnosis.advice} {details}".strip()
        super().__init__(self.message)
        self.diagnosis, self.evidence = diagnosis, evidence


class _Timeout(BaseException):
    """Raised by the alarm."""


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` of CPU time (main thread, Unix); the
    alarms repeat every second, so a bare ``except:`` is interrupted again."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout()

    timers = [(signal.SIGPROF, signal.ITIMER_PROF, 1), (signal.SIGALRM, signal.ITIMER_REAL, _WALL)]
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
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if _LIBRARY not in Path(f.filename).resolve().parents]
    f = next((f for f in reversed(mine) if "torch" not in f.filename), None)
    return f" (in `{f.name}`, line {f.lineno}: `{(f.line or '').strip()}`)" if f else ""


def call_student(fn: Callable, name: str, *args: Any, during: str = "") -> Any:
    """``fn(*args)``; anything it raises becomes a failing report."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise Abort(Diagnosis.NOT_IMPLEMENTED, f"`{name}` is not implemented yet.") from None
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        where = f"{_where(exc)}{' ' + during if during else ''}"
        raise Abort(
            Diagnosis.RAISED, f"`{name}` raised {detail}{where}.", exception=detail
        ) from None


def _record(report: Report) -> None:
    """Append the report to the grading log, when ``coursework.py grade`` asked for one."""
    if not (path := os.environ.get(LOG_ENV)):
        return
    ipython = sys.modules.get("IPython")  # imported when a notebook kernel runs the check
    shell = ipython.get_ipython() if ipython is not None else None
    # In[n] is the input of the cell with prompt number n, the running one included.
    inputs = shell.user_ns.get("In") if shell is not None else None
    count = len(inputs) - 1 if isinstance(inputs, list) else None
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(report.as_dict() | {"execution_count": count}) + "\n")


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
        abort = Abort(Diagnosis.TIMEOUT, f"It used {timeout} s of CPU time.")
        report = Report(check, name, False, abort.message, abort.diagnosis)
    except Exception as exc:  # a bug in the check itself
        report = Report(check, name, False, f"Please report this: {exc!r}.", Diagnosis.GRADER_ERROR)
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
        raise Abort(Diagnosis.WRONG_TYPE, f"{what} must be a list of ids{hint}: {value!r:.60}")
    return [as_int(v, f"each token id of {what}") for v in value]


def as_verification(value: Any, name: str) -> tuple[list[int], int]:
    """``(emitted, n_accepted)`` as plain ints, from what a verification rule returned."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        what = f"`{name}` must return a pair (emitted, n_accepted), got {value!r:.60}."
        raise Abort(Diagnosis.WRONG_TYPE, what)
    return as_tokens(value[0], "emitted"), as_int(value[1], "n_accepted")


def catch_rates(check: Callable, seeds: Sequence[int], **kwargs: object) -> dict[str, tuple]:
    """``{mistake: (caught, runs)}``: how often ``check`` gives each of its mistakes their
    diagnosis over ``seeds``; under ``"false alarms"``, how often the reference failed."""
    name, n = check.__name__, len(seeds)
    rates = {
        label: (sum(check(m.function, seed=s, **kwargs).diagnosis is m.diagnosis for s in seeds), n)
        for label, m in MISTAKES[name].items()
    }
    rates["false alarms"] = (sum(not check(REFERENCES[name], seed=s, **kwargs) for s in seeds), n)
    return rates
