"""The moment a day was first judged under a budget, kept in the warehouse.

A re-run of a capped day finds the events the earlier run paid for in the cache. Counted
as free, they would let every re-run spend another whole cap. Read as it was when the day
was first judged, the cache makes every run of the day project the same spend and draw the
line at the same event, as batch mode does with its first submission.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import sqlalchemy as sa

from seer_pipelines.warehouse.schema import budget_days_table


def first_judged_at(engine: sa.Engine, schema: str | None, day: date) -> datetime:
    """When `day` was first judged under a budget; now, recorded, if it never was."""
    table = budget_days_table(schema)
    table.metadata.create_all(engine, tables=[table], checkfirst=True)
    select = sa.select(table.c.first_judged_at).where(table.c.partition_date == day)
    with engine.begin() as connection:
        found = connection.execute(select).scalar()
        if found is None:
            try:
                with connection.begin_nested():
                    connection.execute(
                        table.insert().values(partition_date=day, first_judged_at=datetime.now(UTC))
                    )
            except sa.exc.IntegrityError:
                pass  # another run of the day recorded it first: use theirs
            found = connection.execute(select).scalar()
    if found.tzinfo is None:  # SQLite hands back naive timestamps
        found = found.replace(tzinfo=UTC)
    return found
