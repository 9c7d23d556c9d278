"""Batch mode of the LLM judge: the same two phases through the OpenAI Batch API.

Why: a batch costs half the on-demand price and has its own rate limits, so a day of a
million events is judged without waiting on requests per minute. The price is time: a
batch answers within its 24 h window, and phase 2 needs phase 1's requirement lists, so a
day takes one window for the queries not yet in the requirement cache, then one for the
events (two windows at worst, usually much less).

The requests are the on-demand judge's, written as JSONL lines (`custom_id` =
phase + cache key, so repeated queries and repeated events are asked once), uploaded with
the Files API and submitted to `/v1/batches` with the 24 h window. Collecting a finished
batch downloads its output and error files and reads every reply with the on-demand
judge's code (`replies.read_reply`, `build_judgment`): the answers land in the same
requirement and judgment caches, so the day is then completed by the ordinary on-demand
path, where the batch's answers are cache hits and only what the batch could not answer
costs a call. Failed lines are therefore retried on demand, with the repair turn and
the larger cap the on-demand judge has; a phase whose batch expired is submitted once
more for the lines still unanswered; a cancelled batch's partial output is kept and the
rest judged on demand.

Nothing here waits for a batch: `advance` does what can be done now (collect finished
batches, submit the next phase) and says whether the day is waiting or ready, so a caller
never sits for hours. Each batch carries a digest of its requests in its metadata, and
`submit` re-uses a live batch with the same digest, so a run killed between creating a
batch and recording its id does not pay twice.
"""

from seer_metrics.evaluators.batch.judge import BatchJudge
from seer_metrics.evaluators.batch.progress import BatchProgress, advance, collect_finished
from seer_metrics.evaluators.batch.records import (
    PHASES,
    REQUIREMENTS_PHASE,
    SUPPORT_PHASE,
    BatchCollection,
    BatchNotFinishedError,
    BatchRecord,
)

__all__ = [
    "PHASES",
    "REQUIREMENTS_PHASE",
    "SUPPORT_PHASE",
    "BatchCollection",
    "BatchJudge",
    "BatchNotFinishedError",
    "BatchProgress",
    "BatchRecord",
    "advance",
    "collect_finished",
]
