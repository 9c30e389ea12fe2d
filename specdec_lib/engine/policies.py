"""Draft-length policies for a server: how far each running request speculates each round.

* :class:`Off`: never (every round a plain step);
* :class:`FixedK`: always ``k``;
* :class:`DisableAbove`: ``k`` while the running batch is smaller than ``batch``, then none
  (vLLM's ``speculative_disable_by_batch_size``: its V0 engine switched speculation off for
  the whole batch once the running queue reached that size);
* :class:`~specdec_lib.experiments.goodput_policy.GoodputK`: each round, the draft lengths that
  maximise the round's expected tokens per second, from each request's own measured
  acceptance and a pass-cost model (goodput-style; it lives with chapter 10b's apparatus).

A policy sees the running requests (:class:`~specdec_lib.engine.generate.Row`) and how many
wait, and returns one draft length per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specdec_lib.checks import check_int
from specdec_lib.engine.generate import Row


@dataclass(frozen=True)
class Off:
    """No speculation: every round is a plain step for every row."""

    name: str = "off"
    max_k: int = 0

    def choose(self, rows: Sequence[Row], waiting: int) -> list[int]:
        return [0] * len(rows)


@dataclass(frozen=True)
class FixedK:
    """The same draft length for every row, every round, whatever the load."""

    k: int = 4

    def __post_init__(self) -> None:
        check_int("k", self.k)

    @property
    def name(self) -> str:
        return f"k={self.k}"

    @property
    def max_k(self) -> int:
        return self.k

    def choose(self, rows: Sequence[Row], waiting: int) -> list[int]:
        return [self.k] * len(rows)


@dataclass(frozen=True)
class DisableAbove(FixedK):
    """``k`` for every row while fewer than ``batch`` requests run, else none (vLLM's rule)."""

    batch: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("batch", self.batch)

    @property
    def name(self) -> str:
        return f"k={self.k} below batch {self.batch}"

    def choose(self, rows: Sequence[Row], waiting: int) -> list[int]:
        return [self.k if len(rows) < self.batch else 0] * len(rows)
