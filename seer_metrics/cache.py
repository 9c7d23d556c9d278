"""Content-addressed keys for cached requirement lists and judgments.

K must depend on the query only: the requirement key covers the normalised query, the
evaluator model and the prompt version, nothing else. A judgment key adds the context
(ids and texts in ranked order), so a repeated event re-uses its stored judgment.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

from seer_metrics.events import RetrievalEvent

_WHITESPACE = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Unicode NFKC, case-folded, whitespace collapsed: the form used for keys and quotes."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def _digest(parts: object) -> str:
    canonical = json.dumps(parts, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def requirements_key(query: str, model: str, prompt_version: str) -> str:
    return _digest(["requirements", normalise_text(query), model, prompt_version])


def judgment_key(event: RetrievalEvent, model: str, prompt_version: str) -> str:
    context = [[item.id, item.text] for item in event.context]
    return _digest(["judgment", normalise_text(event.task), context, model, prompt_version])
