"""The connection table the workers of one master share: rows handed out and taken back by the
master, and a worker's view of whether a sibling should take the next connection."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from webhook.server.edge.connection_table import ConnectionTable, WorkerRow


@dataclass
class Worker:
    connection_row: WorkerRow | None = None


def seated(table: ConnectionTable, count: int) -> list[Worker]:
    workers: list[Worker] = []
    for _ in range(count):
        worker = Worker()
        table.seat(worker, workers)
        workers.append(worker)
    return workers


def row(worker: Worker) -> WorkerRow:
    assert worker.connection_row is not None
    return worker.connection_row


def test_each_live_worker_gets_its_own_row_and_a_dead_ones_row_is_given_again() -> None:
    table = ConnectionTable(capacity=4)
    workers = seated(table, 3)
    assert [row(worker).index for worker in workers] == [0, 1, 2]

    dead = workers.pop(1)
    table.unseat(dead)
    replacement = Worker()
    table.seat(replacement, workers)
    assert row(replacement).index == 1


def test_a_worker_past_the_tables_capacity_gets_no_row() -> None:
    table = ConnectionTable(capacity=2)
    workers = seated(table, 2)
    extra = Worker(connection_row=row(workers[0]))
    table.seat(extra, workers)
    assert extra.connection_row is None


# (connections of this worker, then (connections, accepting) of each sibling), crowded?
CROWDED = {
    "alone": ((3, ()), False),
    "even": ((2, ((2, True),)), False),
    "fewer than the sibling": ((1, ((2, True),)), False),
    "more than the sibling": ((2, ((1, True),)), True),
    "more than a sibling that does not accept": ((2, ((0, False),)), False),
    "more than one of two siblings": ((2, ((3, True), (1, True))), True),
    "more than a stopping one, not the others": ((2, ((2, True), (0, False))), False),
}


@pytest.mark.parametrize(("counts", "expected"), CROWDED.values(), ids=CROWDED.keys())
def test_a_worker_is_crowded_when_an_accepting_sibling_has_fewer_connections(
    counts: tuple[int, tuple[tuple[int, bool], ...]], expected: bool
) -> None:
    mine, siblings = counts
    table = ConnectionTable(capacity=8)
    me, *others = seated(table, 1 + len(siblings))
    row(me).set_accepting(True)
    row(me).publish(mine)
    for worker, (connections, accepting) in zip(others, siblings, strict=True):
        row(worker).publish(connections)
        row(worker).set_accepting(accepting)
    assert row(me).crowded() is expected


def test_an_unseated_worker_no_longer_counts() -> None:
    table = ConnectionTable(capacity=4)
    me, sibling = seated(table, 2)
    row(me).publish(2)
    row(sibling).set_accepting(True)
    assert row(me).crowded()
    table.unseat(sibling)
    assert not row(me).crowded()


def test_the_table_is_shared_with_processes_forked_after_it_is_made() -> None:
    table = ConnectionTable(capacity=4)
    parent, child = seated(table, 2)
    row(parent).publish(1)
    pid = os.fork()
    if pid == 0:
        try:
            row(child).set_accepting(True)
            row(child).publish(0)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert row(parent).crowded()
