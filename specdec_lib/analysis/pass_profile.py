"""What one KV-cached forward pass is made of, operator by operator.

A pass of a small model on a CPU costs far more than its arithmetic: PyTorch
dispatches every operator of the forward (matrix products, but also every add,
multiply, view, slice and concatenation) one call at a time, and each call has a
fixed price in the dispatcher and the Python that issues it. :func:`profile_pass`
runs a few passes under ``torch.profiler`` and counts those calls per pass, with
the self CPU time of each operator. The profiler adds its own cost to every call,
so its times are inflated and only their shares mean much; the counts are exact.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from specdec_lib.checks import check_int
from specdec_lib.engine.model import TinyGPT

#: What each aten operator of a TinyGPT forward is, for grouping a profile (names without
#: their ``aten::`` prefix); any operator not listed is elementwise arithmetic.
_GROUPS = {
    "matrix products": "mm bmm addmm matmul linear",
    "attention over the cache": "scaled_dot_product_attention softmax _softmax"
    " _scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_attention_math",
    "views and indexing": "view slice transpose as_strided unsqueeze reshape expand t select"
    " permute _unsafe_view split narrow alias chunk squeeze contiguous view_as_real"
    " view_as_complex flatten unflatten _reshape_alias detach lift_fresh resolve_conj"
    " resolve_neg view_as",
    "copies, allocation and lookups": "cat copy_ _to_copy to empty empty_like empty_strided"
    " clone index_put_ _index_put_impl_ zeros zero_ fill_ ones arange full index embedding"
    " index_select where masked_fill resize_ stack",
    "checks and scalars": "item _local_scalar_dense is_nonzero any gt ge le lt eq max min"
    " result_type scalar_tensor",
}
_CATEGORIES = {f"aten::{op}": group for group, ops in _GROUPS.items() for op in ops.split()}
_ELEMENTWISE = "elementwise arithmetic"
#: The operators that do a pass's matrix arithmetic (``linear`` and ``matmul`` call them).
_PRODUCTS = ("aten::mm", "aten::bmm", "aten::addmm")


@dataclass(frozen=True)
class _OpCost:
    """One operator's calls per pass and self CPU seconds per pass (under the profiler)."""

    name: str
    category: str
    calls: float
    self_seconds: float


@dataclass(frozen=True)
class PassProfile:
    """Per-pass operator counts and times of ``passes`` profiled passes.

    ``aten_calls`` counts every aten operator call, nested ones included (``linear``
    calls ``t`` and ``matmul``, which calls ``mm``); ``top_level_calls`` only those the
    model's Python issues directly. ``outside_seconds`` is profiled time spent in no
    aten operator: the Python of the modules and the cache.
    """

    positions: int
    context_len: int
    passes: int
    ops: tuple[_OpCost, ...]
    aten_calls: float
    top_level_calls: float
    wall_seconds: float
    outside_seconds: float

    @property
    def matrix_products(self) -> float:
        """Matrix products per pass: the calls that do the weights' arithmetic."""
        return sum(op.calls for op in self.ops if op.name in _PRODUCTS)

    def by_category(self) -> dict[str, tuple[float, float]]:
        """``{category: (calls per pass, self seconds per pass)}``, most time first."""
        groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for op in self.ops:
            groups[op.category][0] += op.calls
            groups[op.category][1] += op.self_seconds
        return dict(sorted(((c, (n, s)) for c, (n, s) in groups.items()), key=lambda x: -x[1][1]))


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Silence the profiler's native log lines (``profiler_start``/``profiler_stop``),
    which it writes straight to file descriptor 2, past any Python redirection."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@torch.inference_mode()
def profile_pass(
    model: TinyGPT,
    positions: int = 1,
    context_len: int = 256,
    passes: int = 10,
    warmup: int = 3,
    seed: int = 0,
) -> PassProfile:
    """Profile ``passes`` KV-cached forward passes of ``positions`` new tokens after
    ``context_len`` cached ones (random token ids from ``seed``), after ``warmup``
    unrecorded passes, and return what one pass is made of."""
    positions = check_int("positions", positions)
    context_len = check_int("context_len", context_len)
    passes = check_int("passes", passes)
    warmup = check_int("warmup", warmup, minimum=0)
    if context_len + positions > model.config.block_size:
        raise ValueError(
            f"context_len + positions must be <= block_size={model.config.block_size}, "
            f"got {context_len} + {positions}"
        )
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (1, context_len + positions), generator=gen)
    cache = model.new_cache(1)
    model(ids[:, :context_len], cache)
    new = ids[:, context_len:]

    def one_pass() -> None:
        model(new, cache)
        cache.crop(context_len)

    with (
        native_stderr_silenced(),
        profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=warmup, active=passes, repeat=1),
        ) as prof,
    ):
        for _ in range(warmup + passes):
            one_pass()
            prof.step()
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    steps = [e for e in prof.events() if e.name.startswith("ProfilerStep")]
    top = [
        e for e in events if e.cpu_parent is None or e.cpu_parent.name.startswith("ProfilerStep")
    ]
    ops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for e in events:
        ops[e.name][0] += 1
        ops[e.name][1] += e.self_cpu_time_total / 1e6
    wall = sum(e.cpu_time_total for e in steps) / 1e6 / passes
    inside = sum(s for _, s in ops.values()) / passes
    costs = tuple(
        sorted(
            (
                _OpCost(name, _CATEGORIES.get(name, _ELEMENTWISE), n / passes, s / passes)
                for name, (n, s) in ops.items()
            ),
            key=lambda op: -op.self_seconds,
        )
    )
    return PassProfile(
        positions=positions,
        context_len=context_len,
        passes=passes,
        ops=costs,
        aten_calls=len(events) / passes,
        top_level_calls=len(top) / passes,
        wall_seconds=wall,
        outside_seconds=max(wall - inside, 0.0),
    )
