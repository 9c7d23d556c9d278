"""Throughput, rate-limit behaviour and call economy of the LLM judge, against the fake judge.

Prints each figure with its target (issue 3) and exits non-zero when one is missed:

  (a) 2,000 events, 250 ms model latency, concurrency 32: events/s at least 0.9 of the
      ceiling, the ceiling being concurrency / latency calls per second, with the phase-1
      calls counted (events/s ceiling = concurrency / latency * events / calls).
  (b) the server enforcing 600 requests/min over a rolling 60 s window: achieved request
      rate at least 0.95 of the limit with at most 1 % of requests answered 429. A shorter
      run than a real partition (75 s by default, `--rpm-seconds`) is enough: the first
      minute is where a naive client bursts and the rolling window starts to bite.
  (c) model calls per event: at most 2, and at most 1 + distinct queries / events.
  (d) the same run again through the judgment cache: zero model calls.

The fake server runs in a child process, as a real endpoint runs elsewhere: in the same
process its threads would compete with the client for the GIL and the figure would measure
the fake, not the judge. Counts come from the server (`GET /fake/stats`).

Run: `.venv/bin/python benchmarks/judge_throughput.py` (about two minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import multiprocessing
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from seer_metrics.evaluators.caching import CachingEvaluator
from seer_metrics.evaluators.llm import LLMEvaluator, LLMSettings
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment_store import JudgmentStore
from seer_testing.fake_judge import FakeJudgeServer, GoldOracle, GoldRequirement

TOPICS = ["river", "castle", "novel", "symphony", "bridge", "comet", "painting", "treaty"]


def synthetic_workload(
    events: int, distinct_queries: int
) -> tuple[list[RetrievalEvent], dict[str, list[GoldRequirement]]]:
    """Events over a fixed set of queries; each query has 2 facts, found in some passages."""
    gold: dict[str, list[GoldRequirement]] = {}
    queries = []
    for index in range(distinct_queries):
        topic = TOPICS[index % len(TOPICS)]
        query = f"Who created {topic} number {index} and where was it first shown?"
        queries.append(query)
        gold[query] = [
            GoldRequirement(f"The creator of {topic} {index}", f"{topic} {index} was made by Ada"),
            GoldRequirement(
                f"Where {topic} {index} was first shown", f"{topic} {index} opened in Lyon"
            ),
        ]
    result = []
    for number in range(events):
        query_index = number % distinct_queries
        topic = TOPICS[query_index % len(TOPICS)]
        passages = [
            {"id": f"d{number}-{k}", "text": f"Background text {k} about {topic}s in general."}
            for k in range(5)
        ]
        passages[number % 5]["text"] = f"The {topic} {query_index} was made by Ada in 1901."
        if number % 3:
            passages[(number + 2) % 5]["text"] = (
                f"Reviews say {topic} {query_index} opened in Lyon."
            )
        for rank, passage in enumerate(passages, start=1):
            passage["rank"] = rank
        result.append(
            RetrievalEvent.from_record(
                {"event_id": f"ev-{number}", "task": queries[query_index], "context": passages}
            )
        )
    return result, gold


class RemoteFakeJudge:
    """A `FakeJudgeServer` in a child process; counts are read over HTTP."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def stats(self) -> dict[str, Any]:
        stats_url = self.base_url.removesuffix("/v1") + "/fake/stats"
        with urllib.request.urlopen(stats_url, timeout=10) as response:
            return json.load(response)

    def count(self, *, status: int | None = None) -> int:
        stats = self.stats()
        if status is None:
            return int(stats["requests"])
        return int(stats["by_status"].get(str(status), 0))


def _serve(connection: Any, gold: dict[str, list[GoldRequirement]], options: dict) -> None:
    with FakeJudgeServer(GoldOracle(gold), record_bodies=False, **options) as server:
        connection.send(server.base_url)
        connection.recv()  # until the parent says stop


@contextlib.contextmanager
def fake_judge_in_child(
    gold: dict[str, list[GoldRequirement]], **options: Any
) -> Iterator[RemoteFakeJudge]:
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=_serve, args=(child, gold, options), daemon=True)
    process.start()
    try:
        yield RemoteFakeJudge(parent.recv())
    finally:
        parent.send("stop")
        process.join(timeout=10)


def report(label: str, value: float, target: str = "", met: bool | None = None) -> bool:
    """Print one figure with its target; figures without a target are context."""
    verdict = "" if met is None else ("OK" if met else "MISSED")
    target_text = f"target {target}" if target else ""
    print(f"  {label:<52} {value:>10.3f}   {target_text:<18} {verdict}")
    return met is not False


