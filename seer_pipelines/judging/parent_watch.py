"""Stop judging when the process that launched this step is gone.

A run worker or step process whose launcher was killed keeps running on its own: Dagster's
run monitoring marks the run failed, but with the default launcher nothing ends the orphan,
which would go on calling (and paying) the judge for a run nobody is watching. The judging
step therefore watches its parent: when it changes (the orphan is re-parented), the calls
in flight are cancelled and the step stops with a clear error. Judgments completed so far
are already in the cache, so the next run repays nothing of them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
DEFAULT_POLL_SECONDS = 1.0


class OrphanedStepError(RuntimeError):
    """The process that started this step has died; judging stops so nobody pays for it."""


async def while_parent_lives(
    work: Awaitable[T], poll_seconds: float = DEFAULT_POLL_SECONDS, parent: int | None = None
) -> T:
    """Await `work`, cancelling it if this process's parent changes meanwhile."""
    expected = os.getppid() if parent is None else parent
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_seconds)
            if done:
                return task.result()
            current = os.getppid()
            if current != expected:
                task.cancel()
                raise OrphanedStepError(
                    f"the process that started this step (pid {expected}) is gone (parent is "
                    f"now {current}); stopping so a dead run does not keep calling the judge. "
                    "Completed judgments are cached: re-run the partition to finish the day."
                )
    finally:
        if not task.done():
            task.cancel()
