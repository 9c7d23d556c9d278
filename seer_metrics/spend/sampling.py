"""A day judged on a stratified sample, and estimates whose errors include the sampling.

Why stratified by slice: a flat rate leaves a small tenant with a handful of judged events,
or none; a minimum per stratum keeps every slice visible. Why a keyed hash of `event_id`:
the same events are chosen on every re-run, so cached judgments stay cache hits and a
repeated run gives the same numbers.

A stratum is one combination of the slice keys' values (`env=prod|feature_flag=v2`), so
every slice (one value of a key, or a pair of keys) is a union of whole strata. Within a
stratum the `n` events with the smallest keyed hash are judged: a simple random sample
without replacement, so the inclusion probability is n / N and the weight N / n.

Slice means are ratio (Hajek) estimators over the judged events with a defined value;
their standard errors come from the linearised variance of a stratified sample with the
finite-population correction, so a mean from 40 judged events carries a wider interval
than one from 4,000, and a fully judged stratum adds no sampling error at all.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_MINIMUM_PER_STRATUM = 30
DEFAULT_SAMPLING_KEY = "seer-sample-v1"
STRATUM_SEPARATOR = "|"


class SamplingConfigError(ValueError):
    """Sampling settings that cannot be used; the message names the setting."""


@dataclass(frozen=True)
class SamplingSettings:
    """How many events of a day to judge: all (the default), a target count, or a rate."""

    target: int | None = None
    rate: float | None = None
    minimum_per_stratum: int = DEFAULT_MINIMUM_PER_STRATUM
    key: str = DEFAULT_SAMPLING_KEY

    def __post_init__(self) -> None:
        if self.target is not None and self.rate is not None:
            raise SamplingConfigError("set either a sample size or a sample rate, not both")
        if self.target is not None and (isinstance(self.target, bool) or self.target < 1):
            raise SamplingConfigError(
                f"SEER_SAMPLE_SIZE (sample size) must be a whole number >= 1, not {self.target!r}"
            )
        if self.rate is not None and not 0.0 < self.rate <= 1.0:
            raise SamplingConfigError(f"sample rate must be in (0, 1], not {self.rate!r}")
        if self.minimum_per_stratum < 0:
            raise SamplingConfigError(
                "SEER_SAMPLE_MIN_PER_SLICE (minimum per slice) must be >= 0, "
                f"not {self.minimum_per_stratum!r}"
            )
        if not self.key:
            raise SamplingConfigError("the sampling key must not be empty")

    @property
    def enabled(self) -> bool:
        return self.target is not None or (self.rate is not None and self.rate < 1.0)

    def wanted(self, population: int) -> int:
        """Events to judge out of `population` before the per-stratum minimum."""
        if self.target is not None:
            return min(self.target, population)
        if self.rate is not None:
            return min(population, math.ceil(self.rate * population))
        return population


def sampling_digest(event_id: str, key: str = DEFAULT_SAMPLING_KEY) -> bytes:
    """The 8-byte keyed hash of one event id: the first bytes of SHA-256(key, `:`, id).

    SHA-256 because every warehouse computes it natively (PostgreSQL `sha256`, BigQuery
    `SHA256`, Snowflake `SHA2_BINARY`, DuckDB `sha256`), so the warehouse chooses the same
    events as Seer; compared as bytes, which orders them like the big-endian integers.
    """
    return hashlib.sha256(
        sampling_prefix(key) + event_id.encode("utf-8", "surrogatepass")
    ).digest()[:8]


def sampling_prefix(key: str) -> bytes:
    """What is hashed before the id: the key (at most 64 bytes of it) and a colon."""
    return key.encode("utf-8")[:64] + b":"


def sampling_hash(event_ids: Iterable[str], key: str = DEFAULT_SAMPLING_KEY) -> np.ndarray:
    """A keyed 64-bit hash per event id (uint64), so nobody can game which events are judged."""
    return np.fromiter(
        (int.from_bytes(sampling_digest(event_id, key), "big") for event_id in event_ids),
        dtype=np.uint64,
    )


def stratum_label(values: Sequence[tuple[str, str | None]]) -> str:
    """The stratum of an event from its (slice key, value) pairs; a missing value is `-`."""
    return STRATUM_SEPARATOR.join(
        f"{key}={'-' if value is None else value}" for key, value in values
    )


def allocate(population: Mapping[Hashable, int], settings: SamplingSettings) -> dict[Hashable, int]:
    """Sample size per stratum: proportional to its size, never below the minimum (or the
    stratum itself), adding up to the wanted total unless the minimums alone exceed it."""
    sizes = {stratum: int(count) for stratum, count in population.items() if count > 0}
    total = sum(sizes.values())
    if not settings.enabled or total == 0:
        return dict(sizes)
    wanted = settings.wanted(total)
    floors = {s: min(n, settings.minimum_per_stratum) for s, n in sizes.items()}
    if sum(floors.values()) >= wanted:
        return floors
    # Water-filling: the share c with sum(min(N, max(floor, c * N))) == wanted.
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        filled = sum(min(n, max(floors[s], middle * n)) for s, n in sizes.items())
        low, high = (middle, high) if filled < wanted else (low, middle)
    exact = {s: min(n, max(floors[s], high * n)) for s, n in sizes.items()}
    counts = {s: math.floor(value) for s, value in exact.items()}
    # Largest remainders take the events still missing, never past a stratum's size.
    order = sorted(exact, key=lambda s: (counts[s] - exact[s], str(s)))
    for stratum in order:
        if sum(counts.values()) >= wanted:
            break
        if counts[stratum] < sizes[stratum]:
            counts[stratum] += 1
    return counts


@dataclass(frozen=True)
class SamplePlan:
    """Which events of one day are judged, and the weights that undo the sampling."""

    population: Mapping[Hashable, int]
    sample_sizes: Mapping[Hashable, int]
    # An event is judged when its hash is <= its stratum's cutoff (None: none judged).
    cutoffs: Mapping[Hashable, int | None]
    key: str = DEFAULT_SAMPLING_KEY

    @property
    def events(self) -> int:
        return sum(self.population.values())

    @property
    def judged(self) -> int:
        return sum(self.sample_sizes.values())

    def selected(self, event_ids: Sequence[str], strata: Sequence[Hashable]) -> np.ndarray:
        """Whether each event is in the sample (same answer on every re-run of the day)."""
        return _within_cutoffs(
            sampling_hash(event_ids, self.key), [self.cutoffs.get(s) for s in strata]
        )

    def inclusion_probability(self, stratum: Hashable) -> float:
        population = self.population.get(stratum, 0)
        return self.sample_sizes.get(stratum, 0) / population if population else 0.0


class SamplePlanner:
    """The day's sample drawn from a first pass over its events, chunk by chunk.

    Only a keyed hash (8 bytes) and a stratum code (4 bytes) are kept per event, so a
    million-event day costs about 12 MB here; `plan` then gives the cutoffs the second pass
    applies to each chunk as it judges it.
    """

    def __init__(self, settings: SamplingSettings) -> None:
        self.settings = settings
        self._code_of: dict[Hashable, int] = {}
        self._hashes: list[np.ndarray] = []
        self._codes: list[np.ndarray] = []

    def add(self, event_ids: Sequence[str], strata: Sequence[Hashable]) -> None:
        if len(event_ids) != len(strata):
            raise ValueError("event_ids and strata must have the same length")
        code_of = self._code_of
        self._hashes.append(sampling_hash(event_ids, self.settings.key))
        self._codes.append(
            np.fromiter(
                (code_of.setdefault(stratum, len(code_of)) for stratum in strata),
                dtype=np.int32,
                count=len(strata),
            )
        )

    def plan(self) -> SamplePlan:
        """Per stratum, the events with the smallest keyed hashes."""
        hashes = np.concatenate(self._hashes) if self._hashes else np.empty(0, np.uint64)
        codes = np.concatenate(self._codes) if self._codes else np.empty(0, np.int32)
        strata = list(self._code_of)
        counts = np.bincount(codes, minlength=len(strata))
        population = {stratum: int(counts[code]) for code, stratum in enumerate(strata)}
        sizes = allocate(population, self.settings)
        order = np.argsort(codes, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(counts)])
        cutoffs: dict[Hashable, int | None] = {}
        for code, stratum in enumerate(strata):
            stratum_hashes = hashes[order[bounds[code] : bounds[code + 1]]]
            wanted = sizes.get(stratum, 0)
            if wanted <= 0:
                cutoffs[stratum] = None
            elif wanted >= len(stratum_hashes):
                cutoffs[stratum] = _ALL
            else:
                cutoffs[stratum] = int(np.partition(stratum_hashes, wanted - 1)[wanted - 1])
        return SamplePlan(
            population=population, sample_sizes=sizes, cutoffs=cutoffs, key=self.settings.key
        )

    def chosen(self, plan: SamplePlan) -> np.ndarray:
        """Whether each event added is in `plan`'s sample, in the order they were added."""
        hashes = np.concatenate(self._hashes) if self._hashes else np.empty(0, np.uint64)
        codes = np.concatenate(self._codes) if self._codes else np.empty(0, np.int32)
        cutoffs = [plan.cutoffs.get(stratum) for stratum in self._code_of]
        return _within_cutoffs(hashes, [cutoffs[code] for code in codes])


