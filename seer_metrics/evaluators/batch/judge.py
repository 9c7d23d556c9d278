"""`BatchJudge`: submits the judge's requests as batches and collects their answers."""

from __future__ import annotations

import hashlib
import io
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from seer_metrics.evaluators.base import TokenUsage
from seer_metrics.evaluators.batch.lines import (
    KEY_CHUNK,
    RequestLine,
    chunks,
    completion_of,
    custom_id,
    input_files,
    key_of,
    line_usage,
    parse_jsonl,
    pending_lines,
    request_estimates,
    unanswered_reason,
)
from seer_metrics.evaluators.batch.records import (
    COMPLETION_WINDOW,
    ENDPOINT,
    MAX_FILE_BYTES,
    MAX_REQUESTS_PER_BATCH,
    REQUIREMENTS_PHASE,
    SUPPORT_PHASE,
    BatchCollection,
    BatchNotFinishedError,
    BatchRecord,
    record_of,
    updated_record,
)
from seer_metrics.evaluators.llm import prompts
from seer_metrics.evaluators.llm.answers import RequirementsAnswer, SupportAnswer
from seer_metrics.evaluators.llm.citations import build_judgment
from seer_metrics.evaluators.llm.pacing import EXPECTED_COMPLETION_TOKENS
from seer_metrics.evaluators.llm.replies import (
    API_ERROR,
    ReplyError,
    read_reply,
    reason_code,
    requirements_check,
    requirements_from_answer,
)
from seer_metrics.evaluators.llm.settings import LLMSettings
from seer_metrics.evaluators.llm.structured_output import JSON_SCHEMA
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Requirement
from seer_metrics.judgment_store import (
    JudgmentRecord,
    JudgmentStore,
    RequirementsRecord,
    judgment_key,
    requirements_key,
)
from seer_metrics.spend.cost_estimate import BATCH_PRICE_FACTOR

logger = logging.getLogger(__name__)

# How far back `submit` looks for a batch it may already have created (a killed run).
LOOKBACK_SECONDS = 3 * 24 * 3600

if TYPE_CHECKING:  # imported where used: the SDK takes ~0.5 s, every step process pays it
    import openai
    from openai.types.chat import ChatCompletion


