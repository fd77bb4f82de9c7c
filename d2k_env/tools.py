"""The action language: tool definitions, parsing and validation of tool calls.

An action is one JSON object ``{"tool": "<name>", "args": {...}}``, as a dict or as text: the
object alone, or an agent's reply holding it (found as :mod:`d2k_env.reply` says). Each
tool's arguments are described by a JSON Schema (the same schema is published for function
calling). Parsing never raises anything but :class:`ActionError`, whose message tells the agent
what was wrong and shows the format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from d2k_env.reply import ReplyError, read_call

MAX_ACTION_CHARS = 2_000_000  # the action space's max_length too: a whole 1 MB file fits in one write_file
# Names are short: these bounds keep every message that quotes one, and every recorded call, small.
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
MAX_WORKLOAD_CHARS = 200
MAX_WORKLOADS = 64
MAX_DESIGN_CHARS = 50_000  # a design is prose and pseudo-code: the judge reads it whole
MODES = ("solution", "design")  # what an episode asks for: a kernel, or a written design of one


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    properties: dict[str, dict] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    example: dict[str, Any] = field(default_factory=dict)

    @property
    def schema(self) -> dict:
        return {"type": "object", "properties": self.properties, "required": list(self.required),
                "additionalProperties": False}


_PATH = {"type": "string", "maxLength": MAX_PATH_CHARS,
         "description": "path relative to the workspace, e.g. solution.py"}
_WORKLOAD = {"type": "string", "maxLength": MAX_WORKLOAD_CHARS}

TOOLS: dict[str, Tool] = {t.name: t for t in [
    Tool("list_files", "List the files in the workspace with their sizes."),
    Tool("read_file", "Read a file, optionally only lines start..end (1-based, inclusive).",
         {"path": _PATH, "start": {"type": "integer", "minimum": 1, "maximum": 10**9},
          "end": {"type": "integer", "minimum": 1, "maximum": 10**9}},
         ("path",), {"path": "baseline.py"}),
    Tool("write_file", "Create or overwrite a file with the given content.",
         {"path": _PATH, "content": {"type": "string"}}, ("path", "content"),
         {"path": "solution.py", "content": "import torch\nimport triton\n..."}),
    Tool("str_replace", "Replace the one occurrence of `old` in a file with `new`.",
         {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}}, ("path", "old", "new"),
         {"path": "solution.py", "old": "BLOCK = 128", "new": "BLOCK = 256"}),
    Tool("run_tests", "Compile solution.py and check its outputs against the baseline on every workload."),
    Tool("benchmark", "Check correctness, then time solution and baseline side by side; reports speedups "
                      "and the fraction of the roofline reached. Optionally only some workloads.",
         {"workloads": {"type": "array", "items": _WORKLOAD, "maxItems": MAX_WORKLOADS}}, (),
         {"workloads": ["64x8192"]}),
    Tool("profile", "Per-kernel GPU time of solution.py on one workload (torch profiler).",
         {"workload": _WORKLOAD}, ("workload",)),
    Tool("submit", "Final evaluation on fresh secret inputs; ends the episode and yields the reward."),
]}

# Design-only episodes (mode "design"): the agent reads the task and states a design; no kernel runs.
DESIGN_TOOLS: dict[str, Tool] = {**{name: TOOLS[name] for name in ("list_files", "read_file")}, "submit_design": Tool(
    "submit_design", "Submit your design of the kernel (prose and pseudo-code: algorithm, dataflow, GPU "
                     "realisation); ends the episode. A judge grades it against the task's design properties.",
    {"design": {"type": "string", "maxLength": MAX_DESIGN_CHARS}}, ("design",),
    {"design": "One program per row: load the row once, ..."})}

TOOLSETS = {"solution": TOOLS, "design": DESIGN_TOOLS}


def format_note(mode: str = "solution") -> str:
    """How to send an action, naming the tools of ``mode``'s episodes."""
    return ('Send exactly one call per reply, a JSON object {"tool": "<name>", "args": {...}}, e.g. '
            '{"tool": "read_file", "args": {"path": "baseline.py"}}, bare or in a ```json block; text in '
            '<think> blocks is not read. Tools: ' + ", ".join(toolset(mode)))


def toolset(mode: str) -> dict[str, Tool]:
    """The tools of an episode of ``mode`` (one of MODES); a ValueError for another mode."""
    if mode not in TOOLSETS:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    return TOOLSETS[mode]


FORMAT = format_note()


@dataclass(frozen=True)
class ToolCall:
    tool: str
    args: dict[str, Any]


