"""Print every check's catch rate on every named mistake, and its false alarms:
``python -m specdec_lib.grading --seeds 100``. Checks that run models get at most 3 seeds.
"""

from __future__ import annotations

import argparse
import time

from specdec_lib.engine.weights import load_model

from . import CHECKS
from .mistakes import MISTAKES, catch_rates

_SLOW = {
    "check_speculative_generate": ("target", "draft"),
    "check_cache_lengths": ("target", "draft"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specdec_lib.grading", description=__doc__)
    parser.add_argument("--seeds", type=int, default=100, help="seeds per mistake (default 100)")
    parser.add_argument("--checks", nargs="+", default=list(CHECKS), choices=list(CHECKS))
    parser.add_argument("--untrained", action="store_true", help="untrained models (no weights)")
    args = parser.parse_args(argv)
    print("| check | mistake | expected diagnosis | caught | seconds |\n" + "| --- " * 5 + "|")
    for name in args.checks:
        models = _SLOW.get(name, ())
        kwargs = {m: load_model(m, trained=False) for m in models} if args.untrained else {}
        start = time.perf_counter()
        seeds = range(min(args.seeds, 3) if models else args.seeds)
        rates = catch_rates(CHECKS[name], seeds, **kwargs)
        seconds = f"{time.perf_counter() - start:.0f}"
        for label, (count, runs) in rates.items():
            mistake = MISTAKES[name].get(label)
            diagnosis = mistake.diagnosis.key if mistake else "(correct reference fails)"
            print(f"| {name} | {label} | {diagnosis} | {count}/{runs} | {seconds} |", flush=True)
            seconds = ""


if __name__ == "__main__":
    main()
