"""Argument checks shared by every layer of the library (it imports nothing of it).

Public functions validate at the edge and raise ``ValueError`` naming the parameter
and the range it must lie in; this is the one place that spells those checks.
``bool`` is refused although it is an ``int`` subclass: ``k=True`` is a mistake, not 1.
NumPy scalars are numbers like any other (``np.int64(4)`` is a valid ``k``,
``np.float32(0.7)`` a valid temperature); the checks return plain Python values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from numbers import Integral, Real


def _is_int(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer >= ``minimum``, else ``ValueError``."""
    if not _is_int(value) or value < minimum:  # type: ignore[operator]
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)  # type: ignore[arg-type]


def check_real(
    name: str, value: object, allowed: str, ok: Callable[[float], bool] = lambda v: True
) -> float:
    """``value`` as a finite ``float`` for which ``ok`` holds, else ``ValueError``.

    The message says ``name`` must be ``allowed`` (e.g. ``"a number in (0, 1]"``).
    """
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if not ok(float(value)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return float(value)


def check_ids(name: str, ids: object, vocab_size: int) -> list[int]:
    """A flat sequence of token ids in ``[0, vocab_size)`` as a list of ints, else ``ValueError``.

    Text, floats, bools and nested sequences are refused rather than converted: ``"65"``
    is not token 6 then token 5, and ``1.5`` is not token 1.
    """
    if (
        isinstance(ids, str | bytes)
        or not isinstance(ids, Sequence | range)
        and not hasattr(ids, "tolist")
    ):
        raise ValueError(f"{name} must be a sequence of token ids, got {type(ids).__name__}")
    values = ids.tolist() if hasattr(ids, "tolist") else list(ids)  # type: ignore[union-attr]
    if not isinstance(values, list):  # a 0-d array or tensor: one number, not a sequence
        raise ValueError(f"{name} must be a sequence of token ids, got a scalar {values!r}")
    if not all(type(t) is int for t in values):  # the common case, checked at C speed
        for t in values:
            if not _is_int(t):
                raise ValueError(f"{name} must hold integer token ids, got {t!r}")
        values = [int(t) for t in values]
    if values and not (0 <= min(values) and max(values) < vocab_size):
        bad = next(t for t in values if not 0 <= t < vocab_size)
        raise ValueError(f"{name} must lie in [0, {vocab_size - 1}], got {bad}")
    return values
