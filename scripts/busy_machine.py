"""Run a command on a busy machine: one CPU-bound process per core, then the command.

A student's laptop with a browser open is a busy machine, and the suite must pass
there too. This script makes the machine busy on purpose: it starts one pure-Python
busy loop per core (``os.cpu_count()``, or ``--workers``), waits a few seconds so
that they are running, runs the command, and then stops the loops, always: on
success, on failure, on Ctrl-C and on SIGTERM (a loop also exits by itself if this
script dies, since it checks for its parent). It prints the 1-minute load average
before the loops start, while the command runs (at its start, its highest, at its
end) and after the loops stop, with the command's wall time and exit code, and
exits with the command's exit code.

    python scripts/busy_machine.py                      # pytest chapters -p no:cacheprovider
    python scripts/busy_machine.py -- pytest chapters/01_decode_is_serial.ipynb
    python scripts/busy_machine.py --workers 4 -- pytest chapters/05_draft_model.ipynb
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

DEFAULT_COMMAND = ["pytest", "chapters", "-p", "no:cacheprovider"]

# A pure-Python busy loop that stops when its parent is gone (checked every million
# iterations, a few hundredths of a second).
BUSY_LOOP = """
import os, sys
parent = int(sys.argv[1])
while True:
    for _ in range(1_000_000):
        pass
    if os.getppid() != parent:
        break
"""


def load1() -> float:
    return os.getloadavg()[0]


def start_loops(n: int) -> list[subprocess.Popen]:
    loops = []
    for _ in range(n):
        loops.append(
            subprocess.Popen(
                [sys.executable, "-c", BUSY_LOOP, str(os.getpid())],
                stdin=subprocess.DEVNULL,
                # its own session: a Ctrl-C meant for the command is not what stops
                # the loops; this script stops them, whatever happened
                start_new_session=True,
            )
        )
    return loops


def stop_loops(loops: list[subprocess.Popen]) -> None:
    for p in loops:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5
    for p in loops:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class LoadWatch(threading.Thread):
    """Samples the 1-minute load average every ``every`` seconds until stopped."""

    def __init__(self, every: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.samples: list[float] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.samples.append(load1())
            self._stop_event.wait(self.every)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _sigterm(signum, frame):  # noqa: ARG001
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s [--workers N] [--settle S] [-- command ...]",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="busy loops to start (default: one per core, os.cpu_count())",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=5.0,
        help="seconds between starting the loops and starting the command (default 5)",
    )
    parser.add_argument("command", nargs="*", help="the command (default: %(default)s)")
    args = parser.parse_args(argv)
    command = args.command or DEFAULT_COMMAND
    if args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")

    signal.signal(signal.SIGTERM, _sigterm)
    before = os.getloadavg()
    print(
        f"busy_machine: {os.cpu_count()} cores; load average before: "
        + " ".join(f"{x:.2f}" for x in before)
        + f" (1, 5, 15 min); starting {args.workers} busy loop(s)",
        flush=True,
    )
    loops: list[subprocess.Popen] = []
    watch = LoadWatch()
    code = 1
    wall = 0.0
    started = False
    try:
        loops = start_loops(args.workers)
        time.sleep(args.settle)
        dead = [p.pid for p in loops if p.poll() is not None]
        if dead:
            raise SystemExit(f"busy_machine: busy loop(s) {dead} exited early")
        print(f"busy_machine: running {' '.join(command)}", flush=True)
        watch.start()
        started = True
        t0 = time.perf_counter()
        try:
            code = subprocess.run(command).returncode
        except KeyboardInterrupt:
            code = 130
        except FileNotFoundError as e:
            print(f"busy_machine: {e}", flush=True)
            code = 127
        wall = time.perf_counter() - t0
    finally:
        during = []
        if started:
            watch.stop()
            during = watch.samples + [load1()]
        stop_loops(loops)
        if during:
            print(
                f"busy_machine: load average during (1 min): {during[0]:.2f} at the start, "
                f"{max(during):.2f} at its highest, {during[-1]:.2f} at the end",
                flush=True,
            )
        after = os.getloadavg()
        print(
            "busy_machine: busy loops stopped; load average after: "
            + " ".join(f"{x:.2f}" for x in after)
            + " (1, 5, 15 min)",
            flush=True,
        )
    print(
        f"busy_machine: wall time {wall:.1f} s, exit code {code}: {' '.join(command)}",
        flush=True,
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
