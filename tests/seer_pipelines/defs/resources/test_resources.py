"""WarehouseResource and EvaluatorResource: settings, identifiers, chunked reads, swaps."""

from __future__ import annotations

import threading
import time
from datetime import UTC, date, datetime, timedelta

import pytest
import sqlalchemy as sa

from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_metrics.events import parse_timestamp
from seer_metrics.text.redaction import redact_url
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.demo.synthetic import generate_events
from seer_pipelines.warehouse.day import epoch_text_value
from seer_pipelines.warehouse.engine import (
    WarehouseConfigError,
    default_warehouse_url,
    normalise_url,
    validate_identifier,
)
from seer_pipelines.warehouse.schema import EVENT_METRICS_TABLE, SLICE_METRICS_TABLE, output_tables
from seer_pipelines.warehouse.writer import plain_value

DAY = date(2026, 11, 29)


@pytest.fixture
def warehouse(tmp_path):
    resource = WarehouseResource(url=f"sqlite:///{tmp_path / 'w.sqlite'}", chunk_size=7)
    yield resource
    resource.dispose()


def test_postgresql_urls_use_psycopg2() -> None:
    assert normalise_url("postgresql://u:p@h/db") == "postgresql+psycopg2://u:p@h/db"
    assert normalise_url("postgres://u@h/db") == "postgresql+psycopg2://u@h/db"
    assert normalise_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"
    assert normalise_url("sqlite:///x.sqlite") == "sqlite:///x.sqlite"


def test_passwords_never_appear_in_descriptions() -> None:
    url = "postgresql://seer:hunter2@db.internal:5432/warehouse"
    assert "hunter2" not in redact_url(url)
    assert "hunter2" not in WarehouseResource(url=url).describe()


