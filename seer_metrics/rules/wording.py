"""Every sentence Seer writes about a rule outcome, and how it writes a statistic's value.

The check results, the Slack alert and the console all word outcomes through here, so a
figure reads the same wherever it appears: shares as percentages, means with three
decimals, intersection slices as `env=prod × feature_flag=retrieval-v2`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from seer_metrics.rules.explanation import Explanation
from seer_metrics.rules.model import (
    SHARE_STATISTICS,
    STATISTICS,
    VOLUME_STATISTIC,
    CheckOutcome,
    RestOfParent,
)
from seer_metrics.slices import ALL_SLICE
from seer_metrics.slices.identity import display_label

MINUS = "\u2212"


def format_value(statistic: str, value: float | None) -> str:
    """A statistic's value as text: `12.5%` for shares, `0.812` for means, `n/a` for none."""
    if value is None:
        return "n/a"
    if statistic in SHARE_STATISTICS:
        return f"{value:.1%}"
    if statistic == "mean_n":
        return f"{value:.1f}"
    if statistic == "events":
        return f"{value:,.0f}"
    return f"{value:.3f}"


# What a failing change means, in the words of the trouble it is ({now}, {was}, {events}).
# Low precision is named bloat only through the context size: a tenant on a wrong index
# put 98% of its events below the bloat line with 4 passages an event as before.
TROUBLE_PHRASES = {
    "mean_n": "context bloat: {now} passages an event (was {was})",
    "share_precision_below_bloat": "{now} of events with precision below the bloat line "
    "(was {was})",
    "share_empty_context": "{now} of contexts are empty (was {was})",
    "share_failed": "{now} of events could not be judged (was {was})",
    "events": "{now} events, normally about {was}: events may be missing upstream",
}


def trouble_phrase(outcome: CheckOutcome) -> str:
    """The change as the trouble a user acts on: "25.0% of contexts are empty (was 0.0%)",
    "recall 0.000 (was 0.810), 102 events"."""
    statistic = outcome.statistic
    now = format_value(statistic, outcome.observed)
    was = format_value(statistic, outcome.baseline)
    template = TROUBLE_PHRASES.get(statistic, "{metric} {now} (was {was}), {events} events")
    return template.format(
        now=now, was=was, metric=metric_name(statistic), events=f"{outcome.sample_size:,}"
    )


# The statistics whose change says what the trouble is, in the order a headline names them.
NAMED_TROUBLES = ("mean_n", "share_empty_context", "share_failed", "events")


def slice_troubles(outcomes: Sequence[CheckOutcome]) -> dict[str, tuple[str, ...]]:
    """Each slice's failing changes that name what the trouble is (`NAMED_TROUBLES`), in
    their words: a lead's headline says "context bloat" or "contexts are empty" where its
    figures only say which metric fell."""
    troubles: dict[str, list[str]] = {}
    named = [o for o in outcomes if o.statistic in NAMED_TROUBLES]
    for outcome in sorted(named, key=lambda o: NAMED_TROUBLES.index(o.statistic)):
        if outcome.failed and outcome.kind == "drop":
            phrase = trouble_phrase(outcome)
            found = troubles.setdefault(outcome.slice, [])
            if phrase not in found:
                found.append(phrase)
    return {label: tuple(found) for label, found in troubles.items()}


def statistic_label(statistic: str) -> str:
    """`mean f1`, `share of events with recall < 1.0`, ... (the statistic itself if unknown)."""
    return STATISTICS.get(statistic, ("", statistic))[1]


# Short names of the statistics that are not a metric's mean, for alert headlines.
HEADLINE_NAMES = {
    "mean_n": "context size",
    "share_precision_below_bloat": "bloated share",
    "share_empty_context": "empty share",
    "share_failed": "unjudged share",
    "share_recall_below_1": "share with recall < 1",
}


def metric_name(statistic: str) -> str:
    """`f1` for `mean_f1`, `context size` for `mean_n`: the short name of headlines."""
    return HEADLINE_NAMES.get(statistic, statistic.removeprefix("mean_"))


