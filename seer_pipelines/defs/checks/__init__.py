"""Asset checks: one per rule (slice_rules), the row accounting, the budget, and freshness."""
