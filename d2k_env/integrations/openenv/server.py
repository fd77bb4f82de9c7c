"""A kernel task as an OpenEnv ``Environment``, and the app that serves it.

Each WebSocket session gets its own :class:`KernelEnvironment` (its own workspace and episode);
``max_concurrent_envs`` sessions may be open at once, e.g. the rollouts of a GRPO group. Their
evaluations share one evaluation service, made at the first session, so a burst of submits is
queued over the machine's GPUs (or CPUs) instead of each session starting its own workers
(:class:`SharedService`).

Serve it with ``python -m d2k_env.integrations.openenv --port 8000`` (``--help`` for the
options), or ``uvicorn`` on the app :func:`make_app` returns. The HTTP ``/reset`` and ``/step``
routes of OpenEnv make a fresh env per request, so an episode of several steps needs the
WebSocket session (:class:`~d2k_env.integrations.openenv.client.KernelEnvClient`).

openenv-core's ``MCPToolClient`` works too: its ``list_tools`` lists the env's tools with their
JSON schemas and its ``call_tool(name, **args)`` is the same step (see :meth:`KernelEnvironment.step`).

``GET /metadata`` names the backend and whether it times kernels (:class:`.models.KernelMetadata`).
Without a GPU the interpreter backend runs kernels untimed and a ``speedup`` reward pays 1.0 per
correct kernel; ``require_timing`` (a server option, or a reset argument) makes such a reset an error.
"""

from __future__ import annotations

import argparse
import os
import threading
import uuid
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (CallToolAction, CallToolObservation, ListToolsAction,
                                               ListToolsObservation, Tool, ToolError, ToolErrorType)
from openenv.core.env_server.types import ConcurrencyConfig, Observation

from d2k_env.integrations.common import LazyEnv
from d2k_env.integrations.openenv.guard import SessionGuard
from d2k_env.integrations.openenv.models import (KernelAction, KernelMetadata, KernelObservation, KernelState,
                                                 ServedAction)
from d2k_env.tools import TOOLS


class NoEpisode(RuntimeError):
    """A step with no episode running: before the session's first reset, or over HTTP, where every
    request gets a fresh env."""