class ActionError(Exception):
    """A malformed action; the message is shown to the agent."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique: with a repeated key the last would win silently (a second
    "tool" key spliced into arguments would change the tool)."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"the key {key[:50]!r} appears twice in one object")
        seen.add(key)
    return dict(pairs)


def parse_action(action: Any, mode: str = "solution") -> ToolCall:
    """Turn an action (JSON text or dict) into a validated :class:`ToolCall` of ``mode``'s tools."""
    tools, note = toolset(mode), format_note(mode)
    if isinstance(action, str):
        if len(action) > MAX_ACTION_CHARS:
            raise ActionError(f"the action is {len(action)} characters; at most {MAX_ACTION_CHARS} are accepted")
        try:
            action = read_call(action, object_pairs_hook=unique_keys, format_note=note)
        except ReplyError as exc:
            raise ActionError(str(exc)) from None
    if not isinstance(action, dict):
        raise ActionError(f"the action must be a JSON object, not {type(action).__name__}. {note}")
    unknown_keys = [k for k in action if k not in ("tool", "args")]
    if "tool" not in action or unknown_keys:
        extra = f" (unexpected keys: {', '.join(_brief(k) for k in unknown_keys[:5])})" if unknown_keys else ""
        raise ActionError(f"the action needs a \"tool\" key and an optional \"args\" object{extra}. {note}")
    name, args = action["tool"], action.get("args", {})
    if args is None:
        args = {}
    if not isinstance(name, str) or name not in tools:
        other = next((m for m, ts in TOOLSETS.items() if m != mode and isinstance(name, str) and name in ts), None)
        where = f" in a {mode} episode ({name} belongs to {other} episodes)" if other else ""
        raise ActionError(f"unknown tool {_brief(name)}{where}. {note}")
    if not isinstance(args, dict):
        raise ActionError(f"\"args\" must be a JSON object, not {type(args).__name__}. {note}")
    validate_args(tools[name], args)
    return ToolCall(name, args)


_JSON_TYPES = {"string": str, "integer": int, "array": list, "object": dict}


def validate_args(tool: Tool, args: dict) -> None:
    usage = f'Usage: {{"tool": "{tool.name}", "args": {json.dumps(tool.example)}}}'
    unknown = [k for k in args if k not in tool.properties]
    if unknown:
        raise ActionError(f"{tool.name} takes no argument(s) {', '.join(_brief(k) for k in unknown[:5])}. {usage}")
    missing = [k for k in tool.required if k not in args]
    if missing:
        raise ActionError(f"{tool.name} needs argument(s) {', '.join(map(repr, missing))}. {usage}")
    for key, value in args.items():
        prop = tool.properties[key]
        expected = _JSON_TYPES[prop["type"]]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ActionError(f"{tool.name}: {key!r} must be a {prop['type']}. {usage}")
        if expected is int and value < prop.get("minimum", value):
            raise ActionError(f"{tool.name}: {key!r} must be >= {prop['minimum']}. {usage}")
        if expected is int and value > prop.get("maximum", value):
            raise ActionError(f"{tool.name}: {key!r} must be <= {prop['maximum']}. {usage}")
        if expected is str and len(value) > prop.get("maxLength", len(value)):
            raise ActionError(f"{tool.name}: {key!r} must be at most {prop['maxLength']} characters, not "
                              f"{len(value)}. {usage}")
        if expected is list and not all(isinstance(v, str) for v in value):
            raise ActionError(f"{tool.name}: {key!r} must be a list of strings. {usage}")
        if expected is list and len(value) > prop.get("maxItems", len(value)):
            raise ActionError(f"{tool.name}: {key!r} must have at most {prop['maxItems']} items. {usage}")
        if expected is list and any(len(v) > prop["items"].get("maxLength", len(v)) for v in value):
            raise ActionError(f"{tool.name}: each of {key!r} must be at most {prop['items']['maxLength']} "
                              f"characters. {usage}")


def manual(mode: str = "solution") -> str:
    """The tool manual shown in the prompt: one line per tool of ``mode`` with its arguments."""
    lines = []
    for t in toolset(mode).values():
        params = ", ".join(f"{k}{'' if k in t.required else '?'}: {v['type']}" for k, v in t.properties.items())
        lines.append(f"- {t.name}({params}): {t.description}")
    return "\n".join(lines)


def _brief(value: Any, limit: int = 80) -> str:
    """repr() for messages, safe on any value (huge ints, deep nesting) and clipped."""
    try:
        text = repr(value) if isinstance(value, str) else repr(value)[: limit + 1]
    except (ValueError, RecursionError):
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def function_schemas(mode: str = "solution") -> list[dict]:
    """OpenAI function-calling schemas: one function per tool of ``mode``, its arguments as JSON Schema."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.schema}}
            for t in toolset(mode).values()]
