"""ChatPolicy through the real ``openai`` client against a local scripted server."""

import json

import openai
import pytest

from d2k_env.agents import ChatPolicy, PolicyError
from d2k_env.agents.openai_chat import ChatPolicyError
from d2k_env.chat_format import ContextPolicy
from d2k_env.tools import parse_action
from mock_openai import MockChatServer


@pytest.fixture
def env_vars(monkeypatch):
    monkeypatch.delenv("D2K_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def turn(body):
    return sum(m["role"] == "assistant" for m in body["messages"])


def scripted(body):
    return [
        {"tool_calls": [("list_files", {}), ("read_file", {"path": "baseline.py"})]},
        {"content": "Let me check.\n<tool_call>{\"name\": \"run_tests\", \"arguments\": {}}</tool_call>"},
        {"content": "done", "reasoning_content": "The tests pass, so submit.", "tool_calls": [("submit", {})]},
    ][turn(body)]


def test_policy_runs_a_conversation_retrying_429_and_500(env_vars):
    with MockChatServer(scripted, faults=[429, 500]) as server:
        policy = ChatPolicy(base_url=server.url, backoff_s=0.01)
        assert policy.model == "mock-kernel-model"  # the server's only model
        actions = [policy("PROMPT"), policy("files"), policy("baseline source"), policy("tests passed")]
        assert policy.last_output == {"content": "done", "reasoning": "The tests pass, so submit.",
                                      "tool_calls": [{"id": "call_5_0", "name": "submit", "arguments": "{}"}]}
        usage = policy.usage
        policy.close()
    assert [parse_action(a).tool for a in actions] == ["list_files", "read_file", "run_tests", "submit"]
    assert server.statuses == [429, 500, 200, 200, 200]
    assert usage.retries == 2 and usage.requests == 3
    assert usage.prompt_tokens == sum(b["prompt_tokens"] for b in server.billed)
    assert usage.completion_tokens == sum(b["completion_tokens"] for b in server.billed)
    last = server.requests[-1]
    assert [f["function"]["name"] for f in last["tools"]][0] == "list_files"
    roles = [m["role"] for m in last["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert last["messages"][4]["content"] == "baseline source" and last["messages"][6]["content"] == "tests passed"
    assert policy.describe()["tool_mode"] == "function" and "test-key" not in json.dumps(policy.describe())


def test_text_mode_sends_no_tools(env_vars):
    with MockChatServer(lambda body: {"content": '```json\n{"tool": "list_files", "args": {}}\n```'}) as server:
        policy = ChatPolicy(base_url=server.url, tool_mode="text", temperature=0.2, max_tokens=64)
        assert parse_action(policy("PROMPT")).tool == "list_files"
        policy("files")
        policy.close()
    assert "tools" not in server.requests[0]
    assert server.requests[0]["temperature"] == 0.2 and server.requests[0]["max_tokens"] == 64
    assert [m["role"] for m in server.requests[1]["messages"]] == ["system", "user", "assistant", "user"]


def test_client_errors_are_not_retried(env_vars):
    with MockChatServer(scripted, faults=[400]) as server:
        policy = ChatPolicy(base_url=server.url, model="m", backoff_s=0.01)
        with pytest.raises(openai.BadRequestError):
            policy("PROMPT")
    assert server.statuses == [400]


def test_persistent_server_errors_give_up_with_a_clear_error(env_vars):
    with MockChatServer(scripted, faults=[503, 503, 503]) as server:
        policy = ChatPolicy(base_url=server.url, model="m", max_retries=2, backoff_s=0.01)
        with pytest.raises(ChatPolicyError, match="still failing after 2 retries"):
            policy("PROMPT")
    assert server.statuses == [503, 503, 503]


def test_long_episodes_send_compacted_context(env_vars):
    with MockChatServer(lambda body: {"tool_calls": [("read_file", {"path": "baseline.py"})]}) as server:
        policy = ChatPolicy(base_url=server.url, model="m", context=ContextPolicy(keep_recent=2, clip_chars=50))
        policy("PROMPT " * 100)
        for i in range(5):
            policy(f"output {i} " + "z" * 500)
    sent = server.requests[-1]["messages"]  # 5 answered turns: the oldest 2 are shortened
    assert sent[1]["content"] == "PROMPT " * 100
    tool_outputs = [m["content"] for m in sent if m["role"] == "tool"]
    assert [("omitted" in t) for t in tool_outputs] == [True, True, False, False, False]
    assert len(policy.conversation.messages[3]["content"]) > 500  # the transcript keeps everything


def test_configuration_errors_are_clear(env_vars, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(PolicyError, match="OPENAI_API_KEY"):
        ChatPolicy(base_url="http://127.0.0.1:9/v1", model="m")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with MockChatServer(scripted) as server:
        monkeypatch.setenv("D2K_MODEL", "from-env")
        assert ChatPolicy(base_url=server.url).model == "from-env"
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.delenv("D2K_MODEL")
        assert ChatPolicy().model == "mock-kernel-model"
