"""Where a measurement came from: the machine it ran on (:func:`machine_stamp`).

A chapter prints it beside a live timing, and ``scripts/time_chapters.py`` records it with
the chapters' run times. Every stored benchmark result carries more (the commit, the
weights, how busy the machine was): ``benchmarks/harness.py`` adds it.
"""

from __future__ import annotations

import os
import platform

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
