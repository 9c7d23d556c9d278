"""Every column of every Seer table is described, and each asset shows its table's columns."""

from __future__ import annotations

import sqlalchemy as sa
from dagster import AssetKey, TableSchema

from seer_pipelines.definitions import defs
from seer_pipelines.defs.assets.table_schemas import table_schema
from seer_pipelines.warehouse import schema
from seer_pipelines.warehouse.schema import (
    EVENT_METRICS_TABLE,
    JUDGMENTS_TABLE,
    PASSAGE_JUDGMENTS_TABLE,
    SLICE_METRICS_TABLE,
    TABLE_COLUMNS,
)

ASSET_TABLES = {
    "event_judgments": JUDGMENTS_TABLE,
    "event_metrics": EVENT_METRICS_TABLE,
    "passage_judgments": PASSAGE_JUDGMENTS_TABLE,
    "slice_metrics": SLICE_METRICS_TABLE,
}


def every_schema_table() -> list[sa.Table]:
    """Every table `warehouse/schema.py` defines: each builder returning tables is called,
    so a table added there is covered without touching this test."""
    tables: list[sa.Table] = []
    for value in list(vars(schema).values()):
        function = getattr(value, "__wrapped__", value)
        if not callable(function) or getattr(function, "__module__", "") != schema.__name__:
            continue
        returns = getattr(function, "__annotations__", {}).get("return")
        if returns == "sa.Table":
            tables.append(value(None))
        elif returns == "OutputTables":
            built = value(None)
            tables.extend([*built.tables.values(), *built.staging.values()])
    return tables


def test_the_schema_module_defines_the_known_tables() -> None:
    names = {table.name for table in every_schema_table()}
    assert set(TABLE_COLUMNS) <= names
    assert {"seer_alerts", "seer_check_verdicts", "seer_incidents", "seer_batches"} <= names
    assert "seer_slice_metrics__staging" in names


def test_every_column_of_every_table_has_a_description() -> None:
    """A column added to any table without a description fails here."""
    undocumented = [
        f"{table.name}.{column.name}"
        for table in every_schema_table()
        for column in table.columns
        if not (column.comment or "").strip()
    ]
    assert not undocumented, f"columns without a description: {undocumented}"


def test_every_output_table_column_has_a_description_in_the_mapping() -> None:
    for name, columns in TABLE_COLUMNS.items():
        missing = [column for column, _, doc in columns if not doc.strip()]
        assert not missing, f"{name}: {missing}"


def test_each_asset_carries_its_tables_full_schema() -> None:
    graph = defs.resolve_asset_graph()
    for asset_name, table in ASSET_TABLES.items():
        metadata = graph.get(AssetKey(asset_name)).metadata
        shown = metadata["dagster/column_schema"]
        shown = shown.schema if hasattr(shown, "schema") else shown
        assert isinstance(shown, TableSchema)
        assert [c.name for c in shown.columns] == [c for c, _, _ in TABLE_COLUMNS[table]]
        assert all(c.description for c in shown.columns), asset_name
        assert metadata["dagster/table_name"] == table
    source = graph.get(AssetKey("retrieval_events")).metadata["dagster/column_schema"]
    source = source.schema if hasattr(source, "schema") else source
    assert all(c.description for c in source.columns)


def test_slice_metrics_describes_all_its_columns() -> None:
    """The column view of slice_metrics: every aggregate, the sampling errors included."""
    columns = {c.name: c for c in table_schema(SLICE_METRICS_TABLE).columns}
    assert len(columns) == len(TABLE_COLUMNS[SLICE_METRICS_TABLE])
    assert "bloat line" in columns["share_precision_below_bloat"].description
    assert columns["se_f1"].type == "float"
    assert columns["events"].type == "integer"
