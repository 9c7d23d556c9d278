"""retrieval_events is observed per day before judging: row count, event_ts range, empty."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dagster import AssetKey, AssetRecordsFilter, DagsterEventType, DagsterInstance

from seer_pipelines.defs.assets.events import observe_source_day
from seer_pipelines.defs.resources.warehouse import WarehouseResource

SOURCE = AssetKey("retrieval_events")


def seeded_warehouse(tmp_path):
    from seer_pipelines.cli.seed import seed_warehouse
    from seer_pipelines.demo.synthetic import default_end_day

    url = f"sqlite:///{tmp_path / 'warehouse.sqlite'}"
    end_day = default_end_day()
    seed_warehouse(
        WarehouseResource(url=url),
        days=2,
        end_day=end_day,
        events_per_day=40,
        seed=5,
        regression_days=0,
        show_progress=False,
    )
    return url, end_day


def test_observe_source_day_counts_the_rows_and_their_range(tmp_path) -> None:
    url, day = seeded_warehouse(tmp_path)
    warehouse = WarehouseResource(url=url)
    observed = observe_source_day(warehouse, day)
    rows = warehouse.count_events(day)
    assert rows > 20
    assert observed.rows == rows
    assert observed.first_event_ts.date() == day == observed.last_event_ts.date()
    assert observed.first_event_ts <= observed.last_event_ts
    assert observed.metadata()["dagster/partition_row_count"] == rows
    assert not observed.empty
    later = observe_source_day(warehouse, day - timedelta(days=2))
    assert later.empty and later.first_event_ts is None
    assert later.metadata()["state"] == "empty"
    assert "empty or late" in later.summary()


def test_the_daily_job_observes_the_day_before_judging(tmp_path, monkeypatch) -> None:
    from seer_pipelines.definitions import defs

    url, day = seeded_warehouse(tmp_path)
    monkeypatch.setenv("SEER_WAREHOUSE_URL", url)
    monkeypatch.setenv("SEER_EVALUATOR", "lexical")
    job = defs.resolve_job_def("seer_daily_job")
    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(partition_key=day.isoformat(), instance=instance)
        assert result.success
        kinds = [
            (event.event_type, event.asset_key.to_user_string())
            for event in result.all_events
            if event.event_type
            in (DagsterEventType.ASSET_OBSERVATION, DagsterEventType.ASSET_MATERIALIZATION)
        ]
        observed_at = kinds.index((DagsterEventType.ASSET_OBSERVATION, "retrieval_events"))
        judged_at = kinds.index((DagsterEventType.ASSET_MATERIALIZATION, "event_judgments"))
        assert observed_at < judged_at
        [record] = instance.fetch_observations(
            AssetRecordsFilter(asset_key=SOURCE, asset_partitions=[day.isoformat()]), limit=5
        ).records
        metadata = record.asset_observation.metadata
        assert metadata["rows"].value == WarehouseResource(url=url).count_events(day) > 20
        assert metadata["state"].value == "has rows"
        assert datetime.fromtimestamp(metadata["last_event_ts"].value, UTC).date() == day


def test_an_empty_day_is_visible_on_the_source_before_judging(tmp_path, monkeypatch) -> None:
    """Observing a day the source has not written yet records 0 rows and warns."""
    from dagster import Definitions, define_asset_job

    from tests.default_location import retrieval_events

    url, day = seeded_warehouse(tmp_path)
    empty_day = (day - timedelta(days=2)).isoformat()  # before the seeded days
    with DagsterInstance.ephemeral() as instance:
        definitions = Definitions(
            assets=[retrieval_events],
            jobs=[define_asset_job("observe_source", selection=[SOURCE])],
            resources={"warehouse": WarehouseResource(url=url)},
        )
        result = definitions.resolve_job_def("observe_source").execute_in_process(
            partition_key=empty_day, instance=instance
        )
        assert result.success
        [record] = instance.fetch_observations(
            AssetRecordsFilter(asset_key=SOURCE, asset_partitions=[empty_day]), limit=5
        ).records
        metadata = record.asset_observation.metadata
        assert metadata["rows"].value == 0
        assert metadata["dagster/partition_row_count"].value == 0
        assert metadata["state"].value == "empty"
        warnings = [
            event.message
            for event in instance.all_logs(result.run_id)
            if event.level >= 30 and "empty or late" in (event.message or "")
        ]
        assert warnings
