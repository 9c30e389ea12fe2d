"""Where a measurement came from: the machine, the code and weights, and how busy it was.

Every results file under ``specdec_lib/results`` carries :func:`run_stamp` and
:func:`busy_report`, so a number can be traced to the commit and weights that made it,
and a number taken on a loaded machine is flagged rather than trusted.
"""

from __future__ import annotations

import hashlib
import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch


def machine_stamp() -> dict[str, str]:
    """What the numbers were measured on: CPU, threads, Python and PyTorch versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "torch_threads": str(torch.get_num_threads()),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


# The paths whose changes would change a measurement (a chapter's prose would not).
_CODE = ("specdec_lib", "benchmarks/*.py", "scripts", "pyproject.toml")


def library_stamp() -> dict[str, str]:
    """Which code and weights made the numbers: package version, git commit (with
    ``+dirty`` if the library, benchmarks or scripts had uncommitted changes), and a
    digest of the weights manifest."""
    root = Path(__file__).resolve().parents[2]
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
    manifest = Path(__file__).resolve().parents[1] / "weights" / "manifest.json"
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
