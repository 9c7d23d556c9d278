"""The words of the notes a page carries about an incident's history."""

from __future__ import annotations

from seer_metrics.rules.incident_wording import failing_again_note


def test_failing_again_says_how_long_ago_and_which_checks_recovered() -> None:
    assert failing_again_note(1, "2026-10-29", ["`bloat_rise`", "`recall_drop`"]) == (
        "failing again 1 day after Seer said it recovered on 2026-10-29 "
        "(`bloat_rise`, `recall_drop`)"
    )
    assert failing_again_note(3, "2026-10-29", []) == (
        "failing again 3 days after Seer said it recovered on 2026-10-29"
    )
