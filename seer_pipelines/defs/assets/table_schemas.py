"""Dagster column schemas of the output tables, shown in the UI's column view."""

from __future__ import annotations

import sqlalchemy as sa
from dagster import TableColumn, TableSchema

from seer_pipelines.warehouse.schema import TABLE_COLUMNS

_DAGSTER_TYPES = {
    sa.Date: "date",
    sa.DateTime: "timestamp",
    sa.Boolean: "boolean",
    sa.Integer: "integer",
    sa.Float: "float",
    sa.JSON: "json",
    sa.Text: "text",
    sa.String: "text",
}


def _dagster_type(spec: object) -> str:
    type_class = spec if isinstance(spec, type) else type(spec)
    for sql_type, name in _DAGSTER_TYPES.items():
        if issubclass(type_class, sql_type):
            return name
    return "text"


def table_schema(name: str) -> TableSchema:
    """The Dagster `TableSchema` of an output table."""
    return TableSchema(
        columns=[
            TableColumn(col, _dagster_type(spec), description=doc or None)
            for col, spec, doc in TABLE_COLUMNS[name]
        ]
    )


def table_metadata(name: str, partition_rows: int | None = None) -> dict[str, object]:
    """Dagster's standard table metadata keys: the UI shows the columns and row counts."""
    metadata: dict[str, object] = {
        "dagster/column_schema": table_schema(name),
        "dagster/table_name": name,
    }
    if partition_rows is not None:
        metadata["dagster/partition_row_count"] = int(partition_rows)
    return metadata
