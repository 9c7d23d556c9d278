"""Metric assets: per event, per passage and per (day, slice), from `seer_judgments`.

The rows are built by `seer_metrics.rows` (scoring vectorised over each chunk of stored
judgments); nothing here calls a model, so these assets are cheap to re-run.
"""

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import pandas as pd
import sqlalchemy as sa
from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    BackfillPolicy,
    Config,
    DailyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)
from pydantic import Field

from seer_metrics.rows import JUDGMENT_READ_COLUMNS, event_metric_rows, passage_rows
from seer_metrics.rules import RulesConfig
from seer_metrics.scoring import METRICS
from seer_metrics.slices import JUDGE_COLUMNS, SliceAccumulator, judge_identity
from seer_metrics.slices.groups import DEFAULT_MAX_PAIR_SLICES, PairSliceBounds
from seer_metrics.totals import ScoreTotals
from seer_pipelines.defs.assets.events import GROUP_NAME
from seer_pipelines.defs.assets.judgments import EVENT_JUDGMENTS_KEY
from seer_pipelines.defs.assets.metadata_display import display_metadata, markdown_cell
from seer_pipelines.defs.assets.table_schemas import table_metadata
from seer_pipelines.defs.partitions import partition_day
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.judging.sampled_day import counted_strata
from seer_pipelines.judging.step_process import freeze_loaded_objects
from seer_pipelines.settings import Settings
from seer_pipelines.warehouse.engine import WarehouseConfigError
from seer_pipelines.warehouse.schema import (
    EVENT_METRICS_TABLE,
    JUDGMENTS_TABLE,
    PASSAGE_JUDGMENTS_TABLE,
    SLICE_METRICS_TABLE,
)
from seer_pipelines.warehouse.writer import plain_value

EVENT_METRICS_KEY = AssetKey("event_metrics")
PASSAGE_JUDGMENTS_KEY = AssetKey("passage_judgments")
SLICE_METRICS_KEY = AssetKey("slice_metrics")

# -- event metrics ---------------------------------------------------------------------


def totals_metadata(totals: ScoreTotals) -> dict[str, Any]:
    """Asset metadata of a day's totals; undefined means are left out rather than NaN."""
    metadata: dict[str, Any] = {
        "events": totals.events,
        "evaluated": totals.evaluated,
        "invalid": totals.invalid,
        "errors": totals.errors,
        "cache_hits": totals.cache_hits,
        "model_calls": totals.model_calls,
        "tokens": totals.tokens,
        "estimated_cost_usd": float(totals.cost_usd),
    }
    for metric, mean in totals.means().items():
        if mean is not None:
            metadata[f"mean_{metric}"] = float(mean)
    return metadata


def build_event_metrics(warehouse: WarehouseResource, day: date) -> tuple[ScoreTotals, int]:
    """Replace `day` in `seer_event_metrics`; returns the totals and the rows written."""
    totals = ScoreTotals()
    with warehouse.partition_writer(EVENT_METRICS_TABLE, day) as writer:
        chunks = warehouse.read_partition_records(JUDGMENTS_TABLE, day, JUDGMENT_READ_COLUMNS)
        for chunk in chunks:
            rows = event_metric_rows(chunk)
            totals.add_all(rows)
            writer.write(rows)
        written = writer.commit()
    return totals, written


def define_event_metrics(partitions: DailyPartitionsDefinition) -> AssetsDefinition:
    """`event_metrics` on `partitions`."""

    @asset(
        key=EVENT_METRICS_KEY,
        partitions_def=partitions,
        deps=[EVENT_JUDGMENTS_KEY],
        group_name=GROUP_NAME,
        kinds={"sql", "pandas"},
        backfill_policy=BackfillPolicy.multi_run(1),
        description=(
            "Every ingested event exactly once with its status and, when ok, recall, precision, "
            "f1 and ndcg (NULL where undefined), K, N, cited ids and missing requirements."
        ),
        metadata=table_metadata(EVENT_METRICS_TABLE),
    )
    def event_metrics(
        context: AssetExecutionContext, warehouse: WarehouseResource
    ) -> MaterializeResult:
        freeze_loaded_objects()
        day = partition_day(context.partition_key)
        totals, written = build_event_metrics(warehouse, day)
        context.log.info(
            f"{day}: {written} events scored ({totals.evaluated} ok, {totals.invalid} invalid, "
            f"{totals.errors} errors)"
        )
        return MaterializeResult(
            metadata=display_metadata(
                {
                    **totals_metadata(totals),
                    **table_metadata(EVENT_METRICS_TABLE, written),
                }
            )
        )

    return event_metrics


# -- passage judgments -----------------------------------------------------------------


