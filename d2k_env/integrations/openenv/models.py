"""The OpenEnv wire types of a kernel task: what a client sends, sees and can ask about."""

from __future__ import annotations

from typing import Any, Literal

from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import ConfigDict, Field

from d2k_env.tools import TOOLS

ToolName = Literal[tuple(TOOLS)]  # type: ignore[valid-type] - the env's tool names, one source


class KernelAction(Action):
    """One tool call; ``args`` is checked by the env against the tool's schema (a bad one is an
    ordinary step whose observation explains it, as in the Gymnasium env)."""

    tool: ToolName = Field(description="the tool to call, e.g. write_file")
    args: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")


# openenv-core's MCP actions, by the "type" its MCPToolClient sends in a step over /ws.
MCP_ACTIONS: dict[str, type[Action]] = {"list_tools": ListToolsAction, "call_tool": CallToolAction}


class ServedAction(KernelAction):
    """What the server reads a step as: openenv-core's ``ListToolsAction`` or ``CallToolAction``
    when its ``type`` says so (what ``MCPToolClient.list_tools``/``call_tool`` send), else a
    :class:`KernelAction`. openenv-core routes those types itself only for a server whose action
    class is the generic ``Action``; this server's is typed, so it routes them here."""

    model_config = ConfigDict(title="KernelAction")  # the schema clients see is KernelAction's

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Action:  # type: ignore[override]
        if isinstance(obj, dict) and obj.get("type") in MCP_ACTIONS:
            return MCP_ACTIONS[obj["type"]].model_validate(obj, **kwargs)
        return KernelAction.model_validate(obj, **kwargs)


class KernelObservation(Observation):
    """The env's observation text, with ``reward`` (nonzero only on submit) and ``done`` (submitted).

    ``truncated``: the step budget is used up. ``error``: why the step was refused, if it was.
    ``evaluation``: the evaluation's record when the tool evaluated (run_tests, benchmark, profile,
    submit), as in the Gymnasium env's ``info["evaluation"]``.
    """

    text: str = Field(description="the prompt after reset, the tool's result after a step")
    task: str = Field(description="the task id")
    guidance: list[str] = Field(default_factory=list, description="the guidance layers shown")
    steps: int = Field(default=0, ge=0, description="steps taken in this episode")
    max_steps: int = Field(default=0, ge=0, description="the episode's step budget")
    truncated: bool = Field(default=False, description="the step budget is used up")
    error: str | None = Field(default=None, description="why the step was refused, if it was")
    evaluation: dict[str, Any] | None = Field(default=None, description="the evaluation's record, if any")


class KernelState(State):
    """Where the session's episode stands (``episode_id`` and ``step_count`` come from OpenEnv)."""

    task: str | None = Field(default=None, description="the task id; None before the first reset")
    guidance: list[str] = Field(default_factory=list)
    seed: int | None = None
    terminated: bool = Field(default=False, description="the solution was submitted")
    reward: float = Field(default=0.0, description="the episode's reward so far (its submit's)")
    files: dict[str, str] = Field(default_factory=dict, description="the workspace's files")


class KernelMetadata(EnvironmentMetadata):
    """``GET /metadata``: OpenEnv's description of the env, and how this server pays. On the
    interpreter backend kernels run on the CPU untimed, so a ``speedup`` reward pays 1.0 per correct
    kernel; a client that wants speedups checks ``timed``, or resets with ``require_timing=True``."""

    backend: Literal["cuda", "interpreter"] = Field(description="where solutions are evaluated")
    timed: bool = Field(description="kernels are timed: the reward's speedups are measured")
    reward: str = Field(description="the reward of a submit: speedup, log_speedup or binary")
    require_timing: bool = Field(description="every reset refuses a speedup reward without timing")
    default_task: str | None = Field(default=None, description="the task of a reset that names none")
    tasks: list[str] = Field(default_factory=list, description="the registered tasks")
