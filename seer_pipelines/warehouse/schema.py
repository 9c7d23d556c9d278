"""The tables Seer writes to the warehouse (SQLAlchemy), one place for every schema.

Every output table carries `partition_date`; a partition is replaced as a whole (see
`writer.PartitionWriter`). Each table has a `__staging` twin where a run stages its rows
chunk by chunk before the single swap transaction; every writer's rows carry its own
`staging_run` id, so runs of the same day never touch each other's rows. The judgment
cache tables belong to `seer_metrics.judgment_store` (the pure package cannot import this one).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sqlalchemy as sa

from seer_metrics.scoring import METRICS
from seer_metrics.slices import COUNT_COLUMNS, SLICE_COLUMNS

JUDGMENTS_TABLE = "seer_judgments"
EVENT_METRICS_TABLE = "seer_event_metrics"
PASSAGE_JUDGMENTS_TABLE = "seer_passage_judgments"
SLICE_METRICS_TABLE = "seer_slice_metrics"
DAY_STRATA_TABLE = "seer_day_strata"  # a sampled day's strata, counted in the warehouse

STAGING_SUFFIX = "__staging"
STAGING_RUN_COLUMN = "staging_run"
STAGING_SEQUENCE_COLUMN = "staging_seq"
STAGING_TIME_COLUMN = "staging_at"  # when the writer staged the row (finds stale runs)

# 64-bit: a day's tokens pass 2^31 at about a million events (`integer out of range`).
TOKENS = sa.BigInteger

# Columns shared by the event-level tables: usage of the model calls made for the event
# by the materialization that wrote the row (zero when the judgment came from the cache).
_USAGE_COLUMNS = (
    ("cache_hit", sa.Boolean, "judgment re-used from the cache, no model call"),
    ("model_calls", sa.Integer, "model calls made for this event by this materialization"),
    ("prompt_tokens", TOKENS, "prompt tokens spent on this event by this materialization"),
    ("completion_tokens", TOKENS, "completion tokens spent by this materialization"),
    ("cost_usd", sa.Float, "estimated cost in USD from the evaluator's price table"),
)

_STRATUM_DOC = (
    "sampling stratum: the event's values of the slice keys (env=prod|feature_flag=v2); "
    "NULL for invalid rows"
)

_JUDGMENT_COLUMNS = (
    ("partition_date", sa.Date, "UTC day of event_ts (the Dagster partition)"),
    ("event_id", sa.Text, "event id from the source, or a stable hash of the row"),
    ("event_ts", sa.DateTime(timezone=True), "when the retrieval happened (UTC)"),
    (
        "status",
        sa.String(16),
        "ok, invalid (bad row), error (evaluator failed), not_sampled (outside the day's "
        "sample) or skipped_budget (the day's budget was spent first)",
    ),
    ("reason", sa.Text, "one-line reason for invalid and error rows (ok: usage_estimated)"),
    ("judgment_key", sa.String(64), "content hash of query, context, model and prompt version"),
    ("judgment", sa.JSON, "requirements with supporting passage ids (restricted to the context)"),
    ("ranked_context", sa.JSON, "[passage id, logged position] in ranked order"),
    ("has_ranking", sa.Boolean, "the context carried rank or score (nDCG defined)"),
    ("n", sa.Integer, "number of context passages"),
    ("duplicate_ids", sa.Integer, "passage ids renamed because they repeated"),
    ("metadata", sa.JSON, "the event's metadata object"),
    ("stratum", sa.Text, _STRATUM_DOC),
    *_USAGE_COLUMNS,
    ("evaluator", sa.String(64), "evaluator name"),
    ("model", sa.String(255), "evaluator model"),
    ("prompt_version", sa.String(64), "evaluator prompt version"),
)

_EVENT_METRIC_COLUMNS = (
    ("partition_date", sa.Date, "UTC day of event_ts (the Dagster partition)"),
    ("event_id", sa.Text, "event id from the source, or a stable hash of the row"),
    ("event_ts", sa.DateTime(timezone=True), "when the retrieval happened (UTC)"),
    (
        "status",
        sa.String(16),
        "ok, invalid, error, not_sampled or skipped_budget; only ok rows have metrics",
    ),
    ("reason", sa.Text, "one-line reason for invalid and error rows"),
    ("recall", sa.Float, "supported requirements / K; NULL when K = 0"),
    ("precision", sa.Float, "cited passages / N; NULL when N = 0"),
    ("f1", sa.Float, "harmonic mean of precision and recall; NULL when either is"),
    ("ndcg", sa.Float, "nDCG of cited passages; NULL without rank/score or citations"),
    ("k", sa.Integer, "number of requirements"),
    ("n", sa.Integer, "number of context passages"),
    ("cited_ids", sa.JSON, "cited passage ids in ranked order"),
    ("missing_requirements", sa.JSON, "texts of requirements no passage supports"),
    ("hallucinated_citations", sa.Integer, "citations of ids outside the context, dropped"),
    ("unverified_citations", sa.Integer, "citations whose quote was not found, dropped"),
    ("metadata", sa.JSON, "the event's metadata object"),
    ("stratum", sa.Text, _STRATUM_DOC),
    *_USAGE_COLUMNS,
)

_PASSAGE_COLUMNS = (
    ("partition_date", sa.Date, "UTC day of event_ts (the Dagster partition)"),
    ("event_id", sa.Text, "event the passage was retrieved for"),
    ("position", sa.Integer, "1-based ranked position"),
    ("logged_position", sa.Integer, "1-based position in the context as logged"),
    ("passage_id", sa.Text, "passage id (or its logged position when it had none)"),
    ("cited", sa.Boolean, "at least one requirement is supported by this passage"),
    ("supported_requirements", sa.JSON, "ids of the requirements this passage supports"),
)

_DAY_STRATA_COLUMNS = (
    ("partition_date", sa.Date, "UTC day of event_ts (the Dagster partition)"),
    ("stratum", sa.Text, "the slice keys' values (env=prod|feature_flag=v2)"),
    ("slice_values", sa.JSON, "the stratum's value of each slice key (null: none)"),
    ("population", sa.Integer, "distinct events of the stratum on the day (invalid included)"),
    ("duplicates", sa.Integer, "source rows dropped because their event_id repeated"),
    ("sampled", sa.Integer, "events chosen, read and stored in the event-level tables"),
)

_SLICE_INTEGER_PREFIXES = (*COUNT_COLUMNS, "count_")
_SLICE_DESCRIPTIONS = {
    "partition_date": "UTC day (the Dagster partition)",
    "slice": "'all', key=value of one metadata key, or of two joined by a comma "
    "(env=prod,feature_flag=retrieval-v2); a backslash escapes \\ , = in keys and \\ , "
    "in values (tenant=acme\\,env=prod)",
    "slice_key": "metadata key of the slice, two joined by a comma for a pair, each with "
    "\\ and , escaped ('all' for the whole day)",
    "slice_value": "metadata value of the slice, two joined by a comma for a pair, each "
    "with \\ and , escaped ('all' for the whole day)",
    "events": "ingested events (the slice's population)",
    "evaluated": "events with status ok: the judged sample on a sampled day",
    "not_sampled": "events outside the day's sample (not judged)",
    "skipped_budget": "events not judged because the day's budget was spent",
    "invalid": "rows that could not be parsed as an event (status invalid, with a reason)",
    "errors": "events the evaluator failed on (status error)",
    **{
        f"std_{m}": f"standard deviation of {m} over judged events with a defined value "
        "(weighted by the sample when sampled)"
        for m in METRICS
    },
    "share_recall_below_1": "share of judged events with recall < 1: some requirement "
    "has no supporting passage (estimated from the sample when sampled)",
    "share_precision_below_bloat": "share of judged events with precision below the bloat "
    "line (SEER_BLOAT_LINE): context bloat (estimated from the sample when sampled)",
    "p10_recall": "10th percentile of recall over judged events (weighted when sampled)",
    "p10_precision": "10th percentile of precision over judged events (weighted when sampled)",
    "mean_k": "mean number of requirements K the evaluator listed per judged event",
    "mean_n": "mean context size: passages an event (estimated from the sample when sampled)",
    "std_n": "standard deviation of the context size over judged events",
    "count_n": "judged events with a known context size",
    "se_n": "standard error of mean_n from the sampling (0 when every event is judged)",
    "share_empty_context": "share of judged events whose context was empty (the retriever "
    "returned nothing: time-outs, a wrong index)",
    "se_share_empty_context": "standard error of share_empty_context from the sampling",
    "attempted": "events Seer read and tried to judge: evaluated + invalid + errors",
    "share_failed": "share of attempted events without a score: (invalid + errors) / attempted",
    "judge": "evaluator:model:prompt_version that judged most of the day's events; a day "
    "judged by another judge starts a new baseline",
    "prompt_tokens": "prompt tokens spent on the slice's events by the run that judged them "
    "(0 for cache hits)",
    "completion_tokens": "completion tokens spent on the slice's events by the run that "
    "judged them (0 for cache hits)",
    "cost_usd": "estimated cost in USD of judging the slice's events (0 for cache hits)",
    **{
        f"mean_{m}": f"mean {m} over defined values (estimated from the sample when sampled)"
        for m in METRICS
    },
    **{f"count_{m}": f"judged events with a defined {m}" for m in METRICS},
    **{
        f"se_{m}": f"standard error of mean_{m} from the sampling (0 when every event is judged)"
        for m in METRICS
    },
    "se_share_recall_below_1": "standard error of share_recall_below_1 from the sampling",
    "se_share_precision_below_bloat": "standard error of share_precision_below_bloat from "
    "the sampling",
}


def _slice_column_type(name: str) -> sa.types.TypeEngine:
    if name == "partition_date":
        return sa.Date()
    if name in ("slice", "slice_key", "slice_value", "judge"):
        return sa.Text()
    if name in ("prompt_tokens", "completion_tokens"):
        return TOKENS()
    if name.startswith(_SLICE_INTEGER_PREFIXES) or name == "attempted":
        return sa.Integer()
    return sa.Float()


_SLICE_METRIC_COLUMNS = tuple(
    (name, _slice_column_type(name), _SLICE_DESCRIPTIONS.get(name, "")) for name in SLICE_COLUMNS
)

TABLE_COLUMNS: dict[str, tuple[tuple[str, object, str], ...]] = {
    JUDGMENTS_TABLE: _JUDGMENT_COLUMNS,
    EVENT_METRICS_TABLE: _EVENT_METRIC_COLUMNS,
    PASSAGE_JUDGMENTS_TABLE: _PASSAGE_COLUMNS,
    SLICE_METRICS_TABLE: _SLICE_METRIC_COLUMNS,
    DAY_STRATA_TABLE: _DAY_STRATA_COLUMNS,
}

# The natural key of each table: the swap keeps the first staged row per key.
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    JUDGMENTS_TABLE: ("event_id",),
    EVENT_METRICS_TABLE: ("event_id",),
    PASSAGE_JUDGMENTS_TABLE: ("event_id", "position"),
    SLICE_METRICS_TABLE: ("slice",),
    DAY_STRATA_TABLE: ("stratum",),
}


@dataclass(frozen=True)
class OutputTables:
    """SQLAlchemy tables (and their staging twins) in one warehouse schema."""

    metadata: sa.MetaData
    tables: dict[str, sa.Table]
    staging: dict[str, sa.Table]

    def __getitem__(self, name: str) -> sa.Table:
        return self.tables[name]


def _column_type(spec: object) -> sa.types.TypeEngine:
    return spec() if isinstance(spec, type) else spec  # type: ignore[return-value]


@lru_cache(maxsize=32)
def output_tables(schema: str | None) -> OutputTables:
    """The output tables in `schema` (None = the connection's default schema)."""
    metadata = sa.MetaData(schema=schema)
    tables: dict[str, sa.Table] = {}
    staging: dict[str, sa.Table] = {}
    for name, columns in TABLE_COLUMNS.items():
        tables[name] = sa.Table(
            name,
            metadata,
            *(
                sa.Column(col, _column_type(spec), comment=doc or None)
                for col, spec, doc in columns
            ),
            # No unique index on the key: ids and slice values are unbounded text, and a
            # btree entry is limited (~2,700 bytes on PostgreSQL). `PartitionWriter`
            # keeps one row per key and checks the count when it swaps a partition in.
            sa.Index(f"ix_{name}_partition_date", "partition_date"),
        )
        staging[name] = sa.Table(
            name + STAGING_SUFFIX,
            metadata,
            sa.Column(
                STAGING_RUN_COLUMN,
                sa.String(64),
                nullable=False,
                index=True,
                comment="id of the writer (run) that staged the row",
            ),
            sa.Column(
                STAGING_SEQUENCE_COLUMN,
                sa.Integer,
                nullable=False,
                comment="order in which the writer staged the row (the first per key is kept)",
            ),
            sa.Column(
                STAGING_TIME_COLUMN,
                sa.DateTime(timezone=True),
                comment="when the writer staged the row (finds stale runs)",
            ),
            *(
                sa.Column(col, _column_type(spec), comment=doc or None)
                for col, spec, doc in columns
            ),
        )
    return OutputTables(metadata, tables, staging)


# Alerting tables: the outbox of Slack messages, the day-by-day verdicts of every rule on
# every slice, and the incidents derived from them (see docs/alerts.md).
ALERTS_TABLE = "seer_alerts"
VERDICTS_TABLE = "seer_check_verdicts"
INCIDENTS_TABLE = "seer_incidents"


@lru_cache(maxsize=16)
def alerts_table(schema: str | None = None) -> sa.Table:
    """The outbox: one row per (partition day, kind, rule, slice) to post, or posted."""
    return sa.Table(
        ALERTS_TABLE,
        sa.MetaData(schema=schema),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True, comment="row id"),
        sa.Column("partition_date", sa.Date, nullable=False, comment="the day alerted on"),
        sa.Column("kind", sa.String(32), nullable=False, comment="check, recovered, ..."),
        sa.Column("rule", sa.String(128), nullable=False, comment="rule (check) name"),
        sa.Column("slice", sa.Text, nullable=False, comment="slice label, or the run id"),
        sa.Column("severity", sa.String(8), nullable=False, comment="WARN or ERROR"),
        sa.Column("state", sa.String(16), nullable=False, comment="pending, sent, carried, ..."),
        sa.Column(
            "fingerprint",
            sa.String(64),
            nullable=False,
            comment="hash of the verdict: a re-run re-posts only when it changes",
        ),
        sa.Column("payload", sa.JSON, nullable=False, comment="what the message says"),
        sa.Column("run_id", sa.String(64), comment="Dagster run that recorded the row"),
        sa.Column("attempts", sa.Integer, nullable=False, default=0, comment="delivery attempts"),
        sa.Column("last_error", sa.Text, comment="error of the last failed delivery"),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), comment="retry not before this"),
        sa.Column("delivered_to", sa.String(255), comment="Slack channel, or console"),
        sa.Column("slack_ts", sa.String(64), comment="first Slack message carrying the row"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, comment="recorded"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, comment="last changed"),
        sa.Column("sent_at", sa.DateTime(timezone=True), comment="delivered"),
        sa.UniqueConstraint("partition_date", "kind", "rule", "slice", name="uq_seer_alerts_key"),
    )


