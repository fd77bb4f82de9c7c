"""Chat models and the env: replies to actions, observations to messages, long contexts compacted.

Two ways to talk to a model:

- ``function`` mode: the model gets :func:`d2k_env.tools.function_schemas` and answers with
  OpenAI-style tool calls; each call becomes one action, each result a ``tool`` message.
- ``text`` mode: the model answers in text holding one call: a bare JSON object, a fenced JSON
  block, or Hermes-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, with
  reasoning in ``<think>`` blocks never read for calls (:mod:`d2k_env.reply` has the rules); each
  observation comes back as a ``user`` message.

A reply from which no single call can be read (none, several, or a malformed one) is passed to the
env as it is, so it becomes an ordinary step whose observation says what was wrong and where.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from d2k_env.reply import ReplyError, read_call
from d2k_env.tools import unique_keys

TOOL_MODES = ("function", "text")

SYSTEM_PROMPTS = {
    "function": (
        "You are an expert GPU kernel engineer working in a sandboxed workspace. Act only through the tools "
        "provided. Each tool call is one step of a limited budget; several calls in one reply run in order. "
        "Read the task, write solution.py, test it, and call submit when it is correct and as fast as you can "
        "make it: submit ends the episode."),
    "text": (
        "You are an expert GPU kernel engineer working in a sandboxed workspace. Act only through tool calls: "
        "end every reply with exactly one JSON object {\"tool\": \"<name>\", \"args\": {...}}, optionally inside "
        "a ```json block; a reply with more than one call runs none of them, and text inside <think> blocks is "
        "never read for calls. Each call is one step of a limited budget. Read the task, write solution.py, test "
        "it, and call submit when it is correct and as fast as you can make it: submit ends the episode."),
}
# Design-only episodes (KernelEnv mode "design"): the same tool protocol, but the work is a written design.
DESIGN_SYSTEM_PROMPTS = {
    "function": (
        "You are an expert GPU kernel engineer. Act only through the tools provided; each tool call is one step "
        "of a limited budget. Read the task, then state a concrete design of a Triton kernel for it and call "
        "submit_design with it: submit_design ends the episode. You write no code and nothing is run."),
    "text": (
        "You are an expert GPU kernel engineer. Act only through tool calls: end every reply with exactly one JSON "
        "object {\"tool\": \"<name>\", \"args\": {...}}, optionally inside a ```json block; a reply with more than "
        "one call runs none of them, and text inside <think> blocks is never read for calls. Each call is one "
        "step of a limited budget. Read the task, then state a concrete design of a Triton kernel for it and call "
        "submit_design with it: submit_design ends the episode. You write no code and nothing is run."),
}



@dataclass(frozen=True)
class ModelToolCall:
    """One function call in a model reply, as the API returned it (``arguments`` is JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelReply:
    """What the model said in one turn."""

    content: str | None = None
    tool_calls: tuple[ModelToolCall, ...] = ()
    reasoning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"content": self.content,
                             "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                            for c in self.tool_calls]}
        if self.reasoning:
            d["reasoning"] = self.reasoning
        return d


def action_from_tool_call(name: str, arguments: str | dict | None) -> str:
    """The env action for one function call. Arguments that are not JSON stay in the action text, so
    the env reports them as invalid JSON."""
    if isinstance(arguments, dict):
        return json.dumps({"tool": name, "args": arguments})
    raw = (arguments or "").strip() or "{}"
    try:
        return json.dumps({"tool": name, "args": json.loads(raw)})
    except (json.JSONDecodeError, RecursionError):
        return '{"tool": ' + json.dumps(name) + ', "args": ' + raw + "}"


def actions_from_text(text: str) -> list[str]:
    """The env action for a text reply: the one call in it (found as :mod:`d2k_env.reply` says) as
    JSON; when no single call can be read, the reply itself, which the env refuses with the reason."""
    try:
        call = read_call(text, object_pairs_hook=unique_keys)
    except ReplyError:
        return [text]
    return [json.dumps(call)] if isinstance(call, dict) and "tool" in call else [text]


def actions_from_reply(reply: ModelReply) -> list[str]:
    """One action per tool call; a reply without tool calls is parsed as text."""
    if reply.tool_calls:
        return [action_from_tool_call(c.name, c.arguments) for c in reply.tool_calls]
    return actions_from_text(reply.content or "")


def clip_middle(text: str, limit: int) -> str:
    """``text`` shortened to about ``limit`` characters, head and tail kept, with a note of what went."""
    if len(text) <= limit:
        return text
    head = max(limit * 2 // 3, 0)
    tail = max(limit - head, 0)
    return (text[:head] + f"\n[... {len(text) - head - tail} characters of this old message omitted ...]\n"
            + (text[-tail:] if tail else ""))


@dataclass(frozen=True)
class ContextPolicy:
    """Which parts of a long conversation are sent to the model in full.

    The system prompt and the task prompt always are. Turns (an assistant reply and the results that
    follow it) older than the most recent ``keep_recent`` have their tool outputs and the long string
    arguments of their tool calls cut to ``clip_chars``. The cut-off moves ``keep_recent`` turns at a
    time, so the shortened prefix stays identical between moves and servers can reuse its cache.
    ``keep_recent=None`` sends everything.
    """

    keep_recent: int | None = 8
    clip_chars: int = 2000

    def __post_init__(self):
        if self.keep_recent is not None and self.keep_recent < 1:
            raise ValueError("keep_recent must be >= 1 (or None to keep every turn in full)")
        if self.clip_chars < 0:
            raise ValueError("clip_chars must be >= 0")

    def apply(self, messages: list[dict]) -> list[dict]:
        if self.keep_recent is None:
            return messages
        turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        old_turns = (max(len(turns) - self.keep_recent, 0) // self.keep_recent) * self.keep_recent
        if old_turns == 0:
            return messages
        boundary = turns[old_turns]  # first message sent in full
        out = []
        for i, m in enumerate(messages):
            if 2 <= i < boundary:  # never the system prompt or the task prompt
                m = self._shorten(m)
            out.append(m)
        return out

    def _shorten(self, message: dict) -> dict:
        m = copy.copy(message)
        if isinstance(m.get("content"), str) and m["role"] in ("tool", "user", "assistant"):
            m["content"] = clip_middle(m["content"], self.clip_chars)
        if m.get("tool_calls"):
            m["tool_calls"] = [self._shorten_call(c) for c in m["tool_calls"]]
        return m

    def _shorten_call(self, call: dict) -> dict:
        args = call["function"]["arguments"]
        try:
            parsed = json.loads(args)
        except (json.JSONDecodeError, RecursionError):
            short = clip_middle(args, self.clip_chars)
        else:  # stay valid JSON: servers may parse old arguments back
            short = json.dumps({k: clip_middle(v, self.clip_chars) if isinstance(v, str) else v
                                for k, v in parsed.items()} if isinstance(parsed, dict) else parsed)
        return {**call, "function": {**call["function"], "arguments": short}}


@dataclass
class Conversation:
    """The chat transcript of one episode, in OpenAI message format.

    ``start(prompt)`` opens it; ``add_reply`` records the model's turn and returns its actions;
    ``add_observation`` records each action's result, as a ``tool`` message answering the pending
    call, or as a ``user`` message when the action came from text.
    """

    tool_mode: str = "function"
    system_prompt: str | None = None
    messages: list[dict] = field(default_factory=list)
    _pending: list[str] = field(default_factory=list)  # tool_call ids still awaiting a result

    def __post_init__(self):
        if self.tool_mode not in TOOL_MODES:
            raise ValueError(f"tool_mode must be one of {TOOL_MODES}, not {self.tool_mode!r}")
        if self.system_prompt is None:
            self.system_prompt = SYSTEM_PROMPTS[self.tool_mode]

    def start(self, prompt: str) -> None:
        self.messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": prompt}]
        self._pending = []

    def add_reply(self, reply: ModelReply) -> list[str]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
        if reply.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}}
                                     for c in reply.tool_calls]
            self._pending = [c.id for c in reply.tool_calls]
        self.messages.append(message)
        return actions_from_reply(reply)

    def add_observation(self, observation: str) -> None:
        if self._pending:
            self.messages.append({"role": "tool", "tool_call_id": self._pending.pop(0), "content": observation})
        else:
            self.messages.append({"role": "user", "content": observation})

    @property
    def has_pending(self) -> bool:
        """Whether tool calls of the last reply still await their results."""
        return bool(self._pending)
