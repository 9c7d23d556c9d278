"""The example the judge tests share: two questions about Inception, the gold requirements
the fake judge answers from, and three passages that hold them."""

from __future__ import annotations

from seer_testing.fake_judge import GoldRequirement

QUERY = "Who directed Inception and what is their nationality?"
OTHER_QUERY = "When was Inception released?"
GOLD = {
    QUERY: [
        GoldRequirement("The director of Inception", "Christopher Nolan directed Inception"),
        GoldRequirement("The nationality of that director", "Nolan is British-American"),
    ],
    OTHER_QUERY: [GoldRequirement("The release year of Inception", "released in 2010")],
}
CONTEXT = [
    {"id": "p1", "text": "Christopher Nolan directed Inception.", "score": 0.95},
    {"id": "p2", "text": "Nolan is British-American.", "score": 0.89},
    {"id": "p3", "text": "Inception released in 2010.", "score": 0.72},
]