def change_text(statistic: str, change: float) -> str:
    """A statistic's change with its sign: `−0.33`, `+4.0` passages, `+52.4 pts` for a
    share (percentage points), `−93%` for an event count (its change is relative)."""
    if statistic in SHARE_STATISTICS:
        return f"{signed(change * 100, 1)} pts"
    if statistic == "mean_n":
        return signed(change, 1)
    if statistic == VOLUME_STATISTIC:
        return f"{signed(change * 100, 0)}%"
    return signed(change)


def slice_title(label: str) -> str:
    """`env=prod × feature_flag=retrieval-v2` for an intersection slice; other labels as is
    (a key or value with special characters quoted: `tenant="acme,env=prod"`)."""
    return display_label(label, " × ")


def signed(change: float, digits: int = 2) -> str:
    """A change with its sign, a true minus for falls: `−0.33`, `+0.02`."""
    if round(change, digits) == 0:
        return f"{0:.{digits}f}"
    return f"{MINUS}{-change:.{digits}f}" if change < 0 else f"+{change:.{digits}f}"


def not_enough_data(label: str, sample: int, what: str, minimum: int) -> str:
    return (
        f"{label}: {sample} events with a defined {what}, fewer than the minimum sample of "
        f"{minimum}; reported, not alerted"
    )


def no_baseline(label: str, what: str, baseline_label: str, size: int, minimum: int) -> str:
    return (
        f"{label}: no baseline to compare {what} with ({baseline_label}: {size} events, "
        f"minimum {minimum})"
    )


@dataclass(frozen=True)
class LevelReading:
    """A slice's statistic on the day and the line it is held to: what a service-level
    message starts from (the line is the fixed threshold, or the margin from the normal)."""

    label: str
    statistic: str
    comparison: str
    line: float
    observed: float
    sample: int


def threshold_message(
    reading: LevelReading, beyond: bool, bound: tuple[float, float] | None
) -> str:
    """A service level against a fixed line; `bound` is (confidence, bound) when tested."""
    label, statistic, comparison = reading.label, reading.statistic, reading.comparison
    line, observed, sample = reading.line, reading.observed, reading.sample
    word = "below" if comparison == "below" else "above"
    line_text = format_value(statistic, line)
    if statistic == "share_recall_below_1" and comparison == "above" and line == 0:
        affected = round(observed * sample)
        detail = f"{affected} of {sample} events ({observed:.1%}) have recall < 1.0"
    else:
        detail = (
            f"{statistic_label(statistic)} is {format_value(statistic, observed)} "
            f"over {sample} events"
        )
    verdict = (
        f"{word} the line {line_text}" if beyond else f"within the line ({word} {line_text} alerts)"
    )
    note = ""
    if bound is not None:
        note = f" ({bound[0]:.0%} bound {format_value(statistic, bound[1])})"
    return f"{label}: {detail}, {verdict}{note}"


def normal_level_message(
    reading: LevelReading, normal: float, days: int, noise: float, failed: bool
) -> str:
    """A service level against the slice's own normal level (the median of trailing days)."""
    label, statistic, comparison = reading.label, reading.statistic, reading.comparison
    margin, observed, sample = reading.line, reading.observed, reading.sample
    moved = observed - normal if comparison == "above" else normal - observed
    direction = comparison if moved >= 0 else "on the good side of"
    summary = (
        f"{label}: {statistic_label(statistic)} is {format_value(statistic, observed)} over "
        f"{sample} events, {format_value(statistic, abs(moved))} {direction} "
        f"its normal {format_value(statistic, normal)} (median of {days} days)"
    )
    margin_text = format_value(statistic, margin)
    if failed:
        return f"{summary}: beyond the margin {margin_text} and the noise {noise:.3f}"
    if moved >= margin - 1e-12:
        return f"{summary}: within the noise {noise:.3f}, not alerted"
    return f"{summary}: within the margin {margin_text}"


