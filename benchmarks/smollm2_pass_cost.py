"""The premise at real scale: what a pass costs against its positions and its batch,
on SmolLM2-135M and on TinyGPT, on this CPU, one thread.

    OMP_NUM_THREADS=1 python benchmarks/smollm2_pass_cost.py [--repeats 9]
        [--out specdec_lib/results/smollm2_pass_cost.json]

The two runs with both SmolLM2 kernels that chapter 13 reads are stored as
``smollm2_kernels.json`` and ``smollm2_kernels_rerun.json`` (``--out``); the two earlier
runs, of SmolLM2's default kernel and TinyGPT only, stay ``smollm2_pass_cost*.json`` for
chapters 1, 10 and appendix B.

For chapter 13. For each model, after a 256-token context held in the KV cache:

* one cached pass over T new positions, T = 1 ... 32 (``time_passes``): what verifying
  k drafted tokens (T = k + 1) costs against a plain decoding step (T = 1);
* one cached pass over T = 1 and T = 5 positions for each of B sequences, B = 1 ... 64
  (``time_batched_passes``): how that ratio moves as the batch grows, which decides
  where speculation stops paying;

SmolLM2 twice: with PyTorch's default float32 kernel (MKL), and with its linear layers
run by oneDNN's inner product (``smollm2_onednn``, :mod:`specdec_lib.engine.onednn`), because on
this CPU the kernel decides much of what a pass over a few positions costs;
and the machine's peak rates (:func:`peak_rates`), to say
whether a batch-one pass is memory-bound: a pass reads every weight once, so if the
weights' bytes divided by the pass's time come near the machine's memory bandwidth, the
pass is limited by memory, as chapter 1 says a GPU's is. Cells are timed interleaved
within one model (``interleaved``; the models one after the other), medians and ranges
kept; the load is recorded before and after.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass

import torch

from specdec_lib import load_model
from specdec_lib.analysis.costs import weight_bytes
from specdec_lib.analysis.timing import time_batched_passes, time_median, time_passes
from specdec_lib.checks import check_int
from specdec_lib.engine.onednn import use_onednn
from specdec_lib.engine.smollm2 import load_smollm2

from harness import Benchmark, ints

CONTEXT = 256
POSITIONS = [1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32]
BATCHES = [1, 2, 4, 8, 16, 32, 64]
VERIFY = 5  # k + 1 positions for k = 4, chapter 13's prompt-lookup k


@dataclass(frozen=True)
class PeakRates:
    """This machine's best rates on one thread: bytes moved to and from main memory per
    second (a copy of a buffer far larger than any cache, read plus write), and float32
    arithmetic per second (a 512 x 1024 by 1024 x 1024 matrix product). The fastest
    repeat of each, the one least disturbed by other jobs: a peak, not a typical value.
    Whether a pass is memory-bound or compute-bound is a comparison with these two
    numbers (appendix B draws it as a roofline; chapter 13 asks it of a real model)."""

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


def measure(
    model: torch.nn.Module, repeats: int, new=POSITIONS, batches=BATCHES, onednn: bool = False
) -> dict:
    """Both sweeps of one model, as ``{"positions": {T: timing}, "batch": {"B,T": timing}}``,
    over ``new`` positions T and ``batches`` B; ``onednn``: with its linear layers run by
    oneDNN (:func:`~specdec_lib.engine.onednn.use_onednn`; sizes counted before, as the
    converted weights are buffers, not parameters)."""
    sizes = {"parameters": model.num_parameters(), "weight_bytes": weight_bytes(model)}
    if onednn:
        use_onednn(model)
    positions = time_passes(model, new, context_len=CONTEXT, repeats=repeats, warmup=2)
    gen = torch.Generator().manual_seed(0)
    context = torch.randint(0, model.config.vocab_size, (CONTEXT,), generator=gen).tolist()
    cells = [(b, t) for b in batches for t in (1, VERIFY)]
    batch = time_batched_passes(model, cells, context, repeats=repeats, warmup=2)
    return {
        **sizes,
        "kernel": "oneDNN" if onednn else "PyTorch default (MKL)",
        "positions": {str(t): asdict(tm) for t, tm in positions.items()},
        "batch": {f"{b},{t}": asdict(tm) for (b, t), tm in batch.items()},
    }


def main(argv: list[str] | None = None) -> int:
    small = {"repeats": 1, "positions": [1, VERIFY], "batches": [1, 2]}
    bench = Benchmark("smollm2_pass_cost", __doc__, small=small, repeats=9)
    bench.add("--positions", type=ints, default=POSITIONS, help="new positions a pass scores")
    bench.add("--batches", type=ints, default=BATCHES, help="sequences a batched pass holds")
    args = bench.parse(argv)
    models = {  # name: (load, oneDNN)
        "smollm2": (lambda: load_smollm2(512), False),
        "smollm2_onednn": (lambda: load_smollm2(512), True),
        "tinygpt": (lambda: load_model("target"), False),
    }
    result: dict = {
        "description": "one cached pass against its new positions and its batch, SmolLM2-135M "
        "(default and oneDNN kernels) and TinyGPT, one thread, after a 256-token context",
        "context": CONTEXT,
        "verify_positions": VERIFY,
        "repeats": args.repeats,
        "peaks_before": asdict(peak_rates()),
        "models": {},
    }
    for name, (load, onednn) in models.items():
        with torch.inference_mode():
            model = load()
            result["models"][name] = measure(
                model, args.repeats, args.positions, args.batches, onednn
            )
        del model
        print(f"{name}: {bench.seconds():.0f} s", flush=True)
    result["peaks_after"] = asdict(peak_rates())
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    bench.save(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