class BatchJudge:
    """Writes, submits and collects the judge's batches; answers go to `store`."""

    def __init__(
        self,
        settings: LLMSettings,
        store: JudgmentStore,
        *,
        client: openai.OpenAI | None = None,
        max_requests_per_batch: int = MAX_REQUESTS_PER_BATCH,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        if max_requests_per_batch < 1 or max_file_bytes < 1:
            raise ValueError("max_requests_per_batch and max_file_bytes must be >= 1")
        self.settings = settings
        self.store = store
        self.model = settings.model
        self.prompt_version = prompts.PROMPT_VERSION
        # The on-demand price of its model; a batch costs BATCH_PRICE_FACTOR of it.
        self.price = settings.price_for(settings.model)
        self.max_requests_per_batch = max_requests_per_batch
        self.max_file_bytes = max_file_bytes
        import openai

        self._client = client or openai.OpenAI(
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
        )

    def requests(self, phase: str, events: Iterable[RetrievalEvent]) -> Iterator[RequestLine]:
        """The requests `phase` still needs for `events` (see `lines.pending_lines`)."""
        return pending_lines(phase, events, self.store, self.settings, self.prompt_version)

    # --- submitting ---------------------------------------------------------------------------

    def submit(
        self,
        phase: str,
        events: Iterable[RetrievalEvent],
        *,
        label: str = "",
        round: int = 0,
    ) -> list[BatchRecord]:
        """Submit what `phase` still needs, in as many batches as the provider's limits
        require; [] when nothing is needed. `label` (e.g. the partition) goes into each
        batch's metadata, so it can be found in the provider's console."""
        records: list[BatchRecord] = []
        files = input_files(
            self.requests(phase, events), self.max_requests_per_batch, self.max_file_bytes
        )
        for lines in files:
            records.append(self._submit_file(phase, lines, label, round))
        return records

    def _submit_file(
        self, phase: str, requests: list[RequestLine], label: str, round: int
    ) -> BatchRecord:
        digest = hashlib.sha256(
            "\n".join([self.model, self.prompt_version, *(r.custom_id for r in requests)]).encode()
        ).hexdigest()
        existing = self._find_live_batch(digest)
        if existing is not None:
            logger.info("re-using batch %s, already submitted for these requests", existing.id)
            return record_of(existing, phase, len(requests), round)
        content = b"".join(request.line for request in requests)
        uploaded = self._client.files.create(
            file=(f"seer-{phase}-{digest[:12]}.jsonl", io.BytesIO(content)), purpose="batch"
        )
        metadata = {
            "seer_phase": phase,
            "seer_round": str(round),
            "seer_digest": digest,
            "seer_label": label[:500],
        }
        import openai

        try:
            batch = self._client.with_options(max_retries=0).batches.create(
                input_file_id=uploaded.id,
                endpoint=ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata=metadata,
            )
        except (openai.APIConnectionError, openai.InternalServerError):
            # The batch may exist even though the answer was lost: look before failing.
            found = self._find_live_batch(digest)
            if found is None:
                raise
            batch = found
        logger.info("submitted %s batch %s: %d requests", phase, batch.id, len(requests))
        return record_of(batch, phase, len(requests), round)

    def _find_live_batch(self, digest: str) -> Any | None:
        """A recent batch created for exactly these requests that can still answer."""
        oldest = time.time() - LOOKBACK_SECONDS
        for batch in self._client.batches.list(limit=100):
            if batch.created_at < oldest:
                return None
            metadata = batch.metadata or {}
            live = batch.status not in ("failed", "expired", "cancelled", "cancelling")
            if metadata.get("seer_digest") == digest and live:
                return batch
        return None

    # --- following and collecting -------------------------------------------------------------

    def refresh(self, record: BatchRecord) -> BatchRecord:
        """The record with the batch's current status and line counts."""
        return updated_record(record, self._client.batches.retrieve(record.batch_id))

    def cancel(self, record: BatchRecord) -> BatchRecord:
        """Ask the provider to stop the batch; collect it once it says `cancelled`."""
        if record.finished:
            return record
        return updated_record(record, self._client.batches.cancel(record.batch_id))

    def collect(self, record: BatchRecord, events: Sequence[RetrievalEvent]) -> BatchCollection:
        """Read a finished batch's output and error files into the caches.

        Every reply is validated exactly as an on-demand reply; the lines that did not
        run, failed, or did not validate are returned with their reasons (and counted by
        code in the record), to be judged on demand. `events` are the day's events the
        batch was written for. Collecting twice stores nothing twice.
        """
        batch = self._client.batches.retrieve(record.batch_id)
        record = updated_record(record, batch)
        if not record.finished:
            raise BatchNotFinishedError(
                f"batch {record.batch_id} is {record.status}; collect it once it has finished"
            )
        estimates = request_estimates(self._download(batch.input_file_id))
        requested = list(estimates)
        lines: dict[str, dict[str, Any]] = {}
        for file_id in (batch.error_file_id, batch.output_file_id):  # an output line wins
            if file_id:
                for line in self._download(file_id):
                    lines[str(line.get("custom_id"))] = line
        failures: dict[str, str] = {}
        completions: dict[str, ChatCompletion] = {}
        for line_id in requested:
            line = lines.get(line_id)
            if line is None:
                failures[line_id] = unanswered_reason(batch)
                continue
            completion, reason = completion_of(line)
            if completion is None:
                failures[line_id] = reason or f"{API_ERROR}: unreadable batch line"
            else:
                completions[line_id] = completion
        usage = TokenUsage()
        odd_usage: list[str] = []
        for line_id in completions:
            reported = line_usage(lines[line_id])
            if isinstance(reported, str):
                odd_usage.append(reported)
            if not isinstance(reported, tuple):  # none, or no count: the request's estimate
                guess = estimates[line_id]
                reported = (guess - EXPECTED_COMPLETION_TOKENS, EXPECTED_COMPLETION_TOKENS)
            usage += self._batch_usage(*reported)
        if odd_usage:
            logger.warning(
                "batch %s: %d replies reported a token count that is no count (e.g. %s); "
                "their tokens and cost are the requests' estimates",
                record.batch_id,
                len(odd_usage),
                odd_usage[0],
            )
        if record.phase == REQUIREMENTS_PHASE:
            stored = self._store_requirements(completions, events, failures)
        else:
            stored = self._store_judgments(completions, events, failures)
        reasons = Counter(reason_code(reason) for reason in failures.values())
        record = replace(
            record,
            collected=True,
            stored=stored,
            reasons=dict(sorted(reasons.items())),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
        )
        logger.info(
            "collected %s batch %s (%s): %d stored, %d to judge on demand",
            record.phase,
            record.batch_id,
            record.status,
            stored,
            len(failures),
        )
        return BatchCollection(record, failures)

    def _store_requirements(
        self,
        completions: Mapping[str, ChatCompletion],
        events: Sequence[RetrievalEvent],
        failures: dict[str, str],
    ) -> int:
        queries: dict[str, str] = {}
        for event in events:
            key = requirements_key(event.task, self.model, self.prompt_version)
            queries.setdefault(custom_id(REQUIREMENTS_PHASE, key), event.task)
        records: list[RequirementsRecord] = []
        # An empty or overlong list is a failed line, not stored (no judgment, no score).
        check = requirements_check(self.settings.max_requirements)
        for line_id, completion in completions.items():
            query = queries.get(line_id)
            if query is None:
                failures[line_id] = f"{API_ERROR}: no event of the day asks this query"
                continue
            try:
                answer = read_reply(completion, RequirementsAnswer, check)
            except ReplyError as error:
                failures[line_id] = error.reason
                continue
            key = key_of(REQUIREMENTS_PHASE, line_id)
            records.append(
                RequirementsRecord(
                    key, query, self.model, self.prompt_version, requirements_from_answer(answer)
                )
            )
        self.store.put_requirements(records)
        return len(records)

    def _store_judgments(
        self,
        completions: Mapping[str, ChatCompletion],
        events: Sequence[RetrievalEvent],
        failures: dict[str, str],
    ) -> int:
        wanted = {key_of(SUPPORT_PHASE, line_id) for line_id in completions}
        found: dict[str, tuple[RetrievalEvent, tuple[Requirement, ...]]] = {}
        for chunk in chunks(events, KEY_CHUNK):
            keys = [judgment_key(e, self.model, self.prompt_version) for e in chunk]
            mine = [(e, k) for e, k in zip(chunk, keys, strict=True) if k in wanted]
            if not mine:
                continue
            query_keys = {
                k: requirements_key(e.task, self.model, self.prompt_version) for e, k in mine
            }
            lists = self.store.get_requirements(query_keys.values())
            for event, key in mine:
                if key not in found and lists.get(query_keys[key]):
                    found[key] = (event, lists[query_keys[key]])
        records: list[JudgmentRecord] = []
        for line_id, completion in completions.items():
            key = key_of(SUPPORT_PHASE, line_id)
            if key not in found:
                failures[line_id] = f"{API_ERROR}: no event of the day has this content"
                continue
            event, requirements = found[key]
            try:
                answer = read_reply(completion, SupportAnswer)
            except ReplyError as error:
                failures[line_id] = error.reason
                continue
            # Batch lines are the on-demand requests in strict `json_schema` mode.
            judgment = replace(build_judgment(event, requirements, answer), output_mode=JSON_SCHEMA)
            records.append(
                JudgmentRecord(key, event.event_id, self.model, self.prompt_version, judgment)
            )
        self.store.put_judgments(records)
        return len(records)

    def _batch_usage(self, prompt_tokens: int, completion_tokens: int) -> TokenUsage:
        priced = self.settings.usage(prompt_tokens, completion_tokens)
        return TokenUsage(
            priced.prompt_tokens, priced.completion_tokens, priced.cost_usd * BATCH_PRICE_FACTOR
        )

    def _download(self, file_id: str) -> Iterator[dict[str, Any]]:
        return parse_jsonl(self._client.files.content(file_id).content, file_id)
