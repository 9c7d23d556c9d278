"""Which check heads a day's message (`headline_check`), shared by the message and the
alert-quality benchmark's reading of it."""

from __future__ import annotations

from seer_metrics.rules.alert_item import PagedCheck, headline_check

PAIR = "env=prod,feature_flag=retrieval-v1"
WIDER = "feature_flag=retrieval-v1"


def test_the_first_lead_among_the_pages_heads_the_message() -> None:
    paged = [
        PagedCheck("recall_drop", "all", explained_by=PAIR),
        PagedCheck("recall_drop", PAIR, leads=True),
        PagedCheck("f1_drop", "env=prod", leads=True),
    ]
    assert headline_check(paged, open_stories={("recall_drop", PAIR)}) == ("recall_drop", PAIR)


def test_without_a_lead_an_open_incident_explaining_the_first_page_heads_it() -> None:
    paged = [PagedCheck("recall_drop", WIDER, explained_by=PAIR)]
    assert headline_check(paged, open_stories={("recall_drop", PAIR)}) == ("recall_drop", PAIR)


def test_a_story_of_another_rule_or_not_open_heads_nothing() -> None:
    paged = [PagedCheck("recall_drop", WIDER, explained_by=PAIR)]
    assert headline_check(paged, open_stories={("f1_drop", PAIR)}) is None
    assert headline_check(paged, open_stories=set()) is None


def test_only_the_first_page_is_read_for_a_story() -> None:
    paged = [
        PagedCheck("recall_drop", WIDER),
        PagedCheck("f1_drop", WIDER, explained_by=PAIR),
    ]
    assert headline_check(paged, open_stories={("f1_drop", PAIR)}) is None


def test_a_day_without_pages_has_no_headline() -> None:
    assert headline_check([], open_stories={("recall_drop", PAIR)}) is None
