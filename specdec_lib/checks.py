"""Argument checks shared by every layer of the library (it imports nothing of it).

Public functions validate at the edge and raise ``ValueError`` naming the parameter
and the range it must lie in; this is the one place that spells the integer check.
``bool`` is refused although it is an ``int`` subclass: ``k=True`` is a mistake, not 1.
"""

from __future__ import annotations


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` if it is an integer >= ``minimum``, else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value
