"""Chapter 1's batched decode, timed by its parts: the prefill, each decode step, the host.

The wall time of a whole ``generate_batch`` call mixes three costs that grow with the
batch size B at different rates: the prefill (one pass over every prompt, B × prompt
positions, which also gives the first token), the decode steps (one pass over B rows
each, one per further token), and the host's own work
between passes (choosing each row's token, building the next input). The ratio of
whole calls at two batch sizes is therefore not the ratio of their decode steps.
:func:`time_batch_decode_steps` times all three inside the same calls, with the
forward hooks of :func:`~specdec_lib.analysis.timing.time_inside`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specdec_lib.analysis.timing import Timing, interleaved, time_inside
from specdec_lib.checks import check_int
from specdec_lib.engine.batched import generate_batch
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams


@dataclass(frozen=True)
class BatchDecodeTiming:
    """One batch size's whole call, prefill and decode step, in seconds.

    ``step`` is over every decode step of every repeat (``steps`` per call); the
    others are over repeats. ``host`` is the call's time outside any forward pass.
    """

    batch_size: int
    call: Timing
    prefill: Timing
    step: Timing
    host: Timing
    steps: int


def time_batch_decode_steps(
    model: TinyGPT,
    prompt_ids: Sequence[int],
    batch_sizes: Sequence[int],
    n_tokens: int = 32,
    repeats: int = 3,
    warmup: int = 1,
) -> dict[int, BatchDecodeTiming]:
    """Time greedy ``generate_batch`` of ``n_tokens`` for B copies of one prompt, for
    each B, split into prefill, decode steps and host work.

    The batch sizes run in a freshly shuffled order in every repeat (seeded), so a
    burst of load on a shared machine falls on all of them alike. Returns
    ``{B: BatchDecodeTiming}``; server throughput is ``B * n_tokens / call.median``.
    """
    sizes = [check_int("batch_sizes", b) for b in batch_sizes]
    if not sizes:
        raise ValueError("batch_sizes must hold at least one batch size")
    n_tokens = check_int("n_tokens", n_tokens)
    repeats = check_int("repeats", repeats)
    warmup = check_int("warmup", warmup, minimum=0)
    ids = list(prompt_ids)
    if len(ids) < 2:
        raise ValueError(f"prompt_ids must hold at least 2 tokens (a prefill), got {len(ids)}")
    params = SamplingParams(temperature=0.0, max_tokens=n_tokens)
    parts: dict[int, dict[str, list[float]]] = {
        b: {"call": [], "prefill": [], "step": [], "host": []} for b in sizes
    }

    def job(b: int) -> None:
        calls: list[tuple[int, float]] = []
        wall, inside = time_inside([model], lambda: generate_batch(model, [ids] * b, params), calls)
        parts[b]["call"].append(wall)
        parts[b]["prefill"].append(calls[0][1])
        parts[b]["step"].extend(seconds for _, seconds in calls[1:])
        parts[b]["host"].append(wall - inside)

    # The course's one timing loop; each call is split by forward hooks inside it. The
    # warm-up calls record too: drop them (a call makes n_tokens - 1 decode steps).
    interleaved({b: lambda b=b: job(b) for b in sizes}, repeats, warmup=warmup)
    for p in parts.values():
        for name in ("call", "prefill", "host"):
            del p[name][:warmup]
        del p["step"][: warmup * (n_tokens - 1)]
    return {
        b: BatchDecodeTiming(
            batch_size=b,
            call=Timing.of(p["call"]),
            prefill=Timing.of(p["prefill"]),
            step=Timing.of(p["step"]),
            host=Timing.of(p["host"]),
            steps=len(p["step"]) // repeats,
        )
        for b, p in parts.items()
    }