def define_passage_judgments(partitions: DailyPartitionsDefinition) -> AssetsDefinition:
    """`passage_judgments` on `partitions`."""

    @asset(
        key=PASSAGE_JUDGMENTS_KEY,
        partitions_def=partitions,
        deps=[EVENT_JUDGMENTS_KEY],
        group_name=GROUP_NAME,
        kinds={"sql"},
        backfill_policy=BackfillPolicy.multi_run(1),
        description=(
            "The per-passage view: one row per (event, passage) of evaluated events, with its "
            "ranked position, whether it was cited and by which requirements."
        ),
        metadata=table_metadata(PASSAGE_JUDGMENTS_TABLE),
    )
    def passage_judgments(
        context: AssetExecutionContext, warehouse: WarehouseResource
    ) -> MaterializeResult:
        freeze_loaded_objects()
        day = partition_day(context.partition_key)
        cited = 0
        events = 0
        with warehouse.partition_writer(PASSAGE_JUDGMENTS_TABLE, day) as writer:
            columns = ("event_id", "status", "judgment", "ranked_context")
            for chunk in warehouse.read_partition_records(JUDGMENTS_TABLE, day, columns):
                rows = passage_rows(chunk)
                cited += sum(1 for row in rows if row["cited"])
                events += len({row["event_id"] for row in rows})
                writer.write(rows)
            written = writer.commit()
        context.log.info(f"{day}: {written} passages of {events} events, {cited} cited")
        return MaterializeResult(
            metadata=display_metadata(
                {
                    "passages": written,
                    "events": events,
                    "cited_passages": cited,
                    "share_cited": float(cited / written) if written else 0.0,
                    **table_metadata(PASSAGE_JUDGMENTS_TABLE, written),
                }
            )
        )

    return passage_judgments


# -- slice metrics ---------------------------------------------------------------------


@dataclass(frozen=True)
class SliceDefaults:
    """What `slice_metrics` uses where its run config says nothing: the slice keys and
    bloat line of the settings, and the rules' minimum sample for a pair slice."""

    slice_keys: tuple[str, ...]
    bloat_line: float
    pair_minimum_events: int

    @classmethod
    def of(cls, settings: Settings, rules: RulesConfig) -> "SliceDefaults":
        return cls(settings.slice_keys, settings.bloat_line, rules.minimum_sample)


class SliceMetricsConfig(Config):
    slice_keys: list[str] | None = Field(
        default=None,
        description="Metadata keys to slice by; default $SEER_SLICE_KEYS, else env,feature_flag.",
    )
    bloat_line: float | None = Field(
        default=None,
        description="Precision below this counts as context bloat; default $SEER_BLOAT_LINE "
        "or 0.35.",
    )
    pair_minimum_events: int | None = Field(
        default=None,
        ge=1,
        description="A pair slice (env=prod,feature_flag=retrieval-v2) needs this many "
        "events that day; default the rules' minimum_sample ($SEER_RULES_FILE, else 30).",
    )
    max_pair_slices: int = Field(
        default=DEFAULT_MAX_PAIR_SLICES,
        ge=0,
        description="At most this many pair slices a day, the largest first (0: none).",
    )

    def resolved_slice_keys(self, defaults: SliceDefaults) -> list[str]:
        keys = self.slice_keys if self.slice_keys is not None else list(defaults.slice_keys)
        bad = [key for key in keys if not isinstance(key, str) or not key.strip()]
        if bad:
            raise WarehouseConfigError(f"slice_keys must be non-empty strings, got {bad!r}")
        return list(dict.fromkeys(key.strip() for key in keys))

    def resolved_bloat_line(self, defaults: SliceDefaults) -> float:
        return self.bloat_line if self.bloat_line is not None else defaults.bloat_line

    def pair_bounds(self, defaults: SliceDefaults) -> PairSliceBounds:
        """The rules' minimum sample unless set: a smaller pair could never be judged."""
        minimum = self.pair_minimum_events
        return PairSliceBounds(
            defaults.pair_minimum_events if minimum is None else minimum, self.max_pair_slices
        )


_EVENT_METRIC_READ_COLUMNS = (
    "status",
    *METRICS,
    "k",
    "n",
    "metadata",
    "stratum",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
)


def compute_slice_frame(
    warehouse: WarehouseResource,
    day: date,
    slice_keys: Sequence[str],
    bloat_line: float,
    pair_bounds: PairSliceBounds | None = None,
) -> pd.DataFrame:
    """The day's per-slice aggregates, from `seer_event_metrics` read chunk by chunk.

    Only a few small codes per event are kept (`SliceAccumulator`, about 12 bytes an event)
    instead of whole rows with their metadata; with the transient arrays of one slice at a
    time the step's RSS grows by about 80 bytes an event (a million events: 78 MB). A
    sampled day's slices are estimated from its judged events, weighted by their `stratum`
    and the populations counted in the warehouse (`seer_day_strata`).
    """
    accumulator = SliceAccumulator(slice_keys, bloat_line, pair_bounds)
    for chunk in warehouse.read_partition(EVENT_METRICS_TABLE, day, _EVENT_METRIC_READ_COLUMNS):
        accumulator.add(chunk)
    accumulator.add_counted(counted_strata(warehouse, day, slice_keys))
    accumulator.count_judges(day_judges(warehouse, day))
    return accumulator.result(day)


