"""A scripted OpenAI-compatible chat server for tests: stdlib ``http.server`` in a thread.

``GET /v1/models`` lists one model; ``POST /v1/chat/completions`` answers with what ``script``
returns for the request (an assistant message: ``content`` and/or ``tool_calls`` as
``(name, arguments dict)`` pairs, optionally ``reasoning_content``). Like a real server it rejects a conversation whose tool calls
are not all answered (400). ``faults`` is a queue of HTTP statuses (429, 500, ...) served, in order,
instead of the next completions. Token usage is a deterministic function of the text, recorded per
response in ``billed``. A request with ``"stream": true`` gets the same completion as server-sent
events: one chunk holding the whole message, the usage, then ``[DONE]``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def conversation_errors(messages: list[dict]) -> str | None:
    """Why a chat transcript is malformed (an unanswered or unknown tool call), else None."""
    pending: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            if not pending or m.get("tool_call_id") != pending[0]:
                return f"tool message answers {m.get('tool_call_id')!r}, expected {pending[:1]}"
            pending.pop(0)
        elif pending:
            return f"tool calls {pending} were not answered before a {m['role']} message"
        if m["role"] == "assistant":
            pending = [c["id"] for c in m.get("tool_calls") or []]
    return None


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


class MockChatServer:
    def __init__(self, script: Callable[[dict], dict], faults: list[int] | None = None, model: str = "mock-kernel-model"):
        self.script, self.faults, self.model = script, list(faults or []), model
        self.requests: list[dict] = []  # every chat request body, faulted ones included
        self.statuses: list[int] = []
        self.billed: list[dict] = []  # {"first_user": ..., "assistant_turns": ..., "prompt_tokens": ..., ...}
        self.lock = threading.Lock()
        self.in_flight = 0
        self.last_request = time.monotonic()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "MockChatServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_idle(self, quiet_s: float = 1.0, timeout_s: float = 60.0) -> None:
        """Until no request is being served and none arrived for ``quiet_s`` (a killed client's last
        requests may still be in the server's hands)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if not self.in_flight and time.monotonic() - self.last_request > quiet_s:
                    return
            time.sleep(0.05)
        raise TimeoutError("the mock server never became idle")

    def _complete(self, body: dict) -> tuple[int, dict, dict]:
        with self.lock:
            self.requests.append(body)
            if self.faults:
                status = self.faults.pop(0)
                self.statuses.append(status)
                headers = {"Retry-After": "0"} if status == 429 else {}
                return status, {"error": {"message": f"injected {status}", "type": "test_fault"}}, headers
        problem = conversation_errors(body["messages"])
        if problem:
            with self.lock:
                self.statuses.append(400)
            return 400, {"error": {"message": problem, "type": "invalid_request_error"}}, {}
        reply = self.script(body)
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        if "reasoning_content" in reply:  # as vLLM's reasoning parsers return it
            message["reasoning_content"] = reply["reasoning_content"]
        calls = reply.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [{"id": f"call_{len(self.requests)}_{i}", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}
                                     for i, (name, args) in enumerate(calls)]
        prompt = tokens(json.dumps(body["messages"]))
        completion = tokens(json.dumps(message))
        with self.lock:
            self.statuses.append(200)
            self.billed.append({"first_user": body["messages"][1]["content"],
                                "assistant_turns": sum(m["role"] == "assistant" for m in body["messages"]),
                                "prompt_tokens": prompt, "completion_tokens": completion})
        return 200, {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
                     "model": body["model"],
                     "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                               "total_tokens": prompt + completion}}, {}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was killed: nobody to answer

            def _stream(self, payload: dict) -> None:
                """``payload`` (a chat completion) as one streamed chunk, as clients that stream read it."""
                choice = payload["choices"][0]
                delta = dict(choice["message"])
                if "tool_calls" in delta:
                    delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(delta["tool_calls"])]
                chunk = {**{k: v for k, v in payload.items() if k != "choices"}, "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}]}
                data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model", "created": 0,
                                                                 "owned_by": "tests"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "not found"}})
                    return
                if self.headers.get("Authorization", "") != "Bearer test-key":
                    self._send(401, {"error": {"message": "bad key", "type": "auth"}})
                    return
                with server.lock:
                    server.in_flight += 1
                    server.last_request = time.monotonic()
                try:
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    status, payload, headers = server._complete(body)
                    if status == 200 and body.get("stream"):
                        self._stream(payload)
                    else:
                        self._send(status, payload, headers)
                finally:
                    with server.lock:
                        server.in_flight -= 1
                        server.last_request = time.monotonic()

        return Handler