def test_url_and_table_fall_back_to_the_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("SEER_WAREHOUSE_URL", raising=False)
    monkeypatch.delenv("SEER_EVENTS_TABLE", raising=False)
    monkeypatch.chdir(tmp_path)
    resource = WarehouseResource()
    assert resource.resolved_url() == default_warehouse_url()
    assert resource.resolved_url().endswith(".seer/warehouse.sqlite")
    assert resource.resolved_events_table() == "retrieval_events"
    monkeypatch.setenv("SEER_WAREHOUSE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("SEER_EVENTS_TABLE", "rag_events")
    assert resource.resolved_url() == "postgresql+psycopg2://u@h/db"
    assert resource.resolved_events_table() == "rag_events"
    # Config wins over the environment.
    assert WarehouseResource(events_table="other").resolved_events_table() == "other"


@pytest.mark.parametrize(
    "name",
    ["retrieval_events; drop table x", 'events"', "1events", "a.b", "", "x" * 64, "ev ents"],
)
def test_identifiers_are_validated(name) -> None:
    with pytest.raises(WarehouseConfigError, match="not a valid identifier"):
        validate_identifier(name, "events_table")
    with pytest.raises(WarehouseConfigError):
        WarehouseResource(events_table=name or "bad name").resolved_events_table()


def test_a_bad_column_name_in_config_is_rejected(warehouse) -> None:
    bad = WarehouseResource(url=warehouse.resolved_url(), task_column="task; --")
    with pytest.raises(WarehouseConfigError, match="task_column"):
        bad.source_columns()


def test_a_missing_column_is_named(warehouse) -> None:
    write_events(warehouse.get_engine(), list(generate_events(1, end_day=DAY, events_per_day=5)))
    renamed = WarehouseResource(url=warehouse.resolved_url(), task_column="question")
    with pytest.raises(WarehouseConfigError, match="no column 'question'"):
        renamed.events_table_object()
    renamed.dispose()


def test_reads_one_day_in_chunks_with_exact_bounds(warehouse) -> None:
    records = list(generate_events(3, end_day=DAY, events_per_day=30))
    # Events exactly on the boundaries belong to the day that starts there.
    midnight = datetime(2026, 11, 29)
    records.append(dict(records[0], event_id="at-start", event_ts=midnight))
    records.append(dict(records[0], event_id="at-end", event_ts=midnight + timedelta(days=1)))
    write_events(warehouse.get_engine(), records, replace_days=False)
    chunks = list(warehouse.iter_event_chunks(DAY))
    assert all(len(chunk) <= 7 for chunk in chunks)
    assert len(chunks) > 2
    ids = [row["event_id"] for chunk in chunks for row in chunk]
    expected = {r["event_id"] for r in records if r["event_ts"].date() == DAY}
    assert set(ids) == expected and len(ids) == len(expected)
    assert "at-start" in ids and "at-end" not in ids
    assert warehouse.count_events(DAY) == len(expected)


# Text timestamps as logging pipelines write them, with the UTC day each one belongs to.
TEXT_TIMESTAMPS = {
    "utc-z": ("2026-11-29T00:00:00Z", DAY),
    "late-new-york": ("2026-11-29T23:30:00-05:00", DAY + timedelta(days=1)),
    "evening-new-york-before": ("2026-11-28T20:00:00-05:00", DAY),
    "noon-space": ("2026-11-29 12:00:00", DAY),
    "early-athens": ("2026-11-30T01:00:00+02:00", DAY),
    "early-tokyo-no-colon": ("2026-11-30T08:00:00+0900", DAY),
    "fraction-before": ("2026-11-28T23:59:59.5", DAY - timedelta(days=1)),
    "midnight-t": ("2026-11-29T00:00:00", DAY),
    "midnight-space": ("2026-11-29 00:00:00", DAY),
    "next-midnight-sqlite-format": ("2026-11-30 00:00:00", DAY + timedelta(days=1)),
    "next-midnight-utc-offset": ("2026-11-30T00:00:00+00:00", DAY + timedelta(days=1)),
    "last-microsecond": ("2026-11-29 23:59:59.999999", DAY),
    "unparseable": ("2026-11-29 junk", DAY),  # read by its day, stored as invalid
    # Not starting with YYYY-MM-DD: found all the same, placed by their parsed time.
    "compact-utc": ("20261129T120000Z", DAY),
    "compact-offset-after": ("20261129T220000-0300", DAY + timedelta(days=1)),
    "leading-space": (" 2026-11-29T12:00:00Z", DAY),
    "leading-spaces-offset-after": ("  2026-11-29T23:30:00-05:00", DAY + timedelta(days=1)),
    "week-date": ("2026-W48-7T12:00Z", DAY),
    "epoch-text": ("1795953600", DAY),
    "epoch-text-fraction-before": (" 1795910399.5 ", DAY - timedelta(days=1)),
    "no-date": ("yesterday", None),  # on no day: counted by count_unplaced_events
}


def create_events_table(warehouse: WarehouseResource, column_type: sa.types.TypeEngine) -> sa.Table:
    """An events table whose `event_ts` column has the given type."""
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(schema=warehouse.resolved_schema()),
        sa.Column("event_id", sa.Text),
        sa.Column("event_ts", column_type),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.Text),
        sa.Column("metadata", sa.Text),
    )
    table.metadata.create_all(warehouse.get_engine())
    return table


def write_text_timestamps(warehouse: WarehouseResource, column_type: sa.types.TypeEngine) -> None:
    table = create_events_table(warehouse, column_type)
    rows = [
        {"event_id": event_id, "event_ts": text, "task": "q", "context": '["a"]', "metadata": "{}"}
        for event_id, (text, _day) in TEXT_TIMESTAMPS.items()
    ]
    with warehouse.get_engine().begin() as connection:
        # Raw text, whatever the column's declared type (SQLite keeps it as written).
        connection.execute(
            sa.text(
                f"insert into {table.fullname} (event_id, event_ts, task, context, metadata) "
                "values (:event_id, :event_ts, :task, :context, :metadata)"
            ),
            rows,
        )


