"""Call student code without letting it crash, hang or disturb the notebook.

Exceptions, wrong types and hangs (a CPU-time limit) become failing reports; a check
seeds, then restores, the global random generators and runs on one torch thread, so its
report repeats and the notebook is left as it was. Student code is called one way:
:func:`call_student`.

A check names the library's own implementations of its exercise (:func:`forbidden`; the
grader's reference solution always counts too). While student code runs, and only then, a
profile hook watches for a call of one of them, however it is reached (an imported name,
an alias, a method, another library function that calls it), and the check then fails
with :data:`Diagnosis.DELEGATES`. The check's own computations run unwatched, and so do
the grader's reference and mistakes when a check is run on them
(:func:`~.mistakes.catch_rates`). A check whose exercise hands the student a random
generator can also refuse code that draws from any other source
(:data:`Diagnosis.IGNORES_GENERATOR`); the grader's own functions are trusted not to.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import random
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
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


# --- the library's own implementations, watched while student code runs ----------------


def _codes(implementation: Any) -> list[CodeType]:
    """The code objects of a function, method, class (its methods) or partial."""
    if isinstance(implementation, functools.partial):
        return _codes(implementation.func)
    if isinstance(implementation, type):
        return [c for member in vars(implementation).values() for c in _codes(member)]
    function = inspect.unwrap(getattr(implementation, "__func__", implementation))
    code = getattr(function, "__code__", None)
    return [code] if isinstance(code, CodeType) else []


def _label(implementation: Any) -> str:
    function = inspect.unwrap(getattr(implementation, "__func__", implementation))
    module = getattr(function, "__module__", None) or "specdec_lib"
    return f"{module}.{getattr(function, '__qualname__', repr(function))}"


def forbidden(*implementations: Any, **labelled: Any) -> dict[CodeType, str]:
    """The code objects of the library's own implementations of an exercise, each with the
    name a report gives it (a keyword's name, or the implementation's module and name)."""
    table = {code: _label(impl) for impl in implementations for code in _codes(impl)}
    table |= {code: label for label, impl in labelled.items() for code in _codes(impl)}
    return table


@dataclass
class _Watch:
    """The forbidden code of the running check, the grader's own functions (which it runs as
    students, unwatched: :func:`_trusted`), and the first forbidden code student code ran."""

    codes: dict[CodeType, str]
    trusted: set[Any] = field(default_factory=set)
    found: str | None = None

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        """A profile function (``sys.setprofile``), active only while student code runs:
        anything it calls runs on the student's behalf, so any forbidden call counts, made
        directly or from inside another library function."""
        if event == "call" and self.found is None:
            self.found = self.codes.get(frame.f_code)


_WATCHES: list[_Watch] = []  # the running check's


def _trusted() -> set[Any]:
    """The grader's own solutions and mistakes, which its checks run as students: unwatched,
    and trusted to draw only from the generator they are given. Read when a check starts,
    not when this module is imported: each exercise's module registers its own
    (:func:`~.mistakes.register`) after this module loads."""
    return set(REFERENCES.values()) | {m.function for t in MISTAKES.values() for m in t.values()}


def _is_trusted(fn: Callable, trusted: set[Any]) -> bool:
    owner = getattr(fn, "__self__", None)  # a bound method: of a trusted class's instance?
    try:
        return fn in trusted or (owner is not None and type(owner) in trusted)
    except TypeError:  # unhashable: not one of the grader's
        return False


def _delegated(name: str, watch: _Watch, fn: Callable) -> Abort:
    label = str(watch.found)
    if any(watch.codes.get(code) == label for code in _codes(fn)):
        what = f"`{name}` is `{label}`, the library's own implementation of this exercise."
    else:
        what = (
            f"`{name}` called `{label}`, the library's own implementation of this exercise "
            "(directly or through another library function)."
        )
    return Abort(Diagnosis.DELEGATES, what, called=label)


# --- other sources of randomness than the generator handed in --------------------------


def _global_draws() -> tuple:
    """What drawing from a global generator changes: torch's, NumPy's and Python's."""
    return torch.get_rng_state(), np.random.get_state()[1:3], random.getstate()


def _drew_elsewhere(before: tuple) -> str | None:
    torch_state, np_state, py_state = _global_draws()
    if not torch.equal(torch_state, before[0]):
        return "torch's global generator (a torch.rand, torch.multinomial, ... without it)"
    if not (np.array_equal(np_state[0], before[1][0]) and np_state[1] == before[1][1]):
        return "NumPy's global generator (np.random)"
    if py_state != before[2]:
        return "Python's random module"
    return None


