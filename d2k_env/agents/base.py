"""What every policy offers the experiment runner."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class TokenUsage:
    """Tokens and requests a policy spent; cumulative over its episode."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    retries: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, int]:
        return {**asdict(self), "total_tokens": self.total_tokens}

    def minus(self, earlier: "TokenUsage") -> "TokenUsage":
        return TokenUsage(self.prompt_tokens - earlier.prompt_tokens,
                          self.completion_tokens - earlier.completion_tokens,
                          self.requests - earlier.requests, self.retries - earlier.retries)


class PolicyError(RuntimeError):
    """A policy that cannot act: misconfigured, or its model server keeps failing."""


class Policy:
    """Maps each observation to one action (JSON tool-call text). One instance drives one episode:
    the first call gets the reset observation (the prompt).

    ``usage`` counts what the policy spent; ``last_output`` is what a model said to produce the
    latest action (``None`` when no model was asked for it).
    """

    name: str = "policy"

    def __init__(self) -> None:
        self.usage = TokenUsage()
        self.last_output: dict[str, Any] | None = None

    def __call__(self, observation: str) -> str:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Settings recorded in each trajectory's header."""
        return {"name": self.name, "kind": type(self).__name__}

    def close(self) -> None:
        """Release what the policy holds (connections); called when its episode ends."""
