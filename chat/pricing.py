"""AGENT_MODEL_PRICES: tokens turned into money for the run inspector.

The setting maps a model name to {"input": $, "output": $}, each per million tokens
(the unit providers publish). A model without a price has no cost (None), never 0.
"""

from __future__ import annotations

from typing import Any

PER = 1_000_000


def price_problems(prices: Any) -> list[str]:
    """What is wrong with the setting's value; empty when it is usable."""
    if not isinstance(prices, dict):
        return ["must be a JSON object mapping model names to prices"]
    problems = []
    for model, price in prices.items():
        if not isinstance(price, dict) or set(price) != {"input", "output"}:
            problems.append(f"{model!r} must map to exactly {{'input': number, 'output': number}}")
            continue
        for key in ("input", "output"):
            value = price[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                problems.append(f"{model!r} {key} must be a number >= 0 ($ per million tokens), not {value!r}")
    return problems


def cost(prices: dict[str, Any], *, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The price of the tokens in dollars, None when the model has no price."""
    price = prices.get(model)
    if not isinstance(price, dict):
        return None
    return (prompt_tokens * price["input"] + completion_tokens * price["output"]) / PER


def reserve_cost(prices: dict[str, Any], *, model: str, tokens: int) -> float | None:
    """The dollars `tokens` may cost at the higher of the model's two prices (a reservation's
    worth against a cost budget), None when the model has no price."""
    price = prices.get(model)
    if not isinstance(price, dict):
        return None
    return tokens * max(price["input"], price["output"]) / PER
