"""The harness every benchmark in this folder runs on: its command line, its stamp, its
load check, its intervals and where it writes.

A benchmark is a script run from the repository root, ``python benchmarks/<name>.py``, so
this folder is first on ``sys.path`` and the scripts ``import harness``; the tests put the
folder on the path in ``tests/conftest.py``. A script reads::

    bench = Benchmark("trees", __doc__, small={"prompts": 2})  # writes results/trees.json
    bench.add("--prompts", type=int, default=16)                # its own options
    args = bench.parse(argv)        # threads set, stamp taken, the clock started
    ...                             # the measurement
    bench.save({"rows": rows}, load=bench.load(timed))

:class:`Benchmark` gives every script ``--out`` (default
``specdec_lib/results/<name>.json``, the file the chapters read) and, when asked, ``--small``
(a quick check, which must name its own ``--out`` so it never overwrites a stored result),
``--threads``, ``--seed`` and ``--strict`` (refuse to write a result the load check flags).
:meth:`Benchmark.save` adds to the result the actual command line, the stamp of where it
ran (:func:`run_stamp`: machine, commit, weights, load at start), the seconds it took and
the machine's speed at start and end (:func:`machine_speed`, :func:`speed_report`), warns
when ``result["load"]`` says the machine was busy or its speed drifted, and writes the
JSON.
``specdec_lib.analysis.results.writer`` reads the recorded command back, so the rerun hint
a chapter prints is the command that made the file.

Porting a script: replace its ``argparse`` parser, ``OUT``, ``--small`` handling,
``torch.set_num_threads``, ``run_stamp()``, ``time.perf_counter()`` start, hand-made
``"command"`` and ``save_result(...)`` with a :class:`Benchmark` (``small=``,
``threads=True``, ``seed=``, ``repeats=``, ``blocks=True``, ``strict=True`` as the
script had them), ``bench.parse(argv)``, ``bench.load(timed)`` (or ``wall=``/``cpu=``)
for the load check, ``bench.progress(repeats)`` for ``interleaved``'s progress,
``bench.seconds()`` for the elapsed time, and ``bench.save(result)`` or, for a result
with ``checks``, ``bench.verdict(result)``. Intervals: :func:`interval` (an estimate as a
dict) and :func:`binomial_interval` / :func:`rate` (the one binomial interval, Wilson).
The stamp (:func:`run_stamp`), the load check (:func:`busy_report`) and the writing
(:func:`save_result`) live here, not in the library: only benchmarks use them. The
library keeps what chapters read: ``analysis.provenance.machine_stamp`` and
``analysis.results`` (``RESULTS_DIR``, ``load_result``, ``writer``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.stats import norm

import specdec_lib
from specdec_lib import SpeculationStats, generate, workload_prompts
from specdec_lib.analysis.hypothesis import distribution_test
from specdec_lib.analysis.intervals import tokens_per_pass_estimate
from specdec_lib.analysis.provenance import machine_stamp
from specdec_lib.analysis.results import RESULTS_DIR
from specdec_lib.analysis.runs import pooled
from specdec_lib.text.language import WORKLOADS

if TYPE_CHECKING:
    from specdec_lib.analysis.timing import JobTimes

ROOT = Path(__file__).resolve().parent.parent

#: The decoding scenarios the timing benchmarks share: name -> (workload, temperature).
SCENARIOS = {
    "copy": ("copy", 0.0),
    "edit": ("edit", 0.0),
    "answer": ("answer", 0.0),
    "novel": ("novel", 0.0),
    "novel T=1": ("novel", 1.0),
}


# The paths whose changes would change a measurement (a chapter's prose would not).
_CODE = ("specdec_lib", "benchmarks/*.py", "scripts", "pyproject.toml")


def library_stamp() -> dict[str, str]:
    """Which code and weights made the numbers: package version, git commit (with
    ``+dirty`` if the library, benchmarks or scripts had uncommitted changes), and a
    digest of the weights manifest."""
    root = ROOT
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", *_CODE],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        commit += "+dirty" if dirty else ""
    except (OSError, subprocess.SubprocessError):
        commit = "unknown (not a git checkout)"
    try:
        package = version("specdec_lib")
    except PackageNotFoundError:
        package = "unknown (not installed)"
    manifest = Path(specdec_lib.__file__).resolve().parent / "weights" / "manifest.json"
    weights = hashlib.sha256(manifest.read_bytes()).hexdigest()[:12] if manifest.exists() else ""
    return {"specdec_lib": package, "commit": commit, "weights_manifest_sha256": weights}


def run_stamp() -> dict[str, object]:
    """Everything a results file must carry about where it came from."""
    return {
        **machine_stamp(),
        **library_stamp(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def busy_report(
    wall: Sequence[float], cpu: Sequence[float], threads: int, min_cpu_share: float = 0.9
) -> dict[str, object]:
    """Did other work disturb the run? Flags it, with the evidence.

    Two signs: the 1-minute load average says more processes wanted to run than there
    were cores (ours counts ``threads``), or a timed job's CPU time fell below
    ``min_cpu_share`` of its wall time (with one thread, a job that is never
    descheduled has CPU time equal to wall time). ``wall`` and ``cpu`` are the jobs'
    times, in the same order.
    """
    if len(wall) != len(cpu) or not wall:
        raise ValueError(f"wall and cpu must be non-empty and as long, got {len(wall)}, {len(cpu)}")
    shares = [c / (w * threads) for w, c in zip(wall, cpu, strict=True) if w > 0]
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    low = sum(1 for x in shares if x < min_cpu_share)
    busy = load > cores + 0.5 or low > 0.05 * len(shares)
    return {
        "busy": busy,
        "load_average_at_end": round(load, 2),
        "cores": cores,
        "median_cpu_share": round(statistics.median(shares), 3),
        "jobs_below_cpu_share": low,
        "jobs": len(shares),
        "min_cpu_share": min_cpu_share,
    }


#: A run whose machine-speed probe moved by more than this share between start and end is
#: reported as drifting (a warning; ``busy`` is the load check's alone).
SPEED_DRIFT = 0.15


def machine_speed(repeats: int = 21) -> float:
    """Milliseconds a fixed piece of work takes on this machine now, on the threads PyTorch
    uses: the median of ``repeats`` timings of 50 products of two 256 x 256 float32
    matrices (seeded). Taken when a benchmark starts and when it saves, it shows a machine
    whose speed moved during a run, which the load check cannot: that check counts this
    machine's runnable processes and our jobs' lost CPU time, and a machine slowed by
    work it does not count (measured once: a plain serving step took 1.6 to 2.7 times as
    long in one evening as in the afternoon, both runs unflagged) slows every job alike."""
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(256, 256, generator=gen) for _ in range(2))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(50):
            a @ b
        times.append(time.perf_counter() - start)
    return round(1e3 * statistics.median(times), 3)


def speed_report(start_ms: float, end_ms: float) -> dict[str, object]:
    """The machine-speed probe at a run's start and end, and whether it drifted."""
    change = end_ms / start_ms - 1
    return {
        "start_ms": start_ms,
        "end_ms": end_ms,
        "change": round(change, 3),
        "drifted": abs(change) > SPEED_DRIFT,
    }


