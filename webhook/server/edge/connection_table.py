"""How many connections each worker holds, in memory that a gunicorn master and its workers share.

The master makes the table before it forks, so every worker maps the same pages. It gives each
worker it forks a row no live worker holds, and clears the row once it has reaped the worker; a
worker writes only its own row and reads its siblings' rows. A master started again by USR2 is
a new program with a new table: the two generations do not see each other for the short time
they overlap, and each keeps its own workers even.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable
from typing import Any

DEFAULT_CAPACITY = 256

# Cells are signed 64-bit integers. Cell 0 counts the rows ever handed out, so that readers
# look no further; then one row per worker: its open connections, and whether it accepts.
_CELL_BYTES = 8
_HEADER_CELLS = 1
_CONNECTIONS, _ACCEPTING = range(2)
_ROW_CELLS = 2


class ConnectionTable:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        size = (_HEADER_CELLS + capacity * _ROW_CELLS) * _CELL_BYTES
        # An anonymous mapping is shared, not copied, by the processes forked after it is made.
        self._cells = memoryview(mmap.mmap(-1, size)).cast("q")

    def seat(self, worker: Any, siblings: Iterable[Any]) -> None:
        """Give `worker`, about to be forked, a row none of its live `siblings` holds, as its
        `connection_row`; None when the table is full, and then it takes connections without
        looking at the others. Called in the master only."""
        taken = {row.index for row in map(_row_of, siblings) if row is not None}
        free = next((index for index in range(self.capacity) if index not in taken), None)
        if free is None:
            worker.connection_row = None
            return
        row = WorkerRow(self._cells, free)
        row.clear()
        self._cells[0] = max(self._cells[0], free + 1)
        worker.connection_row = row

    def unseat(self, worker: Any) -> None:
        """Clear the row of a worker the master has reaped."""
        row = _row_of(worker)
        if row is not None:
            row.clear()


def _row_of(worker: Any) -> WorkerRow | None:
    # A worker class set on the command line may know nothing of rows.
    return getattr(worker, "connection_row", None)


class WorkerRow:
    """One worker's row, and its view of its siblings' rows."""

    def __init__(self, cells: memoryview, index: int) -> None:
        self._cells = cells
        self.index = index
        self._base = _HEADER_CELLS + index * _ROW_CELLS

    def clear(self) -> None:
        for field in range(_ROW_CELLS):
            self._cells[self._base + field] = 0

    def publish(self, connections: int) -> None:
        self._cells[self._base + _CONNECTIONS] = connections

    def set_accepting(self, accepting: bool) -> None:
        self._cells[self._base + _ACCEPTING] = int(accepting)

    def crowded(self) -> bool:
        """Whether this worker holds more connections than a sibling that accepts them."""
        cells = self._cells
        mine = cells[self._base + _CONNECTIONS]
        end = _HEADER_CELLS + cells[0] * _ROW_CELLS
        return any(
            cells[base + _ACCEPTING] and cells[base + _CONNECTIONS] < mine
            for base in range(_HEADER_CELLS, end, _ROW_CELLS)
            if base != self._base
        )
