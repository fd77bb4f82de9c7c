"""The OpenEnv adapter served on loopback: eight WebSocket sessions at once, each with its own
workspace (a ninth is refused), typed state, plain HTTP routes, and one real evaluation (the
reference submitted scores 1). Needs the ``openenv`` extra (skipped without it)."""

import asyncio
import contextlib
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from conftest import Lazy, installed

pytestmark = pytest.mark.skipif(not installed("openenv.core", "uvicorn", "httpx", "websockets"),
                                reason="needs the openenv extra")
uvicorn, httpx, websockets = Lazy("uvicorn"), Lazy("httpx"), Lazy("websockets")
adapter = Lazy("d2k_env.integrations.openenv")

ROOT = Path(__file__).resolve().parent.parent
TASK = "fused_add_rmsnorm"
SESSIONS = 8


@pytest.fixture(scope="module")
def server():
    """The app on a free loopback port, in a thread; yields its base URL."""
    with serving() as url:
        yield url


@contextlib.contextmanager
def serving(**options):
    """``make_app(TASK, ...)`` with ``options`` on a free loopback port, in a thread: its base URL."""
    app = adapter.make_app(TASK, **{"max_concurrent_envs": SESSIONS, "backend": "interpreter",
                                    "service_options": {"jobs": 1}, **options})
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", ws_max_size=64 * 2**20)
    served = uvicorn.Server(config)
    thread = threading.Thread(target=served.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not served.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    served.should_exit = True
    thread.join(timeout=30)
    app.state.d2k_service.close()
    sock.close()


def call(tool: str, **args):
    return adapter.KernelAction(tool=tool, args=args)


async def opened(url: str, **kwargs):
    """A client whose session the server has accepted. A slot is freed when the server notices a
    closed connection, a moment after the client closes, so a refusal is retried for 30 s."""
    deadline = time.monotonic() + 30
    while True:
        client = adapter.KernelEnvClient(base_url=url, **kwargs)
        try:
            await client.connect()
            await client.state()  # answered by the session, or the refusal arrives here
            return client
        except (RuntimeError, ConnectionError, websockets.ConnectionClosed) as exc:
            await client.close()
            # A full server answers CAPACITY_REACHED; a client at its per_client limit is refused (403).
            refused = isinstance(exc, websockets.ConnectionClosed) or "CAPACITY_REACHED" in str(exc) or (
                isinstance(exc, ConnectionError) and "403" in str(exc))
            if not refused or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def session(url: str, index: int, ready: asyncio.Barrier) -> dict:
    """One session: reset, write a file of its own, wait until every session has, read it back."""
    env = await opened(url, message_timeout_s=120)
    try:
        guidance = ("none", "L1+L2+L3")[index % 2]
        first = await env.reset(task=TASK, guidance=guidance, seed=index)
        written = await env.step(call("write_file", path="notes.txt", content=f"session {index}\n"))
        await ready.wait()  # all eight are open now, each with its file written
        read = await env.step(call("read_file", path="notes.txt"))
        state = await env.state()
        return {"first": first, "written": written, "read": read, "state": state, "guidance": guidance}
    finally:
        await env.close()


def test_eight_sessions_at_once_each_in_its_own_workspace(server):
    async def run():
        ready = asyncio.Barrier(SESSIONS)
        return await asyncio.gather(*(session(server, i, ready) for i in range(SESSIONS)))

    results = asyncio.run(run())
    for index, r in enumerate(results):
        assert TASK in r["first"].observation.text and r["first"].observation.steps == 0
        assert r["first"].observation.guidance == ([] if r["guidance"] == "none" else ["L1", "L2", "L3"])
        assert r["written"].observation.error is None and r["written"].reward == 0.0
        assert f"session {index}" in r["read"].observation.text and not r["read"].done
        state = r["state"]
        assert (state.task, state.seed, state.step_count, state.terminated) == (TASK, index, 2, False)
        assert state.files["notes.txt"] == f"session {index}\n"


def test_a_ninth_session_is_refused_while_eight_are_open(server):
    async def run():
        clients = [await opened(server) for _ in range(SESSIONS)]
        try:
            # The server refuses a session by speaking first: an error, then it closes.
            async with websockets.connect(server.replace("http", "ws") + "/ws") as extra:
                refusal = json.loads(await asyncio.wait_for(extra.recv(), 30))
            assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED"
        finally:
            for client in clients:
                await client.close()
        again = await opened(server)  # closed sessions free their slots
        try:
            assert (await again.reset(seed=1)).observation.task == TASK
        finally:
            await again.close()

    asyncio.run(run())


def test_http_routes_describe_the_typed_env(server):
    assert httpx.get(f"{server}/health", timeout=30).status_code == 200
    schema = httpx.get(f"{server}/schema", timeout=30).json()
    assert "tool" in schema["action"]["properties"] and "text" in schema["observation"]["properties"]


def test_a_real_evaluation_through_the_server(server):
    async def run():
        env = await opened(server, message_timeout_s=300)
        try:
            await env.reset(seed=0)  # the server's default task
            bad = await env.step(call("read_file", path="no_such_file.py"))
            await env.step(call("write_file", path="solution.py",
                                content=(ROOT / "references" / f"{TASK}.py").read_text()))
            submitted = await env.step(call("submit"))
            return bad, submitted, await env.state()
        finally:
            await env.close()

    bad, submitted, state = asyncio.run(run())
    assert bad.observation.error and not bad.done
    assert submitted.done and submitted.reward == 1.0 and not submitted.observation.truncated
    assert submitted.observation.evaluation["mode"] == "submit"
    assert state.terminated and state.reward == 1.0


def test_a_session_s_slow_policy_check_stalls_no_other_session():
    """The red-team case: one session's source whose analysis ran to its time limit made another
    session's honest run_tests wait 123 s (every check waited for the one analysis child). Here the
    warm analysis child is taken and held, as a check in flight that never answers; another session's
    run_tests through the server must still be answered, correct, while it is held."""
    from d2k_env.evaluator import policy_service

    async def honest(url):
        env = await opened(url, message_timeout_s=120)
        try:
            await env.reset(task=TASK, seed=0)
            await env.step(call("write_file", path="solution.py",
                                content=(ROOT / "references" / f"{TASK}.py").read_text()))
            return await env.step(call("run_tests"))
        finally:
            await env.close()

    with serving(service_options={"jobs": 2}) as url:
        service = policy_service._service
        held = service._take()  # the slow session's check, in flight
        try:
            tested = asyncio.run(honest(url))
            assert service.busy == 1, "the held check ended before the other session was answered"
        finally:
            service._give_back(held, healthy=True)
    evaluation = tested.observation.evaluation
    assert evaluation["mode"] == "test" and evaluation["error"] is None, evaluation
    assert evaluation["workloads"] and all(w["correct"] for w in evaluation["workloads"]), evaluation


# -- OpenEnv's conventions (issue 26, item 4) ---------------------------------------------------------
ENV_DIR = ROOT / "environments" / "d2k_kernel_env"


def test_the_default_task_comes_from_the_argument_then_d2k_task_then_the_registry(monkeypatch):
    from d2k_env.task import task_ids

    monkeypatch.delenv("D2K_TASK", raising=False)
    server = Lazy("d2k_env.integrations.openenv.server")
    assert server.default_task() == task_ids()[0]
    monkeypatch.setenv("D2K_TASK", "merge_attn_states")
    assert server.default_task() == "merge_attn_states" and server.default_task(TASK) == TASK
    monkeypatch.setenv("D2K_TASK", "no_such_task")
    with pytest.raises(ValueError, match=r"'no_such_task' \(--task or \$D2K_TASK\) is none of the registered"):
        server.default_task()


def test_a_bare_http_reset_starts_the_default_task(monkeypatch):
    from starlette.testclient import TestClient

    monkeypatch.setenv("D2K_TASK", TASK)
    app = adapter.make_app(backend="interpreter")
    try:
        with TestClient(app) as client:
            reply = client.post("/reset", json={})
        assert reply.status_code == 200, reply.text
        assert reply.json()["observation"]["task"] == TASK
    finally:
        app.state.d2k_service.close()


def test_openenv_validate_accepts_the_environment_directory():
    import shutil
    import subprocess

    if shutil.which("openenv") is None:
        pytest.skip("needs openenv-core's CLI")
    run = subprocess.run(["openenv", "validate", str(ENV_DIR)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "[OK]" in run.stdout, run.stdout + run.stderr


def test_the_environment_directory_s_app_serves_the_kernel_tasks():
    import importlib.util

    from starlette.testclient import TestClient

    spec = importlib.util.spec_from_file_location("d2k_kernel_env_app", ENV_DIR / "server" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        with TestClient(module.app) as client:
            assert client.get("/health").status_code == 200
            assert "tool" in client.get("/schema").json()["action"]["properties"]
    finally:
        module.app.state.d2k_service.close()


def test_http_errors_are_4xx_or_5xx_with_a_json_message():
    from starlette.testclient import TestClient

    app = adapter.make_app(TASK, backend="interpreter")
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            unknown = client.post("/reset", json={"task": "no_such_task"})
            guidance = client.post("/reset", json={"guidance": "L9"})
            stepped = client.post("/step", json={"action": {"tool": "list_files", "args": {}}})
    finally:
        app.state.d2k_service.close()
    assert unknown.status_code == 400 and unknown.json()["error"] == "ValueError"
    assert "unknown task 'no_such_task'" in unknown.json()["message"] and TASK in unknown.json()["message"]
    assert guidance.status_code == 400 and "unknown guidance layer" in guidance.json()["message"]
    assert stepped.status_code == 409 and stepped.json() == {
        "error": "NoEpisode", "message": "no episode is running: reset first (over HTTP every request gets a fresh "
                                         "env, so an episode of several steps needs the WebSocket session, /ws)"}


def test_eight_http_session_posts_take_no_slot_from_the_websocket_clients():
    # The red-team case: 8 unauthenticated POSTs creating MCP sessions took all 8 slots, for good.
    create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    with serving() as url:
        replies = [httpx.post(f"{url}/mcp", json=create, timeout=30) for _ in range(SESSIONS)]
        assert {r.status_code for r in replies} == {403}
        assert "sessions are WebSockets here" in replies[0].json()["message"]

        async def run():
            clients = [await opened(url) for _ in range(SESSIONS)]  # every slot is still free
            for client in clients:
                await client.close()

        asyncio.run(run())


def test_a_bearer_token_is_required_of_every_request_but_health():
    with serving(token="s3cret") as url:
        assert httpx.get(f"{url}/health", timeout=30).status_code == 200
        refused = httpx.post(f"{url}/reset", json={}, timeout=30)
        assert refused.status_code == 401 and "bearer token" in refused.json()["message"]
        wrong = httpx.post(f"{url}/reset", json={}, headers={"Authorization": "Bearer nope"}, timeout=30)
        assert wrong.status_code == 401
        assert httpx.post(f"{url}/reset", json={}, headers={"Authorization": "Bearer s3cret"},
                          timeout=30).status_code == 200

        async def run():
            with pytest.raises(ConnectionError, match="403"):
                await adapter.KernelEnvClient(base_url=url).connect()
            client = await opened(url, token="s3cret")
            try:
                assert (await client.reset(seed=0)).observation.task == TASK
            finally:
                await client.close()

        asyncio.run(run())


def test_one_client_holds_at_most_per_client_sessions():
    with serving(per_client=2) as url:
        async def run():
            first, second = await opened(url), await opened(url)
            try:
                with pytest.raises(ConnectionError, match="403"):
                    await adapter.KernelEnvClient(base_url=url).connect()
            finally:
                await first.close()
            third = await opened(url)  # a closed session frees the client's place
            await second.close()
            await third.close()

        asyncio.run(run())


def test_openenv_core_s_mcp_tool_client_lists_and_calls_the_tools(server):
    # echo_env's client is openenv-core's MCPToolClient: list_tools and call_tool are steps over /ws
    # of type list_tools and call_tool (a typed server refused them: 'tool' is required).
    from openenv.core.mcp_client import MCPToolClient

    from d2k_env.tools import TOOLS

    async def run():
        async with MCPToolClient(base_url=server, message_timeout_s=120) as env:
            tools = await env.list_tools()  # before any reset: listing needs no episode
            await env.reset()
            written = await env.call_tool("write_file", path="notes.txt", content="via MCP\n")
            read = await env.call_tool("read_file", path="notes.txt")
            with pytest.raises(RuntimeError, match="no_such_file.py"):
                await env.call_tool("read_file", path="no_such_file.py")
            with pytest.raises(RuntimeError, match="no tool 'no_such_tool'.*tool_not_found"):
                await env.call_tool("no_such_tool")
            return tools, written, read, await env.state()

    tools, written, read, state = asyncio.run(run())
    assert [t.name for t in tools] == list(TOOLS)
    assert tools[2].input_schema["required"] == ["path", "content"]
    assert "notes.txt" in written and "via MCP" in read
    assert state.step_count == 3  # the unknown tool took no step


NO_TIMING = "this server evaluates on the interpreter backend, which does not time kernels"


def test_the_metadata_names_the_backend_and_a_client_can_require_timing(server):
    metadata = httpx.get(f"{server}/metadata", timeout=30).json()
    assert (metadata["backend"], metadata["timed"], metadata["reward"]) == ("interpreter", False, "speedup")
    assert metadata["require_timing"] is False and metadata["default_task"] == TASK and TASK in metadata["tasks"]

    async def run():
        env = await opened(server)
        try:
            with pytest.raises(RuntimeError, match=NO_TIMING):
                await env.reset(require_timing=True)
            with pytest.raises(RuntimeError, match="require_timing must be true or false"):
                await env.reset(require_timing="no")
            return await env.reset(seed=0)  # the session is still usable
        finally:
            await env.close()

    assert asyncio.run(run()).observation.task == TASK


def test_a_server_that_requires_timing_refuses_a_speedup_reward_without_it():
    with serving(require_timing=True) as url:
        assert httpx.get(f"{url}/metadata", timeout=30).json()["require_timing"] is True
        refused = httpx.post(f"{url}/reset", json={}, timeout=30)
        assert refused.status_code == 400 and NO_TIMING in refused.json()["message"]
    with serving(require_timing=True, reward="binary") as url:  # a binary reward needs no timing
        assert httpx.post(f"{url}/reset", json={}, timeout=30).status_code == 200


def test_a_client_s_normal_disconnect_logs_no_traceback():
    # Each disconnect logged a 65-line ASGI traceback: openenv-core closes the session's WebSocket
    # after its client has, and uvicorn raises ClientDisconnected for that close. The server runs as
    # deployed, in its own process with uvicorn's logging; SIGTERM waits for its connections' tasks.
    import os
    import signal
    import subprocess
    import sys

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = subprocess.Popen([sys.executable, "-m", "d2k_env.integrations.openenv", "--port", str(port), "--task",
                               TASK, "--backend", "interpreter", "--jobs", "1", "--max-concurrent-envs", "1"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                httpx.get(f"{url}/health", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.1)

        async def run():
            client = await opened(url)  # closes with OpenEnv's close message
            await client.reset(seed=0)
            await client.close()
            async with websockets.connect(url.replace("http", "ws") + "/ws") as raw:  # drops the connection
                await raw.send(json.dumps({"type": "state", "data": {}}))
                await raw.recv()
            last = await opened(url)  # one session at a time: both earlier ones have ended
            await last.close()

        asyncio.run(run())
    finally:
        server.send_signal(signal.SIGTERM)
        log = server.communicate(timeout=60)[0]
    assert log.count('"WebSocket /ws" [accepted]') >= 3, log  # refused tries are accepted, then refused
    assert "Traceback" not in log and "ERROR" not in log, log


def test_only_a_close_that_finds_the_client_gone_is_quiet():
    from d2k_env.integrations.openenv.guard import _closing_quietly

    async def gone(message):
        raise OSError("the client has gone")  # what ASGI servers raise for a closed connection

    async def broken(message):
        raise RuntimeError("a real fault")

    async def run():
        await _closing_quietly(gone)({"type": "websocket.close", "code": 1000})  # done: nobody to tell
        with pytest.raises(OSError):
            await _closing_quietly(gone)({"type": "websocket.send", "text": "{}"})
        with pytest.raises(RuntimeError, match="a real fault"):
            await _closing_quietly(broken)({"type": "websocket.close", "code": 1000})

    asyncio.run(run())