#: What :mod:`specdec_lib.analysis.enumeration` says when a rule draws without its generator.
_REFUSED_DRAW = "without the generator it was given"


def call_student(
    fn: Callable, name: str, *args: Any, during: str = "", own_generator: bool = False
) -> Any:
    """``fn(*args)``; anything it raises becomes a failing report, and so does a call of
    the running check's forbidden code. With ``own_generator``, so does a draw from any
    random generator but the one among ``args`` (torch's, NumPy's, Python's global one)."""
    trusted = bool(_WATCHES) and _is_trusted(fn, _WATCHES[-1].trusted)
    watch = _WATCHES[-1] if _WATCHES and not trusted else None
    before = _global_draws() if own_generator and not trusted else None
    previous = sys.getprofile()
    try:
        if watch is not None:
            sys.setprofile(watch.profile)
        try:
            result = fn(*args)
        finally:
            if watch is not None:
                sys.setprofile(previous)
    except NotImplementedError:
        raise Abort(Diagnosis.NOT_IMPLEMENTED, f"`{name}` is not implemented yet.") from None
    except Exception as exc:
        if watch is not None and watch.found is not None:
            raise _delegated(name, watch, fn) from None
        detail = f"{type(exc).__name__}: {exc}"
        where = f"{_where(exc)}{' ' + during if during else ''}"
        if own_generator and _REFUSED_DRAW in str(exc):
            what = f"`{name}` {str(exc).split(':')[0].removeprefix('the rule ')}{where}."
            raise Abort(Diagnosis.IGNORES_GENERATOR, what, exception=detail) from None
        raise Abort(
            Diagnosis.RAISED, f"`{name}` raised {detail}{where}.", exception=detail
        ) from None
    except BaseException:
        if watch is not None and watch.found is not None:
            raise _delegated(name, watch, fn) from None
        raise
    if watch is not None and watch.found is not None:
        raise _delegated(name, watch, fn)
    if before is not None and (source := _drew_elsewhere(before)):
        raise Abort(Diagnosis.IGNORES_GENERATOR, f"`{name}` drew from {source}.")
    return result


def _record(report: Report) -> None:
    """Append the report to the grading log, when ``coursework.py grade`` asked for one."""
    if not (path := os.environ.get(LOG_ENV)):
        return
    ipython = sys.modules.get("IPython")  # imported when a notebook kernel runs the check
    shell = ipython.get_ipython() if ipython is not None else None
    # In[n] is the input of the cell with prompt number n, the running one included.
    inputs = shell.user_ns.get("In") if shell is not None else None
    count = len(inputs) - 1 if isinstance(inputs, list) else None
    entry = report.as_dict() | {"execution_count": count, "library": str(_LIBRARY)}
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def _references(check: str) -> dict[CodeType, str]:
    """The grader's own solution of ``check``'s exercise, which a student could import too."""
    reference = REFERENCES.get(check)
    return forbidden(**{"the grader's reference solution": reference}) if reference else {}


def run_check(
    check: str,
    subject: Any,
    body: Callable[[str], Report],
    seed: int,
    timeout: float | None,
    forbid: dict[CodeType, str] | None = None,
) -> Report:
    """Run ``body(name)`` sandboxed and time-limited; whatever happens, return a report.
    While it runs, student code that calls ``forbid`` (the library's implementations of
    the exercise, see :func:`forbidden`) or the grader's reference fails the check."""
    name = str(getattr(subject, "__name__", None) or type(subject).__name__)
    watch = _Watch(_references(check) | (forbid or {}), _trusted())
    _WATCHES.append(watch)
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
    finally:
        _WATCHES.remove(watch)
    if watch.found is not None:  # whatever else the check made of it
        abort = _delegated(name, watch, subject)
        report = Report(check, name, False, abort.message, abort.diagnosis, abort.evidence)
    _record(report)
    return report


def as_int(value: Any, what: str) -> int:
    """An int from an int, a NumPy integer or a 0-d integer tensor; else a failing report."""
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise Abort(Diagnosis.WRONG_TYPE, f"{what} must be an int, got {value!r:.40}.")
    return int(value)


def as_number(value: Any, what: str) -> float:
    """A float rounded to 9 decimals from an int or a float; else a failing report."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Abort(Diagnosis.WRONG_TYPE, f"{what} must be a number, got {value!r:.60}.")
    return round(float(value), 9)


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