_ALL = 2**64 - 1  # the cutoff of a stratum judged whole


def _within_cutoffs(hashes: np.ndarray, cutoffs: Sequence[int | None]) -> np.ndarray:
    """Whether each hash is at most its cutoff (None: never)."""
    limits = np.fromiter((0 if c is None else c for c in cutoffs), np.uint64, len(cutoffs))
    some = np.fromiter((c is not None for c in cutoffs), bool, len(cutoffs))
    return some & (hashes <= limits)


def plan_sample(
    event_ids: Sequence[str], strata: Sequence[Hashable], settings: SamplingSettings
) -> SamplePlan:
    """The day's sample: per stratum, the events with the smallest keyed hashes."""
    planner = SamplePlanner(settings)
    planner.add(event_ids, strata)
    return planner.plan()


@dataclass(frozen=True)
class Estimate:
    """A slice mean estimated from a sample: the value, its standard error and how many
    judged events with a defined value it rests on."""

    mean: float | None
    standard_error: float | None
    judged: int

    def interval(self, z: float = 1.959963984540054) -> tuple[float, float] | None:
        if self.mean is None or self.standard_error is None:
            return None
        return self.mean - z * self.standard_error, self.mean + z * self.standard_error


def estimate_mean(
    values: np.ndarray,
    strata: np.ndarray,
    population: np.ndarray,
    in_slice: np.ndarray | None = None,
) -> Estimate:
    """The slice mean of `values` over the whole day, from its judged events.

    One entry per judged event of the day (every slice, so the within-stratum variances
    are right): `values` is NaN where the metric is undefined, `strata` an integer code,
    `in_slice` whether the event belongs to the slice. `population[h]` is stratum h's
    number of events.
    """
    strata = np.asarray(strata, dtype=np.int64)
    population = np.asarray(population, dtype=float)
    sample_counts = np.bincount(strata, minlength=len(population))
    values = np.asarray(values, dtype=float)
    if in_slice is not None:
        keep = np.asarray(in_slice, dtype=bool)
        values, strata = values[keep], strata[keep]
    return estimate_domain_mean(values, strata, sample_counts, population)