def check_days_of_text_timestamps(warehouse: WarehouseResource) -> None:
    assert warehouse.count_unplaced_events() == 1  # "yesterday"
    for day in (DAY - timedelta(days=1), DAY, DAY + timedelta(days=1)):
        ids = [row["event_id"] for chunk in warehouse.iter_event_chunks(day) for row in chunk]
        expected = {event_id for event_id, (_text, at) in TEXT_TIMESTAMPS.items() if at == day}
        assert sorted(ids) == sorted(expected), day
        assert warehouse.count_events(day) == len(expected)
        # Every row read for the day is really on it (or has no parsable time at all).
        for chunk in warehouse.iter_event_chunks(day):
            for row in chunk:
                if row["event_id"] != "unparseable":
                    assert parse_timestamp(row["event_ts"]).date() == day


@pytest.mark.parametrize("column_type", [sa.Text(), sa.DateTime(), sa.TIMESTAMP()])
def test_sqlite_text_timestamps_land_on_their_utc_day(warehouse, column_type) -> None:
    write_text_timestamps(warehouse, column_type)
    check_days_of_text_timestamps(warehouse)


@pytest.mark.postgres
def test_postgres_text_timestamps_land_on_their_utc_day(postgres_url, postgres_schema) -> None:
    warehouse = WarehouseResource(url=postgres_url, db_schema=postgres_schema, chunk_size=3)
    try:
        write_text_timestamps(warehouse, sa.Text())
        check_days_of_text_timestamps(warehouse)
    finally:
        warehouse.dispose()


@pytest.mark.postgres
def test_postgres_timestamptz_with_offsets_land_on_their_utc_day(
    postgres_url, postgres_schema
) -> None:
    warehouse = WarehouseResource(url=postgres_url, db_schema=postgres_schema, chunk_size=3)
    parsable = {k: v for k, v in TEXT_TIMESTAMPS.items() if k not in ("unparseable", "no-date")}
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(schema=postgres_schema),
        sa.Column("event_id", sa.Text),
        sa.Column("event_ts", sa.DateTime(timezone=True)),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.Text),
        sa.Column("metadata", sa.Text),
    )
    try:
        table.metadata.create_all(warehouse.get_engine())
        with warehouse.get_engine().begin() as connection:
            # A session in another time zone: the stored instant is what counts.
            connection.execute(sa.text("set time zone 'America/New_York'"))
            connection.execute(
                table.insert(),
                [
                    {
                        "event_id": k,
                        "event_ts": parse_timestamp(epoch_text_value(text)),
                        "task": "q",
                        "context": "[]",
                    }
                    for k, (text, _day) in parsable.items()
                ],
            )
        for day in (DAY - timedelta(days=1), DAY, DAY + timedelta(days=1)):
            ids = {row["event_id"] for chunk in warehouse.iter_event_chunks(day) for row in chunk}
            assert ids == {k for k, (_text, at) in parsable.items() if at == day}, day
            assert warehouse.count_events(day) == len(ids)
    finally:
        warehouse.dispose()


def test_configured_table_and_column_names(warehouse) -> None:
    table = sa.Table(
        "rag_log",
        sa.MetaData(),
        sa.Column("id", sa.String(50)),
        sa.Column("created_at", sa.DateTime),
        sa.Column("question", sa.Text),
        sa.Column("passages", sa.Text),
        sa.Column("tags", sa.Text),
    )
    table.metadata.create_all(warehouse.get_engine())
    with warehouse.get_engine().begin() as connection:
        connection.execute(
            table.insert(),
            [
                {
                    "id": "e1",
                    "created_at": datetime(2026, 11, 29, 10),
                    "question": "q?",
                    "passages": '["a"]',
                    "tags": '{"env": "prod"}',
                }
            ],
        )
    configured = WarehouseResource(
        url=warehouse.resolved_url(),
        events_table="rag_log",
        event_id_column="id",
        event_ts_column="created_at",
        task_column="question",
        context_column="passages",
        metadata_column="tags",
    )
    [[row]] = list(configured.iter_event_chunks(DAY))
    assert row["event_id"] == "e1" and row["task"] == "q?" and row["context"] == '["a"]'
    configured.dispose()


