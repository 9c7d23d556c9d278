"""The source: the warehouse table of retrieval events, written by the RAG system itself."""

from __future__ import annotations

from dagster import AssetSpec, TableColumn, TableSchema

from seer_pipelines.partitions import daily_partitions

GROUP_NAME = "seer"

retrieval_events = AssetSpec(
    key="retrieval_events",
    description=(
        "Retrieval events logged by the RAG system (external: Seer reads it, never writes it). "
        "Table and column names come from WarehouseResource (SEER_EVENTS_TABLE); a daily "
        "partition is the UTC day of event_ts."
    ),
    group_name=GROUP_NAME,
    partitions_def=daily_partitions,
    kinds={"sql"},
    metadata={
        "dagster/column_schema": TableSchema(
            columns=[
                TableColumn("event_id", "text", description="unique id (optional)"),
                TableColumn("event_ts", "timestamp", description="UTC; decides the day"),
                TableColumn("task", "text", description="the user query"),
                TableColumn("context", "json", description="string[] or {text, id?, ...}[]"),
                TableColumn("metadata", "json", description="env, feature_flag, tenant, ..."),
            ]
        ),
    },
)