@lru_cache(maxsize=16)
def verdicts_table(schema: str | None = None) -> sa.Table:
    """The verdict of each rule on each slice and day: the day sequence incidents follow."""
    return sa.Table(
        VERDICTS_TABLE,
        sa.MetaData(schema=schema),
        sa.Column("partition_date", sa.Date, nullable=False, comment="the day checked"),
        sa.Column("rule", sa.String(128), nullable=False, comment="rule (check) name"),
        sa.Column("slice", sa.Text, nullable=False, comment="slice label"),
        sa.Column("rule_kind", sa.String(16), nullable=False, comment="threshold or drop"),
        sa.Column("status", sa.String(16), nullable=False, comment="fail, pass or inconclusive"),
        sa.Column("severity", sa.String(8), nullable=False, comment="WARN or ERROR"),
        sa.Column("message", sa.Text, nullable=False, comment="the outcome, as the check says it"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, comment="last written"),
        sa.Column(
            "figures",
            sa.JSON,
            comment="observed, baseline, noise, escalation step and worse direction of the "
            "outcome (what an incident's escalation and recovery are measured with)",
        ),
        sa.Index(f"ix_{VERDICTS_TABLE}_rule_day", "rule", "partition_date"),
    )


@lru_cache(maxsize=16)
def incidents_table(schema: str | None = None) -> sa.Table:
    """Runs of failing days of a rule on a slice, closed by enough clear passes after them."""
    return sa.Table(
        INCIDENTS_TABLE,
        sa.MetaData(schema=schema),
        sa.Column("rule", sa.String(128), nullable=False, comment="rule (check) name"),
        sa.Column("slice", sa.Text, nullable=False, comment="slice label"),
        sa.Column("rule_kind", sa.String(16), nullable=False, comment="threshold or drop"),
        sa.Column("severity", sa.String(8), nullable=False, comment="WARN or ERROR"),
        sa.Column("opened_on", sa.Date, nullable=False, comment="first failing day"),
        sa.Column("last_failed_on", sa.Date, nullable=False, comment="latest failing day"),
        sa.Column("closed_on", sa.Date, comment="the pass that closed it; NULL: open"),
        sa.Column("failed_days", sa.Integer, nullable=False, comment="failing days in the run"),
        sa.Column(
            "last_message", sa.Text, nullable=False, comment="the latest failing day's outcome"
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, comment="last written"),
        sa.Index(f"ix_{INCIDENTS_TABLE}_rule_opened", "rule", "opened_on"),
    )


