"""The LLM judge: two phases (requirements, then support with quotes) over any
OpenAI-compatible endpoint.

    settings.py           what the judge can be told (`LLMSettings`), the price list
    pacing.py             keeping under requests- and tokens-per-minute (`RateLimiter`),
                          the speed the endpoint has shown (`EndpointSpeed`)
    structured_output.py  the output mode and cap name negotiated with the endpoint
    client.py             sending a request and retrying what can succeed (`Connection`)
    retries.py            a call's attempts and failure, the SDK's errors read
    prompts.py            the versioned prompts; answers.py the reply models, their schema
    replies.py            writing a request and reading its reply, with the reason codes
    citations.py          a phase-2 answer checked against the passages (`build_judgment`)
    evaluator.py          `LLMEvaluator`: the two phases, repair and truncation handling

Batch mode (`seer_metrics.evaluators.batch`) sends the same requests and reads the replies
with the same code.
"""

from seer_metrics.evaluators.llm.evaluator import LLMEvaluator
from seer_metrics.evaluators.llm.prompts import PROMPT_VERSION
from seer_metrics.evaluators.llm.settings import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    DEFAULT_PRICES,
    LLMSettings,
    parse_prices,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "DEFAULT_PRICES",
    "PROMPT_VERSION",
    "LLMEvaluator",
    "LLMSettings",
    "parse_prices",
]