def drop_message(
    label: str,
    statistic: str,
    observed: float,
    sample: int,
    baseline: float,
    baseline_count: int,
    baseline_label: str,
    delta: float,
    threshold: float,
    noise: float,
    failed: bool,
    worse_when: str = "below",
) -> str:
    """A change against a baseline: how much, over how many events, against what.

    `delta` is how far the statistic moved the bad way (`worse_when`: below, a fall)."""
    fell = delta >= 0 if worse_when == "below" else delta < 0
    movement = f"fell by {abs(delta):.3f}" if fell else f"rose by {abs(delta):.3f}"
    summary = (
        f"{label}: {statistic_label(statistic)} {movement} ({observed:.3f} over {sample} "
        f"events vs {baseline:.3f} over {baseline_count} events in {baseline_label})"
    )
    change = change_noun(worse_when)
    if failed:
        reason = f"a {change} of at least {threshold:.2f} and beyond the noise {noise:.3f}"
    elif delta >= threshold - 1e-12:
        reason = f"but within the noise {noise:.3f}: not alerted"
    else:
        reason = f"less than the alerting {change} {threshold:.2f}"
    return f"{summary}, {reason}"


def few_events_note(message: str, sample: int, minimum: int) -> str:
    """The note on a change failed below the minimum sample (by a distribution-free bound)."""
    return (
        f"{message}; only {sample} events (the minimum sample is {minimum}): failed by a "
        "bound that holds for any distribution of the events"
    )


def not_a_discovery(message: str, p_value: float, tests: int, rate: float) -> str:
    """The note added when false-discovery control turns a drop back into a pass."""
    return (
        f"{message}; not alerted: p = {p_value:.3g} is not significant among the day's "
        f"{tests} drop tests at a false-discovery rate of {rate:.0%}"
    )


def outcome_summary(outcome: CheckOutcome) -> str:
    """One line for an alert: what moved, by how much, against what (plain text)."""
    statistic = outcome.statistic
    label = statistic_label(statistic)
    observed = format_value(statistic, outcome.observed)
    sample = f"{outcome.sample_size:,}"
    if outcome.kind == "drop" and outcome.delta is not None and outcome.baseline is not None:
        noise = f" beyond noise {outcome.noise:.3f}" if outcome.noise is not None else ""
        if statistic == "events":
            return (
                f"{trouble_phrase(outcome)} ({outcome.delta:.0%} fewer than its normal in "
                f"{outcome.baseline_label or 'the baseline'}; alerts on a loss >= "
                f"{outcome.threshold:.0%}{noise})"
            )
        fell = (outcome.observed or 0.0) <= outcome.baseline
        movement, change = ("fell", "drop") if fell else ("rose", "rise")
        return (
            f"{trouble_phrase(outcome)}; "
            f"{label} {movement} by {abs(outcome.delta):.3f}: {observed} over {sample} events vs "
            f"{format_value(statistic, outcome.baseline)} in "
            f"{outcome.baseline_label or 'the baseline'} "
            f"({outcome.baseline_sample_size or 0:,} events); alerts on a {change} "
            f">= {outcome.threshold:.2f}{noise}"
        )
    if outcome.baseline is not None:
        return (
            f"{label} is {observed} over {sample} events vs its normal "
            f"{format_value(statistic, outcome.baseline)}; alerts "
            f"{format_value(statistic, outcome.threshold)} past normal, beyond noise"
        )
    if statistic == "share_recall_below_1" and outcome.threshold == 0 and outcome.observed:
        affected = round(outcome.observed * outcome.sample_size)
        return (
            f"{affected:,} of {sample} events have recall < 1.0 ({outcome.observed:.1%}); "
            "alerts on any"
        )
    word = (
        "above"
        if outcome.observed is not None and outcome.observed > outcome.threshold
        else "below"
    )
    return (
        f"{label} is {observed} over {sample} events; alerts {word} "
        f"{format_value(statistic, outcome.threshold)}"
    )


def _whose(label: str) -> str:
    """`env=prod's`, and `the overall` for `all`."""
    return "the overall" if label == ALL_SLICE else f"{slice_title(label)}'s"


def share_text(share: float) -> str:
    """A share of a change as a whole percentage; above 100% (the rest rose) is 100%."""
    return f"{min(share, 1.0):.0%}"