class KernelEnvironment(Environment[KernelAction, KernelObservation, KernelState]):
    """One session's episodes (see the module docstring). ``reset(task=..., guidance=..., seed=...)``
    starts one (``task`` defaults to the one given here); ``env_kwargs`` go to
    :class:`~d2k_env.env.KernelEnv`. A step before the first reset is an error. With
    ``require_timing`` every reset refuses a speedup reward on a backend without timing."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session has its own workspace; nothing mutable is shared

    def __init__(self, task: str | None = None, require_timing: bool = False, **env_kwargs: Any):
        super().__init__()
        from d2k_env.evaluator import resolve_backend

        self._default_task = task
        self._require_timing = require_timing
        self._backend = resolve_backend(env_kwargs.get("backend", "auto"))
        self._reward_kind = env_kwargs.get("reward", _default_reward())
        self._env = LazyEnv(**env_kwargs)
        self._episode_id: str | None = None
        self._reward = 0.0

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: str | None = None,
              guidance: str | None = None, require_timing: bool = False, **kwargs: Any) -> KernelObservation:
        """Start an episode of ``task`` showing ``guidance`` (e.g. "none", "L1+L2"; default: the env's).
        ``require_timing``: a ValueError instead of an episode whose speedup reward is not measured."""
        if not isinstance(require_timing, bool):
            raise ValueError(f"require_timing must be true or false, not {str(require_timing)[:40]!r}")
        if (require_timing or self._require_timing) and (refusal := timing_refusal(self._backend, self._reward_kind)):
            raise ValueError(refusal)
        task = task or self._default_task
        if task is None:
            raise ValueError("reset needs a task (this server has no default task)")
        from d2k_env.task import task_ids

        if task not in (registered := task_ids()):
            raise ValueError(f"unknown task {str(task)[:100]!r}; the registered tasks: {', '.join(registered)}")
        text, info = self._env.reset(task, guidance, seed)
        self._episode_id = episode_id or uuid.uuid4().hex
        self._reward = 0.0
        return _observation(text, 0.0, False, False, info)

    def step(self, action: KernelAction | ListToolsAction | CallToolAction, timeout_s: float | None = None,
             **kwargs: Any) -> Observation:
        """Take one tool call; ``done`` once submitted or out of budget (``truncated`` says which).

        openenv-core's MCP actions are answered as its ``MCPToolClient`` expects: ``list_tools`` with
        the tools and their JSON schemas (no episode needed, no step taken), ``call_tool`` as the
        same tool call, its text the ``result`` and a refusal the ``error`` (the client raises it)."""
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=MCP_TOOLS, reward=None, done=False)
        if isinstance(action, CallToolAction):
            return self._call_tool(action)
        if self._env.env is None or self._env.env.workspace is None:
            raise NoEpisode("no episode is running: reset first (over HTTP every request gets a fresh env, so an "
                            "episode of several steps needs the WebSocket session, /ws)")
        text, reward, terminated, truncated, info = self._env.step({"tool": action.tool, "args": action.args})
        self._reward += reward
        return _observation(text, reward, terminated, truncated, info)

    def _call_tool(self, action: CallToolAction) -> CallToolObservation:
        if action.tool_name not in TOOLS:  # refused before it takes a step, as an MCP server does
            error = ToolError(error_type=ToolErrorType.TOOL_NOT_FOUND,
                              message=f"no tool {action.tool_name[:100]!r}; the tools: {', '.join(TOOLS)}")
            return CallToolObservation(tool_name=action.tool_name, error=error, reward=0.0, done=False)
        observation = self.step(KernelAction(tool=action.tool_name, args=action.arguments))
        error = None if observation.error is None else ToolError(error_type=ToolErrorType.EXECUTION_ERROR,
                                                                 message=observation.error)
        return CallToolObservation(tool_name=action.tool_name, result=observation.text, error=error,
                                   reward=observation.reward, done=observation.done)

    @property
    def state(self) -> KernelState:
        """The episode's configuration, progress, reward so far and workspace files."""
        if self._env.env is None or self._env.env.workspace is None:
            return KernelState()
        state = self._env.env.state()
        return KernelState(episode_id=self._episode_id, step_count=state.steps, task=state.task_id,
                           guidance=list(state.guidance), seed=state.seed, terminated=state.terminated,
                           reward=self._reward, files=state.file_texts())

    def get_metadata(self) -> KernelMetadata:
        from d2k_env.task import task_ids

        return KernelMetadata(name="d2k_env", description="Write a faster Triton kernel than a PyTorch baseline; "
                              "the reward is correctness and measured speedup.", version=_version(),
                              backend=self._backend, timed=self._backend == "cuda", reward=self._reward_kind,
                              require_timing=self._require_timing, default_task=self._default_task, tasks=task_ids())

    def close(self) -> None:
        self._env.close()


def timing_refusal(backend: str, reward: str) -> str | None:
    """Why an episode that requires timing cannot start on ``backend`` with ``reward``, or None."""
    if backend == "cuda" or reward == "binary":
        return None
    return (f"speedups were required (require_timing), but this server evaluates on the {backend} backend, which "
            f"does not time kernels: its {reward!r} reward would pay 1.0 for any correct kernel. Serve it on a GPU "
            "(--backend cuda), or reset without require_timing.")


def _default_reward() -> str:
    import inspect

    from d2k_env.env import KernelEnv

    return inspect.signature(KernelEnv).parameters["reward"].default


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("d2k-env")
    except PackageNotFoundError:
        return None


# The env's tools as openenv-core's MCP tool specs (name, description, JSON schema of the arguments).
MCP_TOOLS = [Tool(name=tool.name, description=tool.description, input_schema=tool.schema) for tool in TOOLS.values()]


def _observation(text: str, reward: float, terminated: bool, truncated: bool,
                 info: dict[str, Any]) -> KernelObservation:
    return KernelObservation(text=text, reward=reward, done=terminated or truncated, truncated=truncated,
                             task=info["task"], guidance=info["guidance"], steps=info["steps"],
                             max_steps=info["max_steps"], error=info.get("error"),
                             evaluation=info.get("evaluation"))


class SharedService:
    """An evaluation service for many sessions, made at the first evaluation (a service starts its
    workers at once; sessions that never evaluate should not pay for them). It is one: every
    session's env sends its jobs here, and they are queued over the machine's GPUs (or CPUs)."""

    def __init__(self, backend: str = "auto", **options: Any):
        from d2k_env.evaluator import resolve_backend

        self.backend = resolve_backend(backend)  # an env checks it matches its own
        self.options = options
        self._service = None
        self._lock = threading.Lock()

    def submit(self, job, task=None):
        from d2k_env.service import make_service

        with self._lock:
            if self._service is None:
                self._service = make_service("local", self.backend, **self.options)
            return self._service.submit(job, task)

    def close(self) -> None:
        with self._lock:
            if self._service is not None:
                self._service.close()
                self._service = None


def default_task(task: str | None = None) -> str:
    """The task of a reset that names none: ``task``, else ``$D2K_TASK``, else the first registered
    task. A ValueError, at start, for a task that is not registered."""
    from d2k_env.task import task_ids

    registered = task_ids()
    chosen = task or os.environ.get("D2K_TASK") or registered[0]
    if chosen not in registered:
        raise ValueError(f"the default task {chosen!r} (--task or $D2K_TASK) is none of the registered tasks: "
                         f"{', '.join(registered)}")
    return chosen


def make_app(task: str | None = None, max_concurrent_envs: int = 8, backend: str = "auto",
             service_options: dict[str, Any] | None = None, token: str | None = None,
             per_client: int | None = None, idle_timeout_s: float | None = 1800.0,
             require_timing: bool | None = None, **env_kwargs: Any):
    """The FastAPI app serving :class:`KernelEnvironment` sessions (at most ``max_concurrent_envs``
    at once; a further one is refused until one closes). A reset that names no task starts
    :func:`default_task`'s (``task``, ``$D2K_TASK`` or the first registered task).

    Limits (:class:`~d2k_env.integrations.openenv.guard.SessionGuard`): ``token`` (default:
    ``$D2K_OPENENV_TOKEN``; none: open to anyone who reaches the port) is the bearer token every
    request but ``/health`` must carry; ``per_client`` caps one client address's open sessions; a
    session idle for ``idle_timeout_s`` (None: never) is ended. Sessions are WebSockets only: an
    HTTP ``openenv/session/create`` is refused (it held a slot until closed by id).

    ``require_timing`` (default: ``$D2K_REQUIRE_TIMING`` is 1): every reset refuses, with a
    ValueError naming the backend, a speedup reward on a backend that does not time kernels (the
    interpreter's); a client may ask the same of its own resets. ``GET /metadata`` names the backend.

    ``env_kwargs`` go to each session's :class:`~d2k_env.env.KernelEnv`. Unless they name an
    ``evaluator``, the sessions share one :class:`SharedService` of ``backend`` configured by
    ``service_options`` (e.g. ``jobs``, ``gpus``); ``app.state.d2k_service.close()`` ends it (the
    process's exit does too).
    """
    from d2k_env.evaluator import resolve_backend

    task = default_task(task)
    backend = resolve_backend(backend)
    if require_timing is None:
        require_timing = os.environ.get("D2K_REQUIRE_TIMING", "0") == "1"
    if "evaluator" not in env_kwargs:
        env_kwargs["evaluator"] = SharedService(backend, **(service_options or {}))

    def factory() -> KernelEnvironment:
        return KernelEnvironment(task, require_timing=require_timing, backend=backend, **env_kwargs)

    limits = ConcurrencyConfig(max_concurrent_envs=max_concurrent_envs, session_timeout=idle_timeout_s)
    app = create_app(factory, ServedAction, KernelObservation, env_name="d2k_env", concurrency_config=limits)
    app.state.d2k_service = env_kwargs["evaluator"]
    _serve_metadata(app, factory)
    app.add_middleware(SessionGuard, token=token or os.environ.get("D2K_OPENENV_TOKEN"), per_client=per_client)
    for error, status in ERROR_STATUS.items():
        app.add_exception_handler(error, _error_reply(status))
    return app


def _serve_metadata(app, factory) -> None:
    """``GET /metadata`` as :class:`KernelMetadata`: openenv-core's route declares its base class as
    the response model, which drops the backend and the other fields of ours."""
    app.router.routes[:] = [route for route in app.router.routes if getattr(route, "path", None) != "/metadata"]

    @app.get("/metadata", response_model=KernelMetadata, tags=["Environment Info"],
             summary="Environment metadata: the backend, whether it times kernels, the reward")
    def metadata() -> KernelMetadata:
        env = factory()
        try:
            return env.get_metadata()
        finally:
            env.close()


# An HTTP route's exception as a status and a JSON body {"error": type, "message": text} (it was a
# 500 with a bare "Internal Server Error"): bad arguments (an unknown task or guidance) are the
# client's, a step without an episode a conflict, anything else the server's.
ERROR_STATUS = {ValueError: 400, NoEpisode: 409, Exception: 500}


def _error_reply(status: int):
    from fastapi.responses import JSONResponse

    def reply(request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": type(exc).__name__, "message": str(exc)[:2000]}, status_code=status)

    return reply


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m d2k_env.integrations.openenv",
                                     description="Serve the kernel tasks as an OpenEnv environment.")
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to accept other machines")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--task", default=None,
                        help="the task of a reset that names none (default: $D2K_TASK, else the first registered task)")
    parser.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    parser.add_argument("--reward", default="speedup")
    parser.add_argument("--max-concurrent-envs", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=None, help="interpreter lanes (default: one per CPU)")
    parser.add_argument("--per-client", type=int, default=None, help="open sessions one client address may hold")
    parser.add_argument("--idle-timeout", type=float, default=1800.0, help="seconds before an idle session ends")
    parser.add_argument("--require-timing", action="store_true", default=None,
                        help="refuse every reset whose speedup reward would not be measured (no GPU); "
                             "default: $D2K_REQUIRE_TIMING is 1")
    args = parser.parse_args(argv)
    options = {} if args.jobs is None else {"jobs": args.jobs}
    # The bearer token comes from $D2K_OPENENV_TOKEN only: a command line is visible to every user.
    app = make_app(args.task, args.max_concurrent_envs, args.backend, options, per_client=args.per_client,
                   idle_timeout_s=args.idle_timeout, require_timing=args.require_timing, reward=args.reward)
    uvicorn.run(app, host=args.host, port=args.port)
