"""`seer estimate`: calls, tokens and cost of judging a file of events, before paying for it."""

from __future__ import annotations

import argparse
import json
import sys

from seer_metrics.evaluators.llm import DEFAULT_MODEL, DEFAULT_PRICES, LLMSettings, parse_prices
from seer_metrics.events import InvalidEventError, RetrievalEvent
from seer_metrics.slices import DEFAULT_SLICE_KEYS, event_stratum
from seer_metrics.spend.cost_estimate import CostEstimate, estimate_cost, token_counter
from seer_metrics.spend.sampling import SamplePlanner, SamplingConfigError, SamplingSettings
from seer_metrics.text.jsonl import numbered_json_lines
from seer_pipelines.cli import UsageError
from seer_pipelines.cli.evaluate import check_input_file
from seer_pipelines.settings import comma_separated, setting


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("events", help="JSONL file of events (.jsonl or .jsonl.gz)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"judge model ({DEFAULT_MODEL})")
    parser.add_argument(
        "--prices",
        help="JSON price table extending the built-in one, e.g. '{\"my-model\": [0.15, 0.6]}' "
        "(USD per 1M input and output tokens)",
    )
    parser.add_argument("--sample-size", type=int, help="events to judge (stratified sample)")
    parser.add_argument("--sample-rate", type=float, help="share of events to judge, in (0, 1]")
    parser.add_argument(
        "--sample-min-per-slice",
        type=int,
        default=30,
        help="judged events at least per slice combination (30)",
    )
    parser.add_argument(
        "--slice-keys",
        default=",".join(DEFAULT_SLICE_KEYS),
        help="metadata keys that stratify the sample (env,feature_flag)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _read_events(path: str) -> tuple[list[RetrievalEvent], int]:
    """The valid events and the number of lines left out as invalid."""
    events: list[RetrievalEvent] = []
    invalid = 0
    for _line, record, error in numbered_json_lines(path):
        if error is not None or not isinstance(record, dict):
            invalid += 1
            continue
        try:
            events.append(RetrievalEvent.from_record(record))
        except InvalidEventError:
            invalid += 1
            continue
    return events, invalid


def _sampled(
    events: list[RetrievalEvent], settings: SamplingSettings, keys: list[str]
) -> list[RetrievalEvent]:
    """The events the judging step would judge under `settings` (hashed once)."""
    planner = SamplePlanner(settings)
    planner.add(
        [event.event_id for event in events],
        [event_stratum(event.metadata, keys) for event in events],
    )
    chosen = planner.chosen(planner.plan())
    return [event for event, keep in zip(events, chosen, strict=True) if keep]


def _money(value: float | None) -> str:
    return "unknown (no price for this model)" if value is None else f"${value:,.4f}"


def _lines(title: str, estimate: CostEstimate) -> list[str]:
    return [
        f"{title}: {estimate.events:,} events, {estimate.distinct_queries:,} distinct queries",
        f"  calls {estimate.online.calls:,}, prompt tokens {estimate.online.prompt_tokens:,}, "
        f"completion tokens {estimate.online.completion_tokens:,}",
        f"  on demand {_money(estimate.online.cost_usd)}, batch {_money(estimate.batch.cost_usd)}",
    ]


def run(args: argparse.Namespace) -> int:
    path = check_input_file(args.events, "events file")
    prices = dict(DEFAULT_PRICES)
    if args.prices:
        try:
            prices.update(parse_prices(args.prices, "--prices"))
        except ValueError as error:
            raise UsageError(str(error)) from None
    try:
        sampling = SamplingSettings(
            target=args.sample_size,
            rate=args.sample_rate,
            minimum_per_stratum=args.sample_min_per_slice,
        )
    except SamplingConfigError as error:
        raise UsageError(str(error)) from None
    keys = comma_separated(args.slice_keys)
    events, invalid = _read_events(str(path))
    if not events:
        raise UsageError(f"events file {args.events!r}: no valid event to estimate")
    price = LLMSettings(model=args.model, prices=prices).price_for(args.model)
    count, method = token_counter(
        args.model, setting("TIKTOKEN_CACHE_DIR") or setting("DATA_GYM_CACHE_DIR")
    )
    everything = estimate_cost(events, args.model, price, count, method)
    sampled = (
        estimate_cost(_sampled(events, sampling, keys), args.model, price, count, method)
        if sampling.enabled
        else None
    )
    if args.json:
        result = everything.as_dict()
        result["invalid_lines"] = invalid
        result["price_per_1m_tokens"] = None if price is None else list(price)
        result["sampled"] = None if sampled is None else sampled.as_dict()
        print(json.dumps(result, indent=2))
        return 0
    print(f"model {args.model}, tokens counted by {method}; {invalid} invalid line(s) left out")
    print("\n".join(_lines("every event", everything)))
    if sampled is not None:
        print("\n".join(_lines("with sampling", sampled)))
    if price is None:
        print(f"note: {args.model} has no price; pass --prices to get a cost", file=sys.stderr)
    return 0