def rest_phrase(rest: RestOfParent) -> str:
    """`the rest of env=prod unchanged`, or how much it moved (a drift's rest also over
    the drift's recent days, which decide whether the drift is the child's)."""
    metric = metric_name(rest.statistic)
    parent = "the traffic" if rest.parent == ALL_SLICE else slice_title(rest.parent)
    name = f"the rest of {parent}"
    if rest.delta is None:
        return f"{name}: no figures"
    recent = ""
    if rest.recent_delta is not None:
        moved = change_text(rest.statistic, _change(rest.recent_delta, rest.worse_when))
        recent = f"; over the last {rest.recent_days} days {moved}"
    if rest.unchanged:
        return f"{name} unchanged{recent}"
    change = change_text(rest.statistic, _change(rest.delta, rest.worse_when))
    figures = f"{metric} {change}, {rest.events:,} events{recent}"
    falls = rest.worse_when == "below"
    if rest.delta > 0:
        return f"{name} also {'dropped' if falls else 'rose'} ({figures})"
    return f"{name} {'rose' if falls else 'fell'} ({figures})"


def _change(bad_move: float, worse_when: str) -> float:
    """The statistic's change (today minus baseline) from its move the bad way."""
    return -bad_move if worse_when == "below" else bad_move


def change_noun(worse_when: str) -> str:
    """What a change rule watches for: a `drop`, or a `rise` (bloat, empty contexts)."""
    return "drop" if worse_when == "below" else "rise"


def alert_headline(
    outcome: CheckOutcome,
    explanation: Explanation | None = None,
    nearest_part: Explanation | None = None,
    explained_by: str | None = None,
    explained_share: float | None = None,
    troubles: Sequence[str] = (),
) -> str:
    """One line of an alert: what the slice explains, e.g. `env=prod × feature_flag=
    retrieval-v2 explains 92% of env=prod's recall drop: recall −0.38, 74 events; the rest
    of env=prod unchanged`; or that the change is spread over it, or what explains it;
    then the `troubles` its failing changes name (`slice_troubles`)."""
    title = slice_title(outcome.slice)
    if outcome.kind != "drop" or outcome.delta is None:
        return f"{title}: {outcome_summary(outcome)}"
    metric = metric_name(outcome.statistic)
    change = change_text(outcome.statistic, _change(outcome.delta, outcome.worse_when))
    figures = f"{metric} {change}, {outcome.sample_size:,} events"
    if explanation is not None:
        line = (
            f"{title} explains {share_text(explanation.share)} of "
            f"{_whose(explanation.parent)} {metric} {change_noun(outcome.worse_when)}: "
            f"{figures}; "
            f"{rest_phrase(explanation.rest)}"
        )
    else:
        line = f"{title}: {figures}"
    if nearest_part is not None:
        line = (
            f"{line}; no narrower slice explains it ({slice_title(nearest_part.child)} "
            f"accounts for {share_text(nearest_part.share)} of it with "
            f"{nearest_part.event_share:.0%} of its events)"
        )
    if explained_by is not None:
        share = "" if explained_share is None else f", {share_text(explained_share)} of it"
        line = f"{line} (explained by {slice_title(explained_by)}{share})"
    if troubles:
        line = f"{line} — {'; '.join(troubles)}"
    return line


def volume_message(
    label: str, observed: int, normal: float, what: str, lost: float, noise: float, failed: bool
) -> str:
    """A slice's event count against its normal, in words a user acts on."""
    summary = f"{label}: {observed:,} events, normally about {normal:,.0f} {what}"
    if failed:
        return f"{summary} ({lost:.0%} fewer): events may be missing upstream"
    if lost > noise:
        return f"{summary} ({lost:.0%} fewer, beyond noise but less than an alerting loss)"
    return f"{summary}: within its normal volume"


def judge_change_note(judge: str, earlier: str, last_day: object) -> str:
    """Why a rule compares with fewer days: the judge changed, so a new baseline starts."""
    return (
        f"judged by {judge} (was {earlier} until {last_day}): a new baseline starts, "
        "earlier days are not compared"
    )
