"""pytest set-up for the chapter notebooks (strict nbval), applied to chapters/ only.

nbval sends each cell to the kernel with ``store_history=False``. IPython
decides whether a trailing ``;`` hides a cell's result by looking at the last
cell stored in history, so under nbval ``ax.legend();`` shows its result while
the stored notebook (executed by scripts/execute_notebooks.py, like Jupyter,
with history) does not, and the comparison fails on a difference no reader
would see. Executing with history, as Jupyter does, removes the mismatch;
nbval ignores execution counts, so nothing else changes.
"""

from __future__ import annotations

from nbval.kernel import RunningKernel


def _execute_with_history(self, cell_input, allow_stdin=None):
    return self.kc.execute(
        cell_input, store_history=True, allow_stdin=allow_stdin, stop_on_error=False
    )


RunningKernel.execute_cell_input = _execute_with_history