def save_result(path: Path, result: dict, strict: bool = False) -> None:
    """Write a benchmark's ``result`` as JSON, with a warning if ``result["load"]`` says
    the machine was busy; with ``strict``, refuse (``SystemExit``) instead of writing."""
    load = result.get("load", {})
    if load.get("busy"):
        print(f"WARNING: the machine was busy during the run: {load}")
        if strict:
            raise SystemExit(f"--strict: {path} not written")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")


def all_times(timed: Mapping[Hashable, JobTimes]) -> tuple[list[float], list[float]]:
    """Every wall and every CPU time ``interleaved`` recorded, in the same order (what
    :func:`busy_report` reads)."""
    return [x for t in timed.values() for x in t.wall], [x for t in timed.values() for x in t.cpu]


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that ran this script, as typed from the repository root (with the
    ``OMP_NUM_THREADS`` it ran under, when set)."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    where = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    threads = os.environ.get("OMP_NUM_THREADS")
    prefix = f"OMP_NUM_THREADS={threads} " if threads else ""
    return prefix + shlex.join(["python", str(where), *argv[1:]])


def interval(e, digits: int | None = 4, level: bool = False) -> dict[str, float]:
    """An ``Estimate`` (or anything with ``value``, ``low``, ``high``) as a result's dict,
    rounded to ``digits`` (None: as is), with its ``level`` if asked."""
    out = {k: getattr(e, k) for k in ("value", "low", "high")}
    if digits is not None:
        out = {k: round(v, digits) for k, v in out.items()}
    return out | ({"level": e.level} if level else {})


