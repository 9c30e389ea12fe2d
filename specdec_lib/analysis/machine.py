"""This machine's peak rates: how fast one thread moves memory and does arithmetic.

Whether a pass is memory-bound or compute-bound is a comparison with these two numbers
(appendix B draws it as a roofline; chapter 13 asks it of a real model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec_lib.analysis.timing import time_median
from specdec_lib.checks import check_int


@dataclass(frozen=True)
class PeakRates:
    """This machine's best rates on one thread: bytes moved to and from main memory per
    second (a copy of a buffer far larger than any cache, read plus write), and float32
    arithmetic per second (a 512 x 1024 by 1024 x 1024 matrix product). The fastest
    repeat of each, the one least disturbed by other jobs: a peak, not a typical value."""

    bandwidth: float  # bytes per second
    flops: float  # float32 operations per second

    @property
    def balance(self) -> float:
        """Operations per byte at which arithmetic and memory traffic take equal time."""
        return self.flops / self.bandwidth


def peak_rates(buffer_mb: int = 256) -> PeakRates:
    """Measure :class:`PeakRates` (a few seconds)."""
    n = check_int("buffer_mb", buffer_mb) * 2**20 // 4
    src, dst = torch.ones(n), torch.empty(n)
    copy_s = time_median(lambda: dst.copy_(src), repeats=7, warmup=2).fastest
    a, b = torch.randn(512, 1024), torch.randn(1024, 1024)
    mm_s = time_median(lambda: a @ b, repeats=21, warmup=3).fastest
    return PeakRates(bandwidth=2 * n * 4 / copy_s, flops=2 * 512 * 1024 * 1024 / mm_s)