def day_judges(warehouse: WarehouseResource, day: date) -> Counter[str]:
    """How many of the day's events each judge (`evaluator:model:prompt_version`) judged,
    counted in the warehouse (one grouped query over `seer_judgments`)."""
    table = warehouse.ensure_output_tables()[JUDGMENTS_TABLE]
    columns = [table.c[name] for name in JUDGE_COLUMNS]
    query = (
        sa.select(*columns, sa.func.count())
        .where(table.c.partition_date == day, table.c.status == "ok")
        .group_by(*columns)
    )
    judges: Counter[str] = Counter()
    with warehouse.get_engine().connect() as connection:
        for *parts, count in connection.execute(query):
            identity = judge_identity(parts)
            if identity is not None:
                judges[identity] += int(count)
    return judges


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as dicts with NaN turned into None (NULL) and numpy scalars unboxed."""
    return [
        {key: plain_value(value) for key, value in record.items()}
        for record in frame.to_dict("records")
    ]


def slice_metadata(frame: pd.DataFrame) -> dict[str, Any]:
    """Flat numeric keys per slice (`recall/env=prod`, `events/env=prod`) for UI plots."""
    metadata: dict[str, Any] = {}
    for record in frame_records(frame):
        label = record["slice"]
        metadata[f"events/{label}"] = int(record["events"])
        metadata[f"judged/{label}"] = int(record["evaluated"])
        for metric in METRICS:
            value = record.get(f"mean_{metric}")
            if value is not None:
                metadata[f"{metric}/{label}"] = float(value)
    return metadata


def slice_markdown(frame: pd.DataFrame) -> str:
    """A small markdown table of the slices, for the materialization page."""
    lines = [
        "| slice | events | judged | invalid | errors | recall | precision | f1 | ndcg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def fmt(record: dict[str, Any], metric: str) -> str:
        """The mean, and ± its sampling standard error when there is one."""
        value, error = record.get(f"mean_{metric}"), record.get(f"se_{metric}")
        if value is None:
            return "–"
        return f"{value:.3f} ± {error:.3f}" if error else f"{value:.3f}"

    for record in frame_records(frame):
        lines.append(
            f"| {markdown_cell(str(record['slice']))} | {record['events']} | "
            f"{record['evaluated']} | {record['invalid']} | {record['errors']} | "
            + " | ".join(fmt(record, metric) for metric in METRICS)
            + " |"
        )
    return "\n".join(lines)


def build_slice_metrics(
    warehouse: WarehouseResource,
    day: date,
    slice_keys: Iterable[str],
    bloat_line: float,
    pair_bounds: PairSliceBounds | None = None,
) -> tuple[pd.DataFrame, int]:
    """Replace `day` in `seer_slice_metrics`; returns the slice frame and rows written."""
    frame = compute_slice_frame(warehouse, day, list(slice_keys), bloat_line, pair_bounds)
    with warehouse.partition_writer(SLICE_METRICS_TABLE, day) as writer:
        writer.write(frame_records(frame))
        written = writer.commit()
    return frame, written


def define_slice_metrics(
    partitions: DailyPartitionsDefinition, defaults: SliceDefaults
) -> AssetsDefinition:
    """`slice_metrics` on `partitions`, slicing by `defaults` unless its run config says
    otherwise."""

    @asset(
        key=SLICE_METRICS_KEY,
        partitions_def=partitions,
        deps=[EVENT_METRICS_KEY],
        group_name=GROUP_NAME,
        kinds={"sql", "pandas"},
        # One partition per run: partitioned asset checks record one result per run, so a
        # range run would lose the per-day check results (see docs/pipelines.md).
        backfill_policy=BackfillPolicy.multi_run(1),
        description=(
            "Per (day, slice) aggregates: counts, mean/std/p10 of the metrics over defined "
            "values, share of events with recall < 1 and with precision below the bloat line, "
            "mean K, tokens and cost. On a sampled day: the population, the judged sample and "
            "estimates with their sampling standard errors (se_*). The slice checks run on "
            "this table."
        ),
        metadata=table_metadata(SLICE_METRICS_TABLE),
    )
    def slice_metrics(
        context: AssetExecutionContext, config: SliceMetricsConfig, warehouse: WarehouseResource
    ) -> MaterializeResult:
        freeze_loaded_objects()
        day = partition_day(context.partition_key)
        keys = config.resolved_slice_keys(defaults)
        frame, written = build_slice_metrics(
            warehouse, day, keys, config.resolved_bloat_line(defaults), config.pair_bounds(defaults)
        )
        context.log.info(f"{day}: {written} slices over keys {keys}")
        return MaterializeResult(
            metadata=display_metadata(
                {
                    "slices": written,
                    "slice_keys": ", ".join(keys),
                    "slice_table": MetadataValue.md(slice_markdown(frame)),
                    **slice_metadata(frame),
                    **table_metadata(SLICE_METRICS_TABLE, written),
                }
            )
        )

    return slice_metrics
