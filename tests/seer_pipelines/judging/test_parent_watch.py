"""A judging step whose launcher died stops instead of calling the judge for nobody."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from seer_pipelines.judging.parent_watch import OrphanedStepError, while_parent_lives

# The launcher starts the step and prints its pid; the step waits on long "judge calls"
# under the watch and records how it ended.
STEP = """
import asyncio, sys
from seer_pipelines.judging.parent_watch import OrphanedStepError, while_parent_lives
async def judge():
    await asyncio.sleep(120)
    return "finished"
try:
    asyncio.run(while_parent_lives(judge(), poll_seconds=0.2))
    open(sys.argv[1], "w").write("finished")
except OrphanedStepError as error:
    open(sys.argv[1], "w").write("orphaned: " + str(error))
"""
LAUNCHER = """
import subprocess, sys, time
step = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(step.pid, flush=True)
time.sleep(120)
"""


def test_work_finishes_normally_while_the_parent_lives():
    async def work():
        await asyncio.sleep(0.05)
        return 42

    assert asyncio.run(while_parent_lives(work(), poll_seconds=0.01)) == 42


def test_a_changed_parent_cancels_the_work():
    cancelled = []

    async def work():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main():
        with pytest.raises(OrphanedStepError, match="gone"):
            await while_parent_lives(work(), poll_seconds=0.01, parent=os.getppid() + 1)
        await asyncio.sleep(0)

    asyncio.run(main())
    assert cancelled == [True]


def test_killed_launcher_ends_the_step(tmp_path):
    outcome = tmp_path / "outcome.txt"
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, STEP, str(outcome)], stdout=subprocess.PIPE, text=True
    )
    try:
        step_pid = int(launcher.stdout.readline())
        time.sleep(1.0)  # the step is waiting on its "judge calls"
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)
        deadline = time.monotonic() + 20
        while not outcome.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert outcome.exists(), "the orphaned step kept running"
        assert outcome.read_text().startswith("orphaned: ")
    finally:
        launcher.kill()
        with contextlib.suppress(ProcessLookupError, UnboundLocalError):
            os.kill(step_pid, signal.SIGKILL)