def binomial_interval(k: int, n: int, level: float = 0.95) -> list[float]:
    """Wilson interval of a rate k/n at ``level``: right near 0 and 1, where catch rates
    and false-alarm rates live. The one binomial interval the benchmarks use."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"k must lie in [0, n] and n must be >= 1, got k={k}, n={n}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    z = float(norm.ppf(1 - (1 - level) / 2))
    phat = k / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def rate(caught: Sequence[bool]) -> dict:
    """How often a test fired over seed-runs: counts, rate and its binomial interval."""
    k, n = int(sum(caught)), len(caught)
    return {"caught": k, "runs": n, "rate": k / n, "interval": binomial_interval(k, n)}


def greedy_workloads(
    target, tok, prompts: int, seed: int, params
) -> Iterator[tuple[str, list[list[int]], list[list[int]]]]:
    """Each workload in turn: its name, ``prompts`` encoded prompts of workload seed
    ``seed``, and plain decoding's output for each (what every speculative output is
    checked against)."""
    for workload in WORKLOADS:
        encoded = [tok.encode(p) for p in workload_prompts(workload, prompts, seed)]
        yield workload, encoded, [generate(target, ids, params) for ids in encoded]


def counts_row(each: Sequence[SpeculationStats], **keys) -> dict:
    """A result row: ``keys``, then the counts pooled over ``each`` (one stats object per
    prompt): prompts, emitted tokens, target and draft passes, and tokens per target pass
    with its interval over prompts."""
    s = pooled(each)
    return keys | dict(
        prompts=len(each),
        emitted=s.emitted,
        target_passes=s.target_passes,
        draft_passes=s.draft_passes,
        tokens_per_pass=s.tokens_per_pass,
        tokens_per_pass_interval=interval(tokens_per_pass_estimate(each)),
    )


def failed_draws(law: torch.Tensor, p: torch.Tensor, n: int, runs: int, stream: int) -> list[bool]:
    """Seed-runs of the chi-square distribution test against ``p``, each on ``n`` tokens
    drawn from ``law`` (random stream ``[stream, n]``): True where the test fails."""
    rng = np.random.default_rng([stream, n])
    probs = (law / law.sum()).numpy()
    return [
        not distribution_test(torch.from_numpy(rng.multinomial(n, probs)), p).passed
        for _ in range(runs)
    ]


def ints(text: str) -> list[int]:
    """An option's comma-separated integers: ``"1,2,4"`` -> ``[1, 2, 4]``."""
    return [int(x) for x in text.split(",") if x]


