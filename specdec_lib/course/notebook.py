"""Small helpers the chapters call, so notebooks hold prose and experiments, not plumbing.

* :func:`glue` puts a computed number into the prose of the website (myst-nb's
  ``glue``), and still works where myst-nb is not installed (Colab).
* :func:`show_source` displays the library's own source for a function or
  class, so a chapter quotes the code that runs instead of pasting a second
  copy that could drift from it.
* :func:`skip_unattempted` lets a cell that runs a student's function go on
  quietly past an exercise not yet started, so a student notebook runs top to bottom.
"""

from __future__ import annotations

import inspect
import math
import numbers
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "GLUE_DIGITS",
    "SourceListing",
    "glue",
    "power_of_ten_above",
    "rounded",
    "show_source",
    "skip_unattempted",
]


def _plain(value: Any) -> Any:
    """NumPy and torch scalars as Python numbers.

    ``glue`` stores ``repr(value)``, and ``repr(np.float64(0.5))`` is
    ``'np.float64(0.5)'`` under NumPy 2, which would land in the prose verbatim
    and defeat format specs such as ``{glue:text}`tpp:.2f```.
    """
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:  # NumPy or torch scalar
        return item()
    if isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


GLUE_DIGITS = 4
"""Significant digits a glued float keeps unless the chapter asks for more or fewer.

A float computed through float32 kernels moves in its 7th or 8th significant digit
from one CPU (or thread count) to another, and a glued value is stored, and
compared by ``pytest``, as the text of the value: glued at full precision, it
passes only on the machine that stored it. Four digits cover what the prose shows
(it formats with ``.2f``, ``.1%``, ``.3f`` and the like), and a float32 wobble of
about one part in 10^7 moves the fourth digit only for a value that sits that
close to a rounding edge.
``tests/test_book.py`` checks that no prose role shows more digits than were kept.
"""


def rounded(value: float, digits: int = GLUE_DIGITS) -> float:
    """``value`` to ``digits`` significant digits (0, inf and nan unchanged)."""
    if not isinstance(digits, int) or isinstance(digits, bool) or not 1 <= digits <= 17:
        raise ValueError(f"digits must be an integer in [1, 17], got {digits!r}")
    if value == 0 or value != value or value in (float("inf"), float("-inf")):
        return value
    return float(f"{value:.{digits}g}")


def power_of_ten_above(x: float, floor: float = 1e-14) -> float:
    """The smallest power of ten at or above ``x``, and at least ``floor``.

    What a chapter prints for a rounding error (``|P(y) - p(y)|`` of an exact
    computation, a logit difference between two implementations): the error
    itself changes with the order of a float sum, so with the CPU's vector width
    and thread count, while the bound it stays under does not.
    """
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"x must be a finite number >= 0, got {x!r}")
    if not (math.isfinite(floor) and floor > 0):
        raise ValueError(f"floor must be a finite number > 0, got {floor!r}")
    return max(floor, 0.0 if x == 0 else 10.0 ** math.ceil(math.log10(x)))


def glue(name: str, value: Any, display: bool = False, digits: int = GLUE_DIGITS) -> None:
    """Record ``value`` under ``name`` for the prose, floats to ``digits`` significant digits.

    On the website, ``{glue:text}`name:.2f``` in a Markdown cell shows the
    value that this cell computed when the notebook was last executed (and
    that ``pytest`` re-checked). A float is stored to ``digits`` significant
    digits (see :data:`GLUE_DIGITS`): ask for more only for a value that is
    exact on every machine (a ratio of counts), and for fewer where a
    measurement's own noise reaches the fourth digit. Without myst-nb (Colab, a
    bare kernel) the call only shows the value when ``display`` is true, so
    chapters run the same everywhere.
    """
    value = _plain(value)
    if isinstance(value, float):
        value = rounded(value, digits)
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)


def _fence(source: str) -> str:
    """A backtick fence longer than any run of backticks inside ``source``."""
    longest = max((len(run) for run in re.findall(r"`+", source)), default=0)
    return "`" * max(3, longest + 1)


def _library_path(path: str) -> str:
    """``specdec_lib/engine/verify.py`` rather than the absolute path of one machine."""
    parts = Path(path).parts
    if "specdec_lib" in parts:
        return "/".join(parts[len(parts) - 1 - parts[::-1].index("specdec_lib") :])
    return Path(path).name


class SourceListing:
    """The source of one library object, shown as a highlighted listing.

    It renders as Markdown (a fenced Python block under a one-line caption),
    which Jupyter and Colab highlight and which the website renders with its
    own theme-aware highlighting, so the listing reads well in light and dark
    mode. The plain-text form is the source itself.
    """

    def __init__(self, qualname: str, path: str, first_line: int, source: str) -> None:
        self.qualname = qualname
        self.path = path
        self.first_line = first_line
        self.source = source

    @property
    def last_line(self) -> int:
        return self.first_line + self.source.count("\n") - 1

    def _caption(self) -> str:
        return f"`{self.qualname}`, from `{self.path}`, lines {self.first_line}–{self.last_line}"

    def _repr_markdown_(self) -> str:
        fence = _fence(self.source)
        return f"{self._caption()}\n\n{fence}python\n{self.source.rstrip()}\n{fence}\n"

    def __repr__(self) -> str:
        return f"# {self.qualname}, {self.path}:{self.first_line}\n{self.source.rstrip()}"


def show_source(obj: Any) -> SourceListing:
    """Display the library's own source for ``obj`` (a function, class or method).

    Use it as the last expression of a cell: ``show_source(accept_greedy)``.
    The listing is re-generated whenever the notebook runs, so ``pytest``
    fails if the chapter's stored listing no longer matches the library.
    """
    target = inspect.unwrap(obj)
    try:
        lines, first_line = inspect.getsourcelines(target)
        path = inspect.getsourcefile(target) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise ValueError(f"no source available for {obj!r}") from exc
    module = getattr(target, "__module__", None) or ""
    qualname = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(obj))
    name = f"{module}.{qualname}" if module else qualname
    return SourceListing(name, _library_path(path), first_line, "".join(lines))


@contextmanager
def skip_unattempted() -> Iterator[None]:
    """Run the ``with`` block; if it raises ``NotImplementedError``, say so and go on.

    A cell that runs a student's function (``with skip_unattempted(): ...``) stops at
    an exercise not yet started, where the function is still the stub that raises
    ``NotImplementedError``, prints one line naming the function that raised it,
    ``TO DO samples_needed: not attempted yet (NotImplementedError) ...``, the words a
    check's report uses, and does not raise, so a notebook run top to bottom reaches
    the exercises after it. The rest of the block is skipped. Any other exception
    (an attempt that is wrong, an assertion that fails) is raised as usual, and a
    block that raises nothing prints nothing.
    """
    try:
        yield
    except NotImplementedError as exc:
        frame = exc.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        name = frame.tb_frame.f_code.co_name if frame is not None else "<module>"
        where = "this exercise" if name.startswith("<") else name
        print(
            f"TO DO {where}: not attempted yet (NotImplementedError); "
            "the rest of this cell is skipped"
        )