def test_partition_writer_swaps_atomically_and_keeps_the_first_row_per_key(warehouse) -> None:
    def rows(tag: str, count: int) -> list[dict]:
        return [{"event_id": f"e{i}", "status": "ok", "reason": tag} for i in range(count)]

    with warehouse.partition_writer(EVENT_METRICS_TABLE, DAY) as writer:
        writer.write(rows("first", 5))
        writer.write(rows("repeat", 2))  # the same ids again: kept once
        assert writer.commit() == 5
    frame = warehouse.read_partition_frame(EVENT_METRICS_TABLE, DAY)
    assert sorted(frame["reason"]) == ["first"] * 5

    # A run that fails half-way leaves the previous partition untouched.
    with pytest.raises(RuntimeError), warehouse.partition_writer(EVENT_METRICS_TABLE, DAY) as w:
        w.write(rows("second", 3))
        raise RuntimeError("crash")
    assert warehouse.count_partition(EVENT_METRICS_TABLE, DAY) == 5
    with warehouse.get_engine().connect() as connection:
        staged = connection.execute(sa.text("select count(*) from seer_event_metrics__staging"))
        assert staged.scalar_one() == 0

    # Another day is not touched by a swap.
    with warehouse.partition_writer(EVENT_METRICS_TABLE, DAY - timedelta(days=1)) as writer:
        writer.write(rows("yesterday", 2))
        writer.commit()
    with warehouse.partition_writer(EVENT_METRICS_TABLE, DAY) as writer:
        writer.write(rows("third", 1))
        writer.commit()
    assert warehouse.count_partition(EVENT_METRICS_TABLE, DAY) == 1
    assert warehouse.count_partition(EVENT_METRICS_TABLE, DAY - timedelta(days=1)) == 2


def staged_count(warehouse: WarehouseResource, table: str) -> int:
    staging = warehouse.output_tables().staging[table]
    with warehouse.get_engine().connect() as connection:
        return connection.execute(sa.select(sa.func.count()).select_from(staging)).scalar_one()


def test_two_runs_of_the_same_day_never_commit_half_a_partition(warehouse) -> None:
    with warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as first:
        first.write([{"slice": "all", "events": 10}])
        # A second run of the same day starts while the first is still staging.
        with warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as second:
            second.write([{"slice": "all", "events": 99}])
            first.write([{"slice": "env=prod", "events": 5}])
            assert first.commit() == 2
            frame = warehouse.read_partition_frame(SLICE_METRICS_TABLE, DAY)
            assert dict(zip(frame["slice"], frame["events"], strict=True)) == {
                "all": 10,
                "env=prod": 5,
            }
            assert second.commit() == 1
    frame = warehouse.read_partition_frame(SLICE_METRICS_TABLE, DAY)
    assert list(frame["events"]) == [99]
    assert staged_count(warehouse, SLICE_METRICS_TABLE) == 0


def test_a_writer_left_without_commit_cleans_up_after_itself(warehouse) -> None:
    with warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as writer:
        writer.write([{"slice": "all", "events": 10}])
    assert staged_count(warehouse, SLICE_METRICS_TABLE) == 0
    assert warehouse.count_partition(SLICE_METRICS_TABLE, DAY) == 0


def test_commit_fails_loudly_when_staged_rows_went_missing(warehouse) -> None:
    with warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as writer:
        writer.write([{"slice": "all", "events": 1}])
        writer.commit()
    with (
        pytest.raises(RuntimeError, match="staged 2 rows but 1"),
        warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as writer,
    ):
        writer.write([{"slice": "all", "events": 10}, {"slice": "env=prod", "events": 5}])
        with warehouse.get_engine().begin() as connection:  # someone else's clean-up
            connection.execute(
                sa.text("delete from seer_slice_metrics__staging where slice = 'env=prod'")
            )
        writer.commit()
    # Nothing of the failed swap is visible: the previous partition stands.
    frame = warehouse.read_partition_frame(SLICE_METRICS_TABLE, DAY)
    assert list(frame["events"]) == [1]
    assert staged_count(warehouse, SLICE_METRICS_TABLE) == 0


