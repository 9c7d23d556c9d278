"""Alert rules on the per-(day, slice) table: service levels, drops, baselines, incidents.

Pure Python (no Dagster): `evaluate_rules(config, today, history)` turns the slice rows of
one day, plus earlier days for baselines, into a list of `CheckOutcome`, one per (rule,
slice in the rule's scope). The Dagster checks, the Slack message and the docs
(`docs/alerts.md`) are built on that list.

Modules: `model` (rules, config, outcomes), `config` (the rules file, parsed by pydantic;
the defaults are the packaged `default_rules.yaml`), `yaml_file` (reading it: bounded, no
YAML aliases), `field_types` (what each key accepts, every number bounded), `scope`
(slice patterns), `statistics` (pooling, noise, Wilson bounds, false-discovery control),
`readings` (a slice row read for a rule), `levels` (service levels), `evaluation` (drops,
the day's outcomes), `wording` (every sentence about an outcome), `incidents` (the one
transition that opens, carries and closes an incident, with hysteresis; what pages),
`attribution` (which slice leads an alert: the share of a parent's drop a narrower slice
explains, and its surprise; `explanation` holds what one such slice explains).
"""

from seer_metrics.rules.attribution import (
    AlertItem,
    alert_order,
    best_explanation,
    lead_slices,
    parent_slices,
)
from seer_metrics.rules.config import (
    DEFAULT_RULES_RESOURCE,
    RULES_FILE_ENV,
    default_rules,
    default_rules_text,
    load_rules_config,
    parse_rules_config,
    rules_file_path,
)
from seer_metrics.rules.evaluation import control_false_discoveries, evaluate_rules, failing
from seer_metrics.rules.explanation import Explanation
from seer_metrics.rules.incident_day import IncidentChanges, advance_incidents
from seer_metrics.rules.incidents import (
    Incident,
    Verdict,
    follow,
    incident_runs,
    open_before,
)
from seer_metrics.rules.model import (
    DEFAULT_CLOSE_AFTER_PASSES,
    DEFAULT_CONFIDENCE,
    DEFAULT_FALSE_DISCOVERY_RATE,
    DEFAULT_MINIMUM_SAMPLE,
    DEFAULT_TRAILING_DAYS,
    DROP_STATISTICS,
    SEVERITIES,
    SHARE_STATISTICS,
    STATISTICS,
    Baseline,
    CheckOutcome,
    Comparison,
    Priority,
    RestOfParent,
    Rule,
    RuleKind,
    RulesConfig,
    RulesConfigError,
    Severity,
    SliceOverride,
    Status,
    as_date,
)
from seer_metrics.rules.rest_figures import rest_of_parent
from seer_metrics.rules.scope import in_scope, slice_components, slice_matches
from seer_metrics.rules.statistics import (
    PooledSample,
    benjamini_hochberg,
    daily_spread,
    one_sided_p_value,
    pool_groups,
    wilson_interval,
    z_value,
)
from seer_metrics.rules.verdict_holds import day_verdicts
from seer_metrics.rules.wording import (
    alert_headline,
    format_value,
    outcome_summary,
    slice_title,
    statistic_label,
)

DEFAULT_RULES: RulesConfig = default_rules()

__all__ = [
    "DEFAULT_CLOSE_AFTER_PASSES",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_FALSE_DISCOVERY_RATE",
    "DEFAULT_MINIMUM_SAMPLE",
    "DEFAULT_RULES",
    "DEFAULT_RULES_RESOURCE",
    "DEFAULT_TRAILING_DAYS",
    "DROP_STATISTICS",
    "RULES_FILE_ENV",
    "SEVERITIES",
    "SHARE_STATISTICS",
    "STATISTICS",
    "AlertItem",
    "Baseline",
    "CheckOutcome",
    "Comparison",
    "Explanation",
    "Incident",
    "IncidentChanges",
    "PooledSample",
    "Priority",
    "RestOfParent",
    "Rule",
    "RuleKind",
    "RulesConfig",
    "RulesConfigError",
    "Severity",
    "SliceOverride",
    "Status",
    "Verdict",
    "advance_incidents",
    "alert_headline",
    "alert_order",
    "as_date",
    "benjamini_hochberg",
    "best_explanation",
    "control_false_discoveries",
    "daily_spread",
    "day_verdicts",
    "default_rules",
    "default_rules_text",
    "evaluate_rules",
    "failing",
    "follow",
    "format_value",
    "in_scope",
    "incident_runs",
    "lead_slices",
    "load_rules_config",
    "one_sided_p_value",
    "open_before",
    "outcome_summary",
    "parent_slices",
    "parse_rules_config",
    "pool_groups",
    "rest_of_parent",
    "rules_file_path",
    "slice_components",
    "slice_matches",
    "slice_title",
    "statistic_label",
    "wilson_interval",
    "z_value",
]
