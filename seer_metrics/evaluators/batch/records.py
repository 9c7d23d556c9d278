"""What is kept of each submitted batch, so any later run can pick it up again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

REQUIREMENTS_PHASE = "requirements"
SUPPORT_PHASE = "support"
PHASES = (REQUIREMENTS_PHASE, SUPPORT_PHASE)
ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
# The provider's limits per batch: 50,000 requests and a 200 MB input file.
MAX_REQUESTS_PER_BATCH = 50_000
MAX_FILE_BYTES = 190 * 1024 * 1024
# Statuses after which a batch never changes again.
FINISHED_STATUSES = frozenset({"completed", "expired", "cancelled", "failed"})


class BatchNotFinishedError(RuntimeError):
    """`collect` was asked for a batch that is still running."""


@dataclass(frozen=True)
class BatchRecord:
    """One submitted batch as the warehouse keeps it: enough to pick it up again.

    `completed` / `failed` are the provider's line counts; `stored` the replies that passed
    validation and went into the cache; `reasons` the lines not stored, by reason code
    (lines that did not run, failed, were refused, or did not fit the schema). `round` is
    0 for a phase's first submission and 1 for its resubmission after an expiry.
    """

    batch_id: str
    phase: str
    status: str
    requests: int
    round: int = 0
    input_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    stored: int = 0
    collected: bool = False
    reasons: Mapping[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES


@dataclass(frozen=True)
class BatchCollection:
    """A collected batch: its updated record and the reason of every line not stored."""

    record: BatchRecord
    failures: Mapping[str, str]


def record_of(batch: Any, phase: str, requests: int, round: int) -> BatchRecord:
    """The record of a batch the provider just returned (an `openai.types.Batch`)."""
    return updated_record(
        BatchRecord(
            batch_id=batch.id,
            phase=phase,
            status=batch.status,
            requests=requests,
            round=round,
            input_file_id=batch.input_file_id,
        ),
        batch,
    )


def updated_record(record: BatchRecord, batch: Any) -> BatchRecord:
    """`record` with the batch's current status and line counts."""
    counts = batch.request_counts
    return replace(
        record,
        status=str(batch.status),
        input_file_id=batch.input_file_id or record.input_file_id,
        completed=int(counts.completed) if counts else record.completed,
        failed=int(counts.failed) if counts else record.failed,
    )
