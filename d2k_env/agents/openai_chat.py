"""A policy served by any OpenAI-compatible chat server (vLLM, SGLang, hosted APIs).

Settings come from arguments, else from the environment: ``OPENAI_BASE_URL`` (the server, e.g.
``http://localhost:8000/v1``), ``OPENAI_API_KEY`` (any value for a local server without auth) and
``D2K_MODEL`` (the model name; when unset and the server serves exactly one model, that one).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any, Callable

import openai

from d2k_env.agents.base import Policy, PolicyError
from d2k_env.chat_format import DESIGN_SYSTEM_PROMPTS, ContextPolicy, Conversation, ModelReply, ModelToolCall
from d2k_env.tools import function_schemas, toolset

ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_API_KEY = "OPENAI_API_KEY"
ENV_MODEL = "D2K_MODEL"

_RETRY_STATUS = frozenset({408, 409, 429})


class ChatPolicyError(PolicyError):
    """The server could not be used (misconfigured, or still failing after every retry)."""


def make_client(base_url: str | None = None, api_key: str | None = None, timeout_s: float = 600.0) -> openai.OpenAI:
    """An ``openai`` client for the server; retries are left to :class:`ChatPolicy`."""
    api_key = api_key or os.environ.get(ENV_API_KEY)
    if not api_key:
        raise ChatPolicyError(f"no API key: pass one or set {ENV_API_KEY} (any value for a local server "
                              "without authentication)")
    return openai.OpenAI(base_url=base_url or os.environ.get(ENV_BASE_URL) or None, api_key=api_key,
                         max_retries=0, timeout=timeout_s)


def resolve_model(client: openai.OpenAI, model: str | None = None) -> str:
    """``model``, else ``D2K_MODEL``, else the one model the server lists."""
    model = model or os.environ.get(ENV_MODEL)
    if model:
        return model
    try:
        served = [m.id for m in client.models.list()]
    except openai.OpenAIError as exc:
        raise ChatPolicyError(f"no model given (set {ENV_MODEL}) and the server's model list failed: {exc}") from exc
    if len(served) != 1:
        raise ChatPolicyError(f"no model given: set {ENV_MODEL} or pass one; the server lists {served or 'none'}")
    return served[0]


def create_with_retries(client: openai.OpenAI, request: dict[str, Any], label: str, max_retries: int,
                        backoff_s: float, max_backoff_s: float, on_retry: Callable[[], None] = lambda: None):
    """One chat completion. Rate limits (429), 408/409, timeouts and server errors (5xx, lost
    connections) are retried up to ``max_retries`` times with exponential backoff and jitter
    (``Retry-After`` honoured), calling ``on_retry`` before each wait; other API errors propagate.
    Still failing after the last retry: :class:`ChatPolicyError` naming ``label``."""
    for attempt in range(max_retries + 1):
        try:
            return client.chat.completions.create(**request)
        except openai.APIStatusError as exc:
            if exc.status_code not in _RETRY_STATUS and exc.status_code < 500:
                raise
            error: openai.OpenAIError = exc
        except openai.APIConnectionError as exc:  # includes timeouts
            error = exc
        if attempt == max_retries:
            raise ChatPolicyError(f"{label}: still failing after {max_retries} retries: "
                                  f"{type(error).__name__}: {error}") from error
        on_retry()
        time.sleep(_delay(attempt, error, backoff_s, max_backoff_s))


def _delay(attempt: int, error: openai.OpenAIError, backoff_s: float, max_backoff_s: float) -> float:
    response = getattr(error, "response", None)
    retry_after = response.headers.get("retry-after") if response is not None else None
    try:
        if retry_after is not None:
            return min(max(float(retry_after), 0.0), max_backoff_s)
    except ValueError:
        pass  # an HTTP date: fall back to our own backoff
    return min(backoff_s * 2 ** attempt, max_backoff_s) * (1 + 0.25 * random.random())


class ChatPolicy(Policy):
    """Drives an episode with a chat model.

    ``tool_mode="function"`` sends the tools as function schemas; ``"text"`` asks for the JSON call in
    the reply (for servers without a tool-call parser). Replies with several tool calls run one per
    step. Rate limits (429), timeouts and server errors (5xx, lost connections) are retried up to
    ``max_retries`` times with exponential backoff and jitter (``Retry-After`` honoured); other API
    errors propagate. ``context`` decides which old outputs are shortened in long episodes.
    ``mode``: the env's (``"solution"``, or ``"design"`` for design-only episodes): which tools are
    sent, and the default system prompt.
    """

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 tool_mode: str = "function", temperature: float | None = None, max_tokens: int | None = None,
                 context: ContextPolicy | None = None, system_prompt: str | None = None, max_retries: int = 8,
                 backoff_s: float = 1.0, max_backoff_s: float = 60.0, timeout_s: float = 600.0,
                 extra_body: dict[str, Any] | None = None, mode: str = "solution"):
        super().__init__()
        toolset(mode)  # a ValueError naming the modes for any other
        self.mode = mode
        if system_prompt is None and mode == "design":
            system_prompt = DESIGN_SYSTEM_PROMPTS.get(tool_mode)
        self.client = make_client(base_url, api_key, timeout_s)
        self.model = resolve_model(self.client, model)
        self.name = self.model
        self.conversation = Conversation(tool_mode, system_prompt)
        self.tool_mode = tool_mode
        self.temperature, self.max_tokens = temperature, max_tokens
        self.context = context or ContextPolicy()
        self.max_retries, self.backoff_s, self.max_backoff_s = max_retries, backoff_s, max_backoff_s
        self.extra_body = dict(extra_body or {})
        self._queue: list[str] = []

    def __call__(self, observation: str) -> str:
        if not self.conversation.messages:
            self.conversation.start(observation)
        else:
            self.conversation.add_observation(observation)
        if self._queue:  # the rest of a reply with several calls
            self.last_output = None
            return self._queue.pop(0)
        reply = self.complete()
        self.last_output = reply.to_dict()
        first, *self._queue = self.conversation.add_reply(reply)
        return first

    def complete(self) -> ModelReply:
        """Ask the model for its next turn on the (compacted) conversation."""
        request: dict[str, Any] = {"model": self.model, "messages": self.context.apply(self.conversation.messages)}
        if self.tool_mode == "function":
            request["tools"] = function_schemas(self.mode)
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.max_tokens is not None:
            request["max_tokens"] = self.max_tokens
        if self.extra_body:
            request["extra_body"] = self.extra_body
        response = self._create_with_retries(request)
        self.usage.requests += 1
        if response.usage is not None:
            self.usage.prompt_tokens += response.usage.prompt_tokens or 0
            self.usage.completion_tokens += response.usage.completion_tokens or 0
        if not response.choices:
            raise ChatPolicyError("the server answered with no choices")
        message = response.choices[0].message
        calls = tuple(ModelToolCall(c.id or f"call_{self.usage.requests}_{i}", c.function.name, c.function.arguments)
                      for i, c in enumerate(message.tool_calls or []) if getattr(c, "function", None) is not None)
        extra = getattr(message, "model_extra", None) or {}  # fields servers add, e.g. vLLM's reasoning
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        return ModelReply(message.content, calls, reasoning if isinstance(reasoning, str) else None)

    def _create_with_retries(self, request: dict[str, Any]):
        return create_with_retries(self.client, request, self.model, self.max_retries, self.backoff_s,
                                   self.max_backoff_s, on_retry=self._count_retry)

    def _count_retry(self) -> None:
        self.usage.retries += 1

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": self.model, "base_url": str(self.client.base_url), "mode": self.mode,
                "tool_mode": self.tool_mode, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "context": {"keep_recent": self.context.keep_recent, "clip_chars": self.context.clip_chars},
                "system_prompt": self.conversation.system_prompt, "extra_body": self.extra_body}

    def close(self) -> None:
        self.client.close()
