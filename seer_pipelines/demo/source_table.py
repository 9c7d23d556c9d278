"""The source events table as a logging pipeline would create it, and writing events to it.

`seer seed`, `seer demo`, the tests and the benchmarks fill a warehouse through here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta
from typing import Any

import sqlalchemy as sa


def events_table(
    name: str = "retrieval_events", schema: str | None = None, with_event_id: bool = True
) -> sa.Table:
    """The source table as a logging pipeline would create it (JSON kept as text)."""
    columns = [
        sa.Column("event_ts", sa.DateTime(timezone=False), nullable=False, index=True),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.Text),
        sa.Column("metadata", sa.Text),
    ]
    if with_event_id:
        columns.insert(0, sa.Column("event_id", sa.String(255), primary_key=True))
    return sa.Table(name, sa.MetaData(schema=schema), *columns)


def write_events(
    engine: sa.Engine,
    records: Iterator[dict[str, Any]] | Sequence[dict[str, Any]],
    *,
    table_name: str = "retrieval_events",
    schema: str | None = None,
    replace_days: bool = True,
    batch_size: int = 2_000,
    with_event_id: bool = True,
) -> int:
    """Create the events table if needed and insert `records`; returns rows written.

    With `replace_days`, rows already present for the days being written are deleted
    first, so seeding twice does not duplicate events.
    """
    table = events_table(table_name, schema, with_event_id)
    table.metadata.create_all(engine, checkfirst=True)
    written = 0
    cleared: set[date] = set()
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal written
        if not batch:
            return
        with engine.begin() as connection:
            if replace_days:
                for day in sorted({row["event_ts"].date() for row in batch} - cleared):
                    start = datetime.combine(day, datetime.min.time())
                    connection.execute(
                        table.delete().where(
                            table.c.event_ts >= start, table.c.event_ts < start + timedelta(days=1)
                        )
                    )
                    cleared.add(day)
            connection.execute(table.insert(), batch)
        written += len(batch)
        batch.clear()

    for record in records:
        row = {column.name: record.get(column.name) for column in table.columns}
        batch.append(row)
        if len(batch) >= batch_size:
            flush()
    flush()
    return written
