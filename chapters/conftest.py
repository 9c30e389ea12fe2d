"""pytest set-up for the chapter notebooks (strict nbval), chapters/ only.

nbval sends each cell to the kernel with ``store_history=False``. IPython
decides whether a trailing ``;`` hides a cell's result by looking at the
last cell stored in history, so under nbval ``ax.legend();`` shows its
result while the stored notebook (executed by scripts/execute_notebooks.py,
like Jupyter, with history) does not, and the comparison fails on a
difference no reader would see. Executing with history, as Jupyter does,
removes the mismatch; nbval ignores execution counts, so nothing else
changes.

Each notebook kernel gets one thread unless ``OMP_NUM_THREADS`` says
otherwise (the kernels nbval starts inherit it), as the course promises and
as ``scripts/execute_notebooks.py`` stores the outputs. Without it,
``pytest -n 2`` runs two kernels of two threads each on two cores, and
oversubscribed OpenMP threads slow cells by ten times or more (cells then
hit nbval's 300-second timeout). ``OMP_NUM_THREADS=2 pytest chapters``
checks that the stored outputs hold at two threads too.
"""

from __future__ import annotations

import os

from nbval.kernel import RunningKernel


def _execute_with_history(self, cell_input, allow_stdin=None):
    return self.kc.execute(
        cell_input,
        store_history=True,
        allow_stdin=allow_stdin,
        stop_on_error=False,
    )


RunningKernel.execute_cell_input = _execute_with_history
os.environ.setdefault("OMP_NUM_THREADS", "1")