# Batch mode of the LLM judge: every batch a day submitted, so any later run or the batch
# sensor picks it up again instead of paying twice (see docs/llm-evaluator.md).
BATCHES_TABLE = "seer_batches"


@lru_cache(maxsize=16)
def batches_table(schema: str | None = None) -> sa.Table:
    """One row per submitted batch: its day, phase, provider status and line counts."""
    return sa.Table(
        BATCHES_TABLE,
        sa.MetaData(schema=schema),
        sa.Column("batch_id", sa.String(128), primary_key=True, comment="the provider's id"),
        sa.Column("partition_date", sa.Date, nullable=False, comment="the day it judges"),
        sa.Column("phase", sa.String(16), nullable=False, comment="requirements or support"),
        sa.Column("round", sa.Integer, nullable=False, comment="1 for a resubmission"),
        sa.Column("state", sa.String(16), nullable=False, comment="the provider's status"),
        sa.Column("collected", sa.Boolean, nullable=False, comment="answers read into the cache"),
        sa.Column("input_file_id", sa.String(128), comment="uploaded request file"),
        sa.Column("requests", sa.Integer, nullable=False, comment="lines submitted"),
        sa.Column("completed", sa.Integer, nullable=False, comment="lines answered"),
        sa.Column("failed", sa.Integer, nullable=False, comment="lines in the error file"),
        sa.Column("stored", sa.Integer, nullable=False, comment="answers that validated"),
        sa.Column("reasons", sa.JSON, nullable=False, comment="lines not stored, by reason"),
        sa.Column("prompt_tokens", TOKENS, nullable=False, comment="prompt tokens used"),
        sa.Column("completion_tokens", TOKENS, nullable=False, comment="completion tokens used"),
        sa.Column("cost_usd", sa.Float, nullable=False, comment="at the batch price"),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False, comment="submitted"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, comment="last polled"),
        sa.Index(f"ix_{BATCHES_TABLE}_day", "partition_date"),
    )


# Budgets: when a day was first judged under a cap, so every later run of the day reads the
# cache as it was then and draws the budget line at the same event (see judging/budget_days.py).
BUDGET_DAYS_TABLE = "seer_budget_days"


@lru_cache(maxsize=16)
def budget_days_table(schema: str | None = None) -> sa.Table:
    """One row per day judged on-demand under a budget: when its first run started."""
    return sa.Table(
        BUDGET_DAYS_TABLE,
        sa.MetaData(schema=schema),
        sa.Column("partition_date", sa.Date, primary_key=True, comment="the day judged"),
        sa.Column(
            "first_judged_at",
            sa.DateTime(timezone=True),
            nullable=False,
            comment="when the day's first budgeted run started judging",
        ),
    )