def test_only_stale_staging_rows_of_other_runs_are_removed(warehouse) -> None:
    tables = warehouse.ensure_output_tables()
    staging = tables.staging[SLICE_METRICS_TABLE]
    now = datetime.now(UTC)
    with warehouse.get_engine().begin() as connection:
        connection.execute(
            staging.insert(),
            [
                # A run that crashed two days ago, and one still staging a minute ago.
                {**STAGED, "staging_run": "crashed", "staging_at": now - timedelta(days=2)},
                {**STAGED, "staging_run": "in-flight", "staging_at": now - timedelta(minutes=1)},
            ],
        )
    with warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as writer:
        with warehouse.get_engine().connect() as connection:
            runs = connection.execute(sa.select(staging.c.staging_run)).scalars().all()
        assert runs == ["in-flight"]
        writer.write([{"slice": "all", "events": 3}])
        assert writer.commit() == 1
    assert staged_count(warehouse, SLICE_METRICS_TABLE) == 1  # the in-flight run's row


def test_staging_tables_of_an_earlier_version_get_the_new_columns(warehouse) -> None:
    with warehouse.get_engine().begin() as connection:
        connection.execute(
            sa.text(
                "create table seer_slice_metrics__staging (staging_run varchar(64) not null, "
                "staging_seq integer not null, partition_date date, slice varchar(255), "
                "events integer)"
            )
        )
        connection.execute(
            sa.text(
                "insert into seer_slice_metrics__staging values "
                "('old-version-run', 0, '2026-11-29', 'all', 1)"
            )
        )
    warehouse.ensure_output_tables()
    columns = sa.inspect(warehouse.get_engine()).get_columns("seer_slice_metrics__staging")
    assert "staging_at" in {column["name"] for column in columns}
    with warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as writer:
        writer.write([{"slice": "all", "events": 3}])
        assert writer.commit() == 1
    # The old version's leftover had no time: removed as stale.
    assert staged_count(warehouse, SLICE_METRICS_TABLE) == 0


STAGED = {"partition_date": DAY, "staging_seq": 0, "slice": "all", "events": 7}


def test_values_are_bound_not_interpolated(warehouse) -> None:
    hostile = "x'); drop table seer_slice_metrics; --"
    with warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as writer:
        writer.write([{"slice": hostile, "slice_key": "tenant", "slice_value": hostile}])
        writer.commit()
    frame = warehouse.read_partition_frame(SLICE_METRICS_TABLE, DAY)
    assert list(frame["slice"]) == [hostile]


def test_evaluator_resource_builds_the_lexical_judge_by_default(monkeypatch) -> None:
    monkeypatch.delenv("SEER_EVALUATOR", raising=False)
    monkeypatch.delenv("SEER_EVALUATOR_MODEL", raising=False)
    assert isinstance(EvaluatorResource().build(), LexicalEvaluator)
    monkeypatch.setenv("SEER_EVALUATOR", "LEXICAL")
    assert EvaluatorResource().resolved_kind() == "lexical"


def test_evaluator_resource_rejects_unknown_kinds(monkeypatch) -> None:
    monkeypatch.setenv("SEER_EVALUATOR", "gpt")
    with pytest.raises(ValueError, match="SEER_EVALUATOR"):
        EvaluatorResource().build()


