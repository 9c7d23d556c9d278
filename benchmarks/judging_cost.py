"""What the LLM judge costs and how long a day takes: on demand, in batch and sampled.

Token counts come from the real prompts of the bundled dev events (each labeled example's
question with the top 4 passages of a BM25 ranking, as `seer estimate` counts them), the
prices from the judge's price table. Then a simulated day of 1,000,000 events over 50
slices of very different sizes is judged with the sampling the README recommends at that
volume, at 500 requests and 200,000 tokens a minute.

    .venv/bin/python benchmarks/judging_cost.py
    .venv/bin/python benchmarks/judging_cost.py --events 1000000 --slices 50 --sample-size 20000

Targets: the sampled day judged within 6 hours; batch cost at most 0.5 of on-demand;
every slice with at least its minimum sample.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from seer_metrics.agreement import example_to_record, load_examples
from seer_metrics.evaluators.llm import DEFAULT_MODEL, LLMSettings
from seer_metrics.events import RetrievalEvent
from seer_metrics.spend.cost_estimate import estimate_cost, token_counter
from seer_metrics.spend.sampling import SamplingSettings, allocate
from seer_pipelines.demo import DATA_DIR

TARGET_HOURS = 6.0
TARGET_BATCH_RATIO = 0.5


def bundled_events() -> list[RetrievalEvent]:
    events = []
    for path in sorted(DATA_DIR.glob("*.jsonl")):
        for example in load_examples(path).examples:
            events.append(RetrievalEvent.from_record(example_to_record(example, context_size=4)))
    return events


def slice_sizes(events: int, slices: int, seed: int) -> dict[str, int]:
    """A day's events over `slices` tenants, Zipf-like: a few large, a long tail of small."""
    weights = 1.0 / np.arange(1, slices + 1) ** 1.1
    counts = np.random.default_rng(seed).multinomial(events, weights / weights.sum())
    return {f"tenant-{index:02d}": int(count) for index, count in enumerate(counts)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--slices", type=int, default=50)
    parser.add_argument("--sample-size", type=int, default=20_000)
    parser.add_argument("--min-per-slice", type=int, default=30)
    parser.add_argument("--rpm", type=float, default=500.0)
    parser.add_argument("--tpm", type=float, default=200_000.0)
    parser.add_argument(
        "--query-repeat-share",
        type=float,
        default=0.0,
        help="share of events whose query was already seen (phase 1 cached)",
    )
    args = parser.parse_args()

    price = LLMSettings(model=args.model).price_for(args.model)
    count, method = token_counter(args.model)
    events = bundled_events()
    measured = estimate_cost(events, args.model, price, count, method)
    per_event_prompt = measured.online.prompt_tokens / len(events)
    per_event_completion = measured.online.completion_tokens / len(events)
    per_event_calls = measured.online.calls / len(events)
    online_per_1000 = measured.online.cost_usd / len(events) * 1000
    batch_per_1000 = measured.batch.cost_usd / len(events) * 1000
    print(f"model {args.model}, tokens counted by {method} on {len(events)} bundled dev events")
    print(
        f"per event: {per_event_calls:.2f} calls, {per_event_prompt:,.0f} prompt and "
        f"{per_event_completion:,.0f} completion tokens"
    )
    print(f"cost per 1,000 events: on demand ${online_per_1000:.4f}, batch ${batch_per_1000:.4f}")

    sizes = slice_sizes(args.events, args.slices, seed=7)
    settings = SamplingSettings(target=args.sample_size, minimum_per_stratum=args.min_per_slice)
    sample = allocate(sizes, settings)
    judged = sum(sample.values())
    calls = judged * (1 + (1 - args.query_repeat_share))
    tokens = judged * (per_event_prompt + per_event_completion)
    minutes = max(calls / args.rpm, tokens / args.tpm)
    sampled_online = judged * online_per_1000 / 1000
    sampled_batch = judged * batch_per_1000 / 1000
    full_online = args.events * online_per_1000 / 1000
    full_minutes = max(args.events * 2 / args.rpm, args.events * per_event_prompt / args.tpm)
    print(
        f"cost per 1,000 events of the day, sampled {judged:,} of {args.events:,}: "
        f"${sampled_online / args.events * 1000:.5f}"
    )
    print(
        f"{args.events:,}-event day, every event judged: {full_minutes / 60:,.1f} h at "
        f"{args.rpm:.0f} rpm, ${full_online:,.2f} on demand"
    )
    print(
        f"{args.events:,}-event day, {args.slices} slices, sampled to {judged:,} events: "
        f"{minutes / 60:.2f} h (target <= {TARGET_HOURS} h), ${sampled_online:,.2f} on demand, "
        f"${sampled_batch:,.2f} in batch"
    )
    smallest = min(sizes, key=sizes.get)
    print(
        f"smallest slice: {sizes[smallest]:,} events, {sample[smallest]} judged "
        f"(minimum {args.min_per_slice})"
    )
    ratio = measured.batch.cost_usd / measured.online.cost_usd
    print(f"batch / on-demand cost: {ratio:.2f} (target <= {TARGET_BATCH_RATIO})")
    missed = []
    if minutes / 60 > TARGET_HOURS:
        missed.append("judging time")
    if ratio > TARGET_BATCH_RATIO:
        missed.append("batch cost")
    if any(sample[name] < min(size, args.min_per_slice) for name, size in sizes.items()):
        missed.append("minimum per slice")
    if missed:
        print(f"MISSED: {', '.join(missed)}")
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