class Benchmark:
    """One benchmark's command line and run: parse, measure, :meth:`save`.

    ``name`` names the stored result (``specdec_lib/results/<name>.json``); ``doc`` is the
    script's docstring, whose first paragraph is the ``--help`` text. ``small``: the
    settings of ``--small``, a quick check that needs its own ``--out``. ``threads``,
    ``seed`` and ``repeats`` (their defaults) and ``strict`` add those options; ``blocks``
    adds ``--blocks``, the blocks of repeats a paired bootstrap resamples (0, the default:
    every repeat its own block; else 2 to ``--repeats``). Add the script's own options
    with :meth:`add`, as ``argparse``'s ``add_argument``.
    """

    def __init__(
        self,
        name: str,
        doc: str,
        *,
        small: Mapping[str, object] | None = None,
        threads: bool = False,
        seed: int | None = None,
        repeats: int | None = None,
        blocks: bool = False,
        strict: bool = False,
    ) -> None:
        self.name, self.small = name, dict(small) if small else None
        self.parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
        self.add = self.parser.add_argument
        self.error = self.parser.error
        self.add("--out", type=Path, default=None, help=f"default {RESULTS_DIR / name}.json")
        if self.small is not None:
            self.add("--small", action="store_true", help=f"a quick check: {self.small}")
        if threads:
            self.add("--threads", type=int, default=1)
        if seed is not None:
            self.add("--seed", type=int, default=seed)
        if repeats is not None:
            self.add("--repeats", type=int, default=repeats)
        if blocks:
            self.add("--blocks", type=int, default=0, help="blocks of repeats (0: repeats)")
        if strict:
            self.add("--strict", action="store_true", help="refuse to write if busy")
        self.args: argparse.Namespace | None = None

    def parse(
        self,
        argv: Sequence[str] | None = None,
        out: Callable[[argparse.Namespace], str] | None = None,
    ) -> argparse.Namespace:
        """The parsed options, with ``--small``'s settings applied and ``args.out`` set
        (default: the stored result named by ``out(args)``, else by this benchmark's
        name). Sets PyTorch's threads (``--threads``, else one), takes the run's stamp
        and starts its clock."""
        args = self.parser.parse_args(argv)
        stored = RESULTS_DIR / f"{out(args) if out else self.name}.json"
        if getattr(args, "small", False):
            if args.out is None or args.out.resolve() == stored:
                self.error("--small needs --out: a check must not overwrite the committed results")
            vars(args).update(self.small)
        if "blocks" in vars(args):
            args.blocks = args.blocks or args.repeats  # 0: every repeat its own block
            if not 2 <= args.blocks <= args.repeats:
                self.error(f"--blocks must lie in [2, --repeats={args.repeats}], got {args.blocks}")
        args.out = args.out or stored
        self.threads = getattr(args, "threads", 1)
        torch.set_num_threads(self.threads)
        self.command = command_line(None if argv is None else [sys.argv[0], *argv])
        self.speed_at_start = machine_speed()
        self.stamp, self.start, self.args = run_stamp(), time.perf_counter(), args
        return args

    def seconds(self) -> float:
        """Seconds since :meth:`parse`, to a tenth."""
        return round(time.perf_counter() - self.start, 1)

    def progress(self, repeats: int) -> Callable[[int], None]:
        """A ``progress`` for ``interleaved``: prints each finished repeat and the seconds
        so far, so a long run shows its pace."""
        return lambda r: print(f"repeat {r}/{repeats} ({self.seconds():.0f} s)", flush=True)

    def verdict(self, result: dict) -> int:
        """Save a result that holds ``checks``, with ``passed`` (all of them), after
        printing them; the exit status: 0 if every check passed, else 1."""
        result["passed"] = all(result["checks"].values())
        print(f"{'PASS' if result['passed'] else 'FAIL'} {result['checks']}")
        self.save(result)
        return 0 if result["passed"] else 1

    def load(self, timed: Mapping[Hashable, JobTimes] | None = None, **times) -> dict:
        """The load check (:func:`busy_report`) over every job ``interleaved`` timed, or
        over explicit ``wall=[...]`` and ``cpu=[...]`` times."""
        if (timed is not None) == ({"wall", "cpu"} <= times.keys()):
            given = ["timed"] * (timed is not None) + sorted(times)
            raise ValueError(f"give timed, or wall and cpu; got {given}")
        wall, cpu = all_times(timed) if timed is not None else (times["wall"], times["cpu"])
        return busy_report(wall, cpu, self.threads)

    def save(self, result: dict, **extra) -> dict:
        """Write ``result`` (with ``extra`` keys) to ``--out``, adding the actual
        ``command`` line, and the ``stamp``, ``seconds`` and ``speed`` (the machine-speed
        probe at start and end, :func:`speed_report`) unless the script set them;
        ``--strict`` refuses a run the load check flags. Returns what was written."""
        if self.args is None:
            raise ValueError("parse the command line before saving a result")
        full = {"stamp": self.stamp} | result | extra | {"command": self.command}
        full.setdefault("seconds", self.seconds())
        full.setdefault("speed", speed_report(self.speed_at_start, machine_speed()))
        if full["speed"]["drifted"]:
            print(f"WARNING: the machine's speed moved during the run: {full['speed']}")
        save_result(self.args.out, full, getattr(self.args, "strict", False))
        print(f"{full['seconds']} s; wrote {self.args.out}")
        return full