def test_openai_evaluator_gets_its_settings_and_never_shows_the_key(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    resource = EvaluatorResource(
        kind="openai",
        model="gpt-4o-mini",
        api_key="sk-test-secret",
        base_url="http://127.0.0.1:9/v1",
        requests_per_minute=120,
        max_concurrency=3,
    )
    evaluator = resource.build()
    assert evaluator.name == "openai" and evaluator.model == "gpt-4o-mini"
    assert evaluator.settings.requests_per_minute == 120
    assert evaluator.settings.max_concurrency == 3
    assert evaluator.settings.base_url == "http://127.0.0.1:9/v1"
    assert "sk-test-secret" not in repr(evaluator.settings)


def test_the_slow_endpoint_settings_reach_the_judge_from_config_or_environment(
    monkeypatch,
) -> None:
    monkeypatch.setenv("SEER_LLM_MAX_TOKENS", "700")
    monkeypatch.setenv("SEER_LLM_TIMEOUT_SECONDS", "240")
    monkeypatch.setenv("SEER_LLM_MAX_REQUIREMENTS", "12")
    from_env = EvaluatorResource(kind="openai", api_key="k").build().settings
    assert (from_env.max_completion_tokens, from_env.timeout_seconds) == (700, 240.0)
    assert from_env.max_requirements == 12
    configured = EvaluatorResource(
        kind="openai", api_key="k", max_completion_tokens=300, max_requirements=8
    ).build()
    assert configured.settings.max_completion_tokens == 300
    assert configured.settings.max_requirements == 8


@pytest.mark.postgres
def test_two_runs_of_the_same_day_on_postgres(postgres_url, postgres_schema) -> None:
    warehouse = WarehouseResource(url=postgres_url, db_schema=postgres_schema)
    try:
        test_two_runs_of_the_same_day_never_commit_half_a_partition(warehouse)
        test_commit_fails_loudly_when_staged_rows_went_missing(warehouse)
        test_only_stale_staging_rows_of_other_runs_are_removed(warehouse)
    finally:
        warehouse.dispose()


def test_one_redact_url_for_the_whole_project() -> None:
    import seer_metrics.text.redaction
    import seer_pipelines.defs.resources.warehouse

    assert (
        seer_pipelines.defs.resources.warehouse.redact_url is seer_metrics.text.redaction.redact_url
    )


@pytest.mark.parametrize(
    "prices",
    ['{"my-deployment": [1.5, 6]}', {"my-deployment": [1.5, 6]}, {"my-deployment": (1.5, 6.0)}],
)
def test_evaluator_prices_from_config_reach_the_judge(monkeypatch, prices) -> None:
    monkeypatch.setenv("SEER_LLM_PRICES", '{"my-deployment": [9, 9], "other": [1, 1]}')
    resource = EvaluatorResource(kind="openai", model="my-deployment", api_key="k", prices=prices)
    settings = resource.build().settings
    assert settings.price_for("my-deployment") == (1.5, 6.0)
    assert settings.price_for("gpt-4o-mini") == (0.15, 0.60)  # the built-in list stays
    assert settings.usage(1_000_000, 1_000_000).cost_usd == pytest.approx(7.5)


def test_evaluator_prices_fall_back_to_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("SEER_LLM_PRICES", '{"my-deployment": [2, 4]}')
    resource = EvaluatorResource(kind="openai", model="my-deployment", api_key="k")
    assert resource.build().settings.price_for("my-deployment") == (2.0, 4.0)


@pytest.mark.parametrize("prices", ["not json", '{"m": [1]}', {"m": "cheap"}, ["m", 1, 2]])
def test_bad_evaluator_prices_are_refused_with_the_setting_named(prices) -> None:
    resource = EvaluatorResource(kind="openai", model="m", api_key="k", prices=prices)
    with pytest.raises(ValueError, match="prices"):
        resource.build()


@pytest.mark.postgres
def test_concurrent_commits_of_the_same_day_on_postgres_replace_not_add(
    postgres_url, postgres_schema
) -> None:
    """Under READ COMMITTED neither swap sees the other's uncommitted rows; a per-day lock
    makes the second wait, then replace the first's rows instead of adding to them."""
    first = WarehouseResource(url=postgres_url, db_schema=postgres_schema)
    second = WarehouseResource(url=postgres_url, db_schema=postgres_schema)
    table_name = output_tables(postgres_schema)[SLICE_METRICS_TABLE].name
    first_is_swapping = threading.Event()

    @sa.event.listens_for(first.get_engine(), "after_cursor_execute")
    def hold_the_swap(_connection, _cursor, statement, *_args) -> None:
        # The first run pauses inside its swap, after deleting the partition.
        deletes_partition = (
            statement.lstrip().upper().startswith("DELETE")
            and table_name in statement
            and "__staging" not in statement
        )
        if deletes_partition and not first_is_swapping.is_set():
            first_is_swapping.set()
            time.sleep(0.5)

    rows = {"first": 40, "second": 40}
    results: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def run(name: str, warehouse: WarehouseResource) -> None:
        try:
            with warehouse.partition_writer(SLICE_METRICS_TABLE, DAY) as writer:
                writer.write([{"slice": f"{name}-{i}", "events": i} for i in range(rows[name])])
                barrier.wait(timeout=10)
                if name == "second":
                    assert first_is_swapping.wait(timeout=10)
                results[name] = writer.commit()
        except Exception as error:  # reported by the assertion below
            results[name] = error

    try:
        first.ensure_output_tables()
        threads = [
            threading.Thread(target=run, args=("first", first)),
            threading.Thread(target=run, args=("second", second)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert results == {"first": 40, "second": 40}
        frame = first.read_partition_frame(SLICE_METRICS_TABLE, DAY)
        assert len(frame) == 40
        # The run that committed last (it waited for the first) owns the partition.
        assert all(name.startswith("second-") for name in frame["slice"])
    finally:
        first.dispose()
        second.dispose()


# Epoch seconds -> the UTC day they fall on (1795910400 is 2026-11-29T00:00:00Z).
EPOCH_TIMESTAMPS = {
    "epoch-start": (1795910400, DAY),
    "epoch-before": (1795910399.5, DAY - timedelta(days=1)),
    "epoch-last": (1795996799.75, DAY),
    "epoch-next": (1795996800, DAY + timedelta(days=1)),
    "epoch-noon": (1795953600.25, DAY),
}


def check_days_of_epoch_timestamps(
    warehouse: WarehouseResource, column_type: sa.types.TypeEngine
) -> None:
    table = create_events_table(warehouse, column_type)
    whole = isinstance(column_type, sa.Integer)
    epochs = {
        event_id: (epoch, at)
        for event_id, (epoch, at) in EPOCH_TIMESTAMPS.items()
        if not whole or isinstance(epoch, int)
    }
    with warehouse.get_engine().begin() as connection:
        connection.execute(
            table.insert(),
            [
                {"event_id": event_id, "event_ts": epoch, "task": "q", "context": '["a"]'}
                for event_id, (epoch, _day) in epochs.items()
            ],
        )
    for day in (DAY - timedelta(days=1), DAY, DAY + timedelta(days=1)):
        rows = [row for chunk in warehouse.iter_event_chunks(day) for row in chunk]
        expected = {event_id for event_id, (_epoch, at) in epochs.items() if at == day}
        assert sorted(row["event_id"] for row in rows) == sorted(expected), day
        assert warehouse.count_events(day) == len(expected)
        for row in rows:  # the value read (int, float or Decimal) parses to that day
            assert parse_timestamp(row["event_ts"]).date() == day


@pytest.mark.parametrize("column_type", [sa.Numeric(), sa.Float(), sa.Integer()])
def test_sqlite_epoch_columns_land_on_their_utc_day(warehouse, column_type) -> None:
    check_days_of_epoch_timestamps(warehouse, column_type)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "column_type", [sa.Double(), sa.Float(), sa.Numeric(), sa.Numeric(14, 3), sa.BigInteger()]
)
def test_postgres_epoch_columns_land_on_their_utc_day(
    postgres_url, postgres_schema, column_type
) -> None:
    warehouse = WarehouseResource(url=postgres_url, db_schema=postgres_schema, chunk_size=2)
    try:
        check_days_of_epoch_timestamps(warehouse, column_type)
    finally:
        warehouse.dispose()


def test_plain_value_clears_non_finite_numbers_inside_json_values() -> None:
    value = {"a": float("nan"), "b": [1.0, float("inf"), {"c": float("-inf")}], "d": "x"}
    assert plain_value(value) == {"a": None, "b": [1.0, None, {"c": None}], "d": "x"}
    assert plain_value([float("nan")]) == [None]
    assert plain_value(float("nan")) is None
