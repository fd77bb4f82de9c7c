"""Function schemas, reply -> action adapters, chat transcripts and context compaction."""

import json
import time

import gymnasium as gym
import pytest

from d2k_env.chat_format import (ContextPolicy, Conversation, ModelReply, ModelToolCall, action_from_tool_call,
                                 actions_from_reply, actions_from_text)
from d2k_env.tools import TOOLS, ActionError, ToolCall, function_schemas, parse_action


def test_one_function_schema_per_tool_with_its_json_schema():
    schemas = function_schemas()
    assert [s["function"]["name"] for s in schemas] == list(TOOLS)
    for s in schemas:
        assert s["type"] == "function"
        params = s["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        assert s["function"]["description"] == TOOLS[s["function"]["name"]].description
    json.dumps(schemas)  # serialisable as sent on the wire


def test_tool_call_becomes_a_valid_action():
    action = action_from_tool_call("read_file", '{"path": "baseline.py", "start": 2}')
    assert parse_action(action) == ToolCall("read_file", {"path": "baseline.py", "start": 2})
    assert parse_action(action_from_tool_call("run_tests", "")) == ToolCall("run_tests", {})
    assert parse_action(action_from_tool_call("list_files", {})) == ToolCall("list_files", {})


def test_tool_call_with_broken_arguments_is_explained_by_the_env():
    action = action_from_tool_call("write_file", '{"path": "solution.py", "content": "unterminated')
    with pytest.raises(ActionError, match="not valid JSON"):
        parse_action(action)


CODE = "import triton\n\ndef forward(x):\n    return {'a': x}\n"


@pytest.mark.parametrize("text, expected", [
    ('{"tool": "list_files", "args": {}}', ToolCall("list_files", {})),
    ('I will look first.\n```json\n{"tool": "read_file", "args": {"path": "baseline.py"}}\n```',
     ToolCall("read_file", {"path": "baseline.py"})),
    ('<tool_call>\n{"name": "read_file", "arguments": {"path": "solution.py"}}\n</tool_call>',
     ToolCall("read_file", {"path": "solution.py"})),
    (f'Here is the code:\n```python\n{CODE}```\nNow:\n```json\n'
     + json.dumps({"tool": "write_file", "args": {"path": "solution.py", "content": CODE}}) + "\n```",
     ToolCall("write_file", {"path": "solution.py", "content": CODE})),
    ('Thinking... then {"name": "submit", "arguments": {}} done', ToolCall("submit", {})),
    ('{"name": "benchmark", "parameters": {"workloads": ["5x200"]}}', ToolCall("benchmark", {"workloads": ["5x200"]})),
])
def test_text_replies_are_parsed(text, expected):
    [action] = actions_from_text(text)
    assert parse_action(action) == expected


THINK_SUBMIT = '<think>Should I just send {"tool": "submit", "args": {}}? No, test first.</think>\n'
LIST = '{"tool": "list_files", "args": {}}'


@pytest.mark.parametrize("text", [
    THINK_SUBMIT + LIST,
    THINK_SUBMIT + "```json\n" + LIST + "\n```",
    # The chat template opened the block in the prompt: the reply holds only its end.
    'Maybe {"tool": "submit", "args": {}} now?</think>\n' + LIST,
    "<THINKING>\n```json\n{\"tool\": \"submit\"}\n```\n</THINKING>" + "<tool_call>" + LIST + "</tool_call>",
])
def test_reasoning_is_never_read_for_calls(text):
    # A call mentioned in the <think> block ran (submit) instead of the one after it.
    [action] = actions_from_text(text)
    assert parse_action(action) == ToolCall("list_files", {})
    assert parse_action(text) == ToolCall("list_files", {})  # the env reads a reply the same way


@pytest.mark.parametrize("wrap", [lambda c: c, lambda c: "```json\n" + c + "\n```", lambda c: THINK_SUBMIT + c,
                                  lambda c: "<tool_call>" + c + "</tool_call>"])
def test_reasoning_tags_inside_a_call_are_data(wrap):
    content = "PROMPT = '<think>' + plan + '</think>'\nOPEN = '<think>'\n"
    call = json.dumps({"tool": "write_file", "args": {"path": "agent.py", "content": content}})
    assert parse_action(wrap(call)) == ToolCall("write_file", {"path": "agent.py", "content": content})


def test_an_unclosed_think_block_hides_the_rest_and_says_so():
    with pytest.raises(ActionError, match=r"never closed.*close it with </think>"):
        parse_action('<think>I will submit: {"tool": "submit", "args": {}}')


SECOND = '{"tool": "read_file", "args": {"path": "baseline.py"}}'


@pytest.mark.parametrize("text, kinds", [
    ("```json\n" + LIST + "\n```\nthen\n```json\n" + SECOND + "\n```", ["```json block on line 1", "```json block on line 5"]),
    (LIST + "\nand then " + SECOND, ["bare JSON object on line 1", "bare JSON object on line 2"]),
    ("<tool_call>" + LIST + "</tool_call>\n<tool_call>" + SECOND + "</tool_call>",
     ["<tool_call> block on line 1", "<tool_call> block on line 2"]),
    ("```json\n" + LIST + "\n```\n" + SECOND, ["```json block on line 1", "bare JSON object on line 4"]),
])
def test_a_reply_with_several_calls_runs_none_and_says_so(text, kinds):
    # The second fenced block or bare object was dropped silently; now no format runs either.
    [action] = actions_from_text(text)
    assert action == text  # passed on for the env to refuse
    with pytest.raises(ActionError) as refused:
        parse_action(text)
    message = str(refused.value)
    assert "holds 2 calls" in message and "None of them ran" in message
    assert all(kind in message for kind in kinds), message
    assert "'list_files'" in message and "'read_file'" in message


@pytest.mark.parametrize("text, where", [
    ('Writing it.\n\n```json\n{"tool": "read_file",\n "args": {"path": "baseline.py",},\n}\n```',
     "the ```json block on line 3 of the reply is not valid JSON: Expecting property name enclosed in double "
     "quotes at line 2, column 33 of its content"),
    ('<tool_call>{"name": "read_file" "arguments": {}}</tool_call>',
     "the <tool_call> block on line 1 of the reply is not valid JSON: Expecting ',' delimiter at line 1, "
     "column 22 of its content"),
    ('Now:\n  {"tool": "list_files", "args": {]}',
     "the bare JSON object on line 2 of the reply is not valid JSON: Expecting property name enclosed in "
     "double quotes at line 1, column 33 of its content"),
])
def test_a_malformed_call_is_reported_where_it_is(text, where):
    # A trailing comma in a fenced block was reported as "Expecting value: line 1 column 1 (char 0)".
    with pytest.raises(ActionError) as refused:
        parse_action(text)
    assert where in str(refused.value)


def test_a_malformed_call_next_to_a_good_one_makes_two():
    text = "```json\n" + LIST + "\n```\n```json\n{\"tool\": \"submit\",}\n```"
    with pytest.raises(ActionError, match=r"holds 2 calls .*a malformed call in the ```json block on line 4"):
        parse_action(text)


def test_code_blocks_and_json_data_hold_no_calls():
    code = "```python\n" + "d = {'k': 1}\n" * 300 + 'EXAMPLE = {"tool": "submit", "args": {}}\n```\n'
    data = '{"plan": [{"tool": "submit", "args": {}}]}\n'
    assert parse_action(code + data + LIST) == ToolCall("list_files", {})


def test_json_that_is_not_a_call_is_left_alone():
    text = 'Config:\n```json\n{"BLOCK": 128}\n```\nSo {"x": 1} and ' + LIST
    assert parse_action(text) == ToolCall("list_files", {})


@pytest.mark.parametrize("text", ["I am not sure what to do next.", "", "```python\nx = {1: 2}\n```",
                                  '{"path": "solution.py"}'])
def test_unparseable_replies_become_a_step_that_explains_the_format(text):
    [action] = actions_from_text(text)
    env = gym.make("D2K/fused_add_rmsnorm-v0", backend="interpreter")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    env.close()
    assert reward == 0 and not terminated and "error" in info
    assert '{"tool": "<name>", "args": {...}}' in obs


def test_function_mode_transcript_answers_every_call_in_order():
    conv = Conversation("function")
    conv.start("PROMPT")
    reply = ModelReply("", (ModelToolCall("c1", "list_files", "{}"),
                            ModelToolCall("c2", "read_file", '{"path": "baseline.py"}')))
    actions = conv.add_reply(reply)
    assert [parse_action(a).tool for a in actions] == ["list_files", "read_file"]
    conv.add_observation("files...")
    conv.add_observation("baseline...")
    conv.add_reply(ModelReply("no tool call here"))
    conv.add_observation("ERROR: not valid JSON")
    roles = [(m["role"], m.get("tool_call_id")) for m in conv.messages]
    assert roles == [("system", None), ("user", None), ("assistant", None), ("tool", "c1"), ("tool", "c2"),
                     ("assistant", None), ("user", None)]
    assert conv.messages[2]["tool_calls"][1]["function"] == {"name": "read_file", "arguments": '{"path": "baseline.py"}'}
    assert "tools" in conv.messages[0]["content"]


def test_text_mode_sends_observations_as_user_messages():
    conv = Conversation("text")
    conv.start("PROMPT")
    [action] = conv.add_reply(ModelReply('```json\n{"tool": "list_files", "args": {}}\n```'))
    conv.add_observation("solution.py (10 bytes)")
    assert parse_action(action).tool == "list_files"
    assert [m["role"] for m in conv.messages] == ["system", "user", "assistant", "user"]
    assert "JSON object" in conv.messages[0]["content"]
    with pytest.raises(ValueError, match="tool_mode"):
        Conversation("xml")


def _long_episode(turns: int, size: int = 5000) -> list[dict]:
    conv = Conversation("function")
    conv.start("P" * size)
    for i in range(turns):
        conv.add_reply(ModelReply(f"turn {i}", (ModelToolCall(f"c{i}", "write_file",
                                                              json.dumps({"path": "solution.py", "content": "x" * size})),)))
        conv.add_observation(f"result {i} " + "o" * size)
    return conv.messages


def test_context_policy_shortens_old_outputs_and_keeps_recent_turns_and_prompt():
    messages = _long_episode(10)
    compact = ContextPolicy(keep_recent=4, clip_chars=300).apply(messages)
    assert len(compact) == len(messages)
    assert compact[1]["content"] == messages[1]["content"]  # the task prompt is never shortened
    assistant = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    # 10 turns, keep 4, the cut moving 4 turns at a time: (10 - 4) // 4 * 4 = 4 old turns
    old, recent = assistant[:4], assistant[4:]
    for i in old:
        args = json.loads(compact[i]["tool_calls"][0]["function"]["arguments"])  # still valid JSON
        assert len(args["content"]) < 400 and "omitted" in args["content"]
        output = compact[i + 1]["content"]
        assert len(output) < 400 and output.startswith(f"result {assistant.index(i)} ")
    for i in recent:
        assert compact[i] == messages[i] and compact[i + 1] == messages[i + 1]
    assert messages[assistant[0] + 1]["content"].endswith("o" * 100)  # the transcript itself is untouched


def test_context_policy_cut_moves_in_blocks_so_the_prefix_is_stable():
    policy = ContextPolicy(keep_recent=3, clip_chars=100)
    shortened = []
    for turns in range(1, 12):
        compact = policy.apply(_long_episode(turns, 500))
        shortened.append(sum(1 for m in compact if m["role"] == "tool" and "omitted" in m["content"]))
    assert shortened == [0, 0, 0, 0, 0, 3, 3, 3, 6, 6, 6]
    assert ContextPolicy(keep_recent=None).apply(_long_episode(20, 100)) == _long_episode(20, 100)
    with pytest.raises(ValueError):
        ContextPolicy(keep_recent=0)


def test_reply_without_tool_calls_is_parsed_as_text():
    reply = ModelReply('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
    assert [parse_action(a).tool for a in actions_from_reply(reply)] == ["submit"]


def test_the_env_runs_the_call_after_the_reasoning_not_the_one_in_it():
    env = gym.make("D2K/fused_add_rmsnorm-v0", backend="interpreter")
    env.reset(seed=0)
    try:
        obs, reward, terminated, truncated, info = env.step(
            '<think>Should I just send {"tool": "submit", "args": {}}? No, test first.</think> ' + LIST)
        assert info["tool"] == "list_files" and "solution.py" in obs and not terminated
        obs, reward, terminated, truncated, info = env.step("```json\n" + LIST + "\n```\n```json\n" + SECOND + "\n```")
        assert obs.startswith("ERROR: the reply holds 2 calls") and "tool" not in info and info["steps"] == 2
    finally:
        env.close()


@pytest.mark.parametrize("text", [
    "```\n{}\n```\n" * 40_000, "<tool_call>" * 40_000, "<think>" * 60_000, "```python\n" + "{" * 400_000 + "\n```",
    ("```json\n" + LIST + "\n```\n") * 10_000,
], ids=["empty-fences", "unclosed-tool-calls", "unclosed-thinks", "braces-in-code", "many-calls"])
def test_pathological_replies_are_answered_in_linear_time(text):
    # Each block once looked up in every block before it, and each unclosed <tool_call> rescanned the
    # rest of the reply: 40,000 of them took minutes. Linear, each of these takes well under a second.
    started = time.perf_counter()
    with pytest.raises(ActionError) as refused:
        parse_action(text)
    assert time.perf_counter() - started < 10 and len(str(refused.value)) < 2_000
