"""`advance`: a day's batch judging moved on as far as it can go now, never waiting."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from seer_metrics.evaluators.batch.judge import BatchJudge
from seer_metrics.evaluators.batch.records import PHASES, BatchRecord
from seer_metrics.events import RetrievalEvent


@dataclass(frozen=True)
class BatchProgress:
    """Where a day stands after `advance`: every batch of it, and what this call did."""

    records: tuple[BatchRecord, ...]
    submitted: tuple[BatchRecord, ...] = ()
    collected: tuple[BatchRecord, ...] = ()

    @property
    def waiting(self) -> bool:
        """Some batch is still running: come back later."""
        return any(not record.finished for record in self.records)

    @property
    def ready(self) -> bool:
        """Every batch is finished and collected: judge the rest on demand now."""
        return all(record.finished and record.collected for record in self.records)

    def summary(self) -> str:
        """One line for logs and asset metadata."""
        running = [r for r in self.records if not r.finished]
        if running:
            states = Counter(f"{r.phase} {r.status}" for r in running)
            listed = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
            return f"waiting for {len(running)} batch(es): {listed}"
        failed = sum(sum(r.reasons.values()) for r in self.records)
        return (
            f"{len(self.records)} batch(es) collected, {sum(r.stored for r in self.records)} "
            f"replies stored, {failed} lines left to judge on demand"
        )


def collect_finished(
    judge: BatchJudge, events: Sequence[RetrievalEvent], records: Sequence[BatchRecord]
) -> tuple[list[BatchRecord], list[BatchRecord]]:
    """(every record, refreshed; the ones collected now): the batches that have finished
    since the last look are read into the caches."""
    updated: list[BatchRecord] = []
    collected: list[BatchRecord] = []
    for record in records:
        if record.collected:
            updated.append(record)
            continue
        refreshed = judge.refresh(record)
        if refreshed.finished:
            refreshed = judge.collect(refreshed, events).record
            collected.append(refreshed)
        updated.append(refreshed)
    return updated, collected


def advance(
    judge: BatchJudge,
    events: Sequence[RetrievalEvent],
    records: Sequence[BatchRecord],
    *,
    label: str = "",
    max_resubmissions: int = 1,
    submit: Sequence[RetrievalEvent] | None = None,
) -> BatchProgress:
    """Move a day's batch judging on as far as it can go now, without waiting.

    Collects the batches that have finished; while any still runs, the day is waiting.
    Then, phase by phase: a phase never submitted is submitted (and the day waits for
    it); a phase whose latest round expired is submitted again for what is still
    unanswered, up to `max_resubmissions` times; otherwise what the phase could not
    answer is left to the on-demand judge. When nothing is left to submit, the day is
    ready: judge it on demand, where every batch answer is a cache hit.

    `submit` restricts what new batches ask for (e.g. the events a budget admits);
    finished batches are still read against all of `events`.
    """
    updated, collected = collect_finished(judge, events, records)
    if any(not record.finished for record in updated):
        return BatchProgress(tuple(updated), collected=tuple(collected))
    for phase in PHASES:
        phase_records = [record for record in updated if record.phase == phase]
        next_round = 0
        if phase_records:
            latest = max(record.round for record in phase_records)
            expired = any(r.status == "expired" for r in phase_records if r.round == latest)
            if not expired or latest >= max_resubmissions:
                continue
            next_round = latest + 1
        submitted = judge.submit(
            phase, events if submit is None else submit, label=label, round=next_round
        )
        if submitted:
            return BatchProgress(
                tuple(updated + submitted), submitted=tuple(submitted), collected=tuple(collected)
            )
    return BatchProgress(tuple(updated), collected=tuple(collected))