def throughput_and_cache(args: argparse.Namespace) -> list[bool]:
    events, gold = synthetic_workload(args.events, args.distinct_queries)
    results = []
    with (
        fake_judge_in_child(gold, latency_seconds=args.latency) as server,
        tempfile.TemporaryDirectory() as directory,
    ):
        settings = LLMSettings(
            model="gpt-4o-mini",
            api_key="benchmark",
            base_url=server.base_url,
            max_concurrency=args.concurrency,
            requests_per_minute=None,
            tokens_per_minute=None,
        )
        store = JudgmentStore(Path(directory) / "cache.sqlite")
        judge = CachingEvaluator(LLMEvaluator(settings, requirement_store=store), store)

        started = time.perf_counter()
        outcomes = asyncio.run(judge.evaluate(events))
        elapsed = time.perf_counter() - started
        calls = server.count()
        ok = sum(o.status == "ok" for o in outcomes)
        events_per_second = len(events) / elapsed
        ceiling = args.concurrency / args.latency * len(events) / calls
        print(
            f"(a) {len(events)} events, {args.distinct_queries} distinct queries, "
            f"{args.latency * 1000:.0f} ms latency, concurrency {args.concurrency}: "
            f"{calls} calls in {elapsed:.1f} s, {ok} ok"
        )
        results.append(report("events per second", events_per_second))
        results.append(report("ceiling, events per second (calls counted)", ceiling))
        results.append(
            report(
                "ratio to the ceiling",
                events_per_second / ceiling,
                ">= 0.90",
                events_per_second / ceiling >= 0.9,
            )
        )
        results.append(
            report("events judged ok (share)", ok / len(events), "= 1.00", ok == len(events))
        )

        per_event = calls / len(events)
        bound = 1 + args.distinct_queries / len(events)
        most = max(o.model_calls for o in outcomes)
        print("(c) model calls per event")
        results.append(report("calls per event (server count)", per_event, "<= 2", per_event <= 2))
        results.append(
            report(
                "calls per event vs 1 + distinct queries / events",
                per_event,
                f"<= {bound:.3f}",
                per_event <= bound + 1e-9,
            )
        )
        results.append(report("most calls made for one event", most, "<= 2", most <= 2))

        before = server.count()
        started = time.perf_counter()
        again = asyncio.run(judge.evaluate(events))
        elapsed = time.perf_counter() - started
        made = server.count() - before
        print(f"(d) the same {len(events)} events again through the cache ({elapsed:.2f} s)")
        results.append(report("model calls on the re-run (server count)", made, "= 0", made == 0))
        hits = sum(o.cache_hit for o in again)
        results.append(
            report("cache hits (share)", hits / len(events), "= 1.00", hits == len(events))
        )
    return results


def rate_limited(args: argparse.Namespace) -> list[bool]:
    limit = 600
    calls_wanted = int(limit / 60 * args.rpm_seconds)
    distinct = 20
    events, gold = synthetic_workload(calls_wanted - distinct, distinct)
    with fake_judge_in_child(gold, latency_seconds=0.05, requests_per_minute=limit) as server:
        settings = LLMSettings(
            model="gpt-4o-mini",
            api_key="benchmark",
            base_url=server.base_url,
            max_concurrency=32,
            requests_per_minute=limit,
            tokens_per_minute=None,
        )
        started = time.perf_counter()
        outcomes = asyncio.run(LLMEvaluator(settings).evaluate(events))
        elapsed = time.perf_counter() - started
        answered = server.count(status=200)
        limited = server.count(status=429)
        total = server.count()
    rate = answered / elapsed * 60
    ok = sum(o.status == "ok" for o in outcomes)
    print(
        f"(b) server limit {limit} requests/min (rolling 60 s window), {len(events)} events, "
        f"{total} requests in {elapsed:.1f} s, {ok} ok"
    )
    return [
        report(
            "achieved requests per minute", rate, f">= {0.95 * limit:.0f}", rate >= 0.95 * limit
        ),
        report("achieved rate / limit", rate / limit, ">= 0.95", rate / limit >= 0.95),
        report(
            "share of requests answered 429", limited / total, "<= 0.01", limited / total <= 0.01
        ),
        report("events judged ok (share)", ok / len(events), "= 1.00", ok == len(events)),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--distinct-queries", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.25, help="model latency, seconds")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rpm-seconds", type=float, default=75, help="length of run (b)")
    parser.add_argument("--skip-rpm", action="store_true", help="skip the rate-limit run (b)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    results = throughput_and_cache(args)
    if not args.skip_rpm:
        results += rate_limited(args)
    missed = results.count(False)
    print("all targets met" if not missed else f"{missed} target(s) missed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