def estimate_domain_mean(
    values: np.ndarray,
    strata: np.ndarray,
    sample_counts: np.ndarray,
    population: np.ndarray,
) -> Estimate:
    """`estimate_mean` from the slice's judged events only, given every stratum's judged
    count (`sample_counts[h]`, the whole day) and size (`population[h]`).

    A judged event outside the slice only adds a zero residual to its stratum, so the
    slice's own events and the per-stratum counts are all the estimate needs. The judged
    events of a stratum stand for all of it (weight N / n); a stratum with a single judged
    event among several borrows the largest within-stratum variance of the slice rather
    than claiming none.
    """
    values = np.asarray(values, dtype=float)
    strata = np.asarray(strata, dtype=np.int64)
    population = np.asarray(population, dtype=float)
    counts = np.asarray(sample_counts, dtype=float)
    defined = ~np.isnan(values)
    judged = int(defined.sum())
    if judged == 0:
        return Estimate(None, None, 0)
    values, strata = values[defined], strata[defined]
    length = len(population)
    weights = np.divide(population, counts, out=np.zeros(length), where=counts > 0)[strata]
    domain_weight = float(weights.sum())
    mean = float((weights * values).sum() / domain_weight)
    # Linearised residuals (zero for the stratum's judged events outside the slice).
    residual = values - mean
    sums = np.bincount(strata, weights=residual, minlength=length)
    squares = np.bincount(strata, weights=residual**2, minlength=length)
    with np.errstate(divide="ignore", invalid="ignore"):
        variance_within = np.where(counts > 1, (squares - sums**2 / counts) / (counts - 1), 0.0)
    single = (counts == 1) & (population > 1)
    if single.any():
        variance_within[single] = float(variance_within.max(initial=0.0))
    finite_correction = np.clip(1.0 - counts / np.maximum(population, 1.0), 0.0, 1.0)
    contributions = np.divide(
        population**2 * finite_correction * variance_within,
        counts,
        out=np.zeros(length),
        where=counts > 0,
    )
    variance = float(contributions.sum()) / domain_weight**2
    return Estimate(mean, math.sqrt(max(variance, 0.0)), judged)
