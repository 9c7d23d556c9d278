"""Floats in asset, check and observation metadata are rounded for display; the tables
keep full precision."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from dagster import DagsterEventType, DagsterInstance, FloatMetadataValue, JsonMetadataValue

from seer_pipelines.defs.assets.metadata_display import display_metadata, rounded, rounded_json
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.schema import SLICE_METRICS_TABLE


def is_displayed(value: float) -> bool:
    return not math.isfinite(value) or rounded(value) == value


def floats_in(data: object) -> list[float]:
    if isinstance(data, float):
        return [data]
    if isinstance(data, dict):
        return [f for value in data.values() for f in floats_in(value)]
    if type(data) in (list, tuple):  # not records such as a TableSchema
        return [f for value in data for f in floats_in(value)]
    return []


def test_rounding_rule() -> None:
    assert rounded(0.6777677917582051) == 0.6778
    assert rounded(1234.567891) == 1234.5679
    assert rounded(0.000123456789) == 0.0001235  # small costs stay visible
    assert rounded(-0.25) == -0.25
    assert rounded(0.0) == 0.0
    assert math.isnan(rounded(float("nan")))
    assert rounded_json({"a": [0.123456, {"b": 2}], "c": True}) == {
        "a": [0.1235, {"b": 2}],
        "c": True,
    }


def test_display_metadata_rounds_plain_and_dagster_values() -> None:
    import numpy as np

    shown = display_metadata(
        {
            "mean": 0.6777677917582051,
            "numpy": np.float64(0.333333333),
            "wrapped": FloatMetadataValue(0.987654321),
            "json": JsonMetadataValue([{"observed": 0.55555555}]),
            "count": 12,
            "flag": True,
            "text": "0.123456789",
        }
    )
    assert shown["mean"] == 0.6778
    assert shown["numpy"] == 0.3333
    assert shown["wrapped"].value == 0.9877
    assert shown["json"].data == [{"observed": 0.5556}]
    assert shown["count"] == 12 and shown["flag"] is True and shown["text"] == "0.123456789"


def test_every_float_the_pipeline_emits_is_rounded(tmp_path, monkeypatch) -> None:
    """Materializations, observations and check results of real days; the slice table
    still holds the unrounded means."""
    from seer_pipelines.cli.seed import seed_warehouse
    from seer_pipelines.definitions import defs
    from seer_pipelines.demo.synthetic import default_end_day

    url = f"sqlite:///{tmp_path / 'warehouse.sqlite'}"
    end_day = default_end_day()
    days = [end_day - timedelta(days=offset) for offset in range(3, -1, -1)]
    seed_warehouse(
        WarehouseResource(url=url),
        days=len(days),
        end_day=end_day,
        events_per_day=60,
        seed=3,
        regression_days=1,
        show_progress=False,
    )
    monkeypatch.setenv("SEER_WAREHOUSE_URL", url)
    monkeypatch.setenv("SEER_EVALUATOR", "lexical")
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    job = defs.resolve_job_def("seer_daily_job")
    kinds = {
        DagsterEventType.ASSET_MATERIALIZATION,
        DagsterEventType.ASSET_OBSERVATION,
        DagsterEventType.ASSET_CHECK_EVALUATION,
    }
    checked: dict[str, int] = {}
    unrounded: list[str] = []
    with DagsterInstance.ephemeral() as instance:
        for day in days:
            result = job.execute_in_process(partition_key=day.isoformat(), instance=instance)
            assert result.success
            for event in result.all_events:
                if event.event_type not in kinds:
                    continue
                data = event.event_specific_data
                metadata = getattr(data, "metadata", None)
                if metadata is None:
                    metadata = (
                        data.materialization.metadata
                        if hasattr(data, "materialization")
                        else data.asset_observation.metadata
                    )
                for key, value in metadata.items():
                    raw = value.value if hasattr(value, "value") else value
                    for number in floats_in(raw):
                        checked[event.event_type.value] = checked.get(event.event_type.value, 0) + 1
                        if not is_displayed(number):
                            unrounded.append(f"{event.event_type.value} {key}={number!r}")
    assert not unrounded, unrounded[:10]
    # Each kind of metadata carried floats, so the assertion above looked at something.
    assert checked.get("ASSET_MATERIALIZATION", 0) > 10
    assert checked.get("ASSET_CHECK_EVALUATION", 0) > 10
    frame = WarehouseResource(url=url).read_partition_frame(SLICE_METRICS_TABLE, days[-1])
    means = [float(v) for v in frame["mean_f1"].dropna()]
    assert any(not is_displayed(value) for value in means), "the table should keep full precision"


@pytest.mark.parametrize("value", [0.1, 0.12345, 99.99999, 5e-7])
def test_rounding_is_idempotent(value: float) -> None:
    assert rounded(rounded(value)) == rounded(value)
