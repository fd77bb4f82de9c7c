"""Property-based fuzzing of ``KernelEnv.step()`` (interpreter backend, no GPU needed).

For every generated action (random text, non-ASCII and surrogates, huge payloads, deep JSON,
schema-shaped calls with wrong types / extra / missing keys, odd dict actions, path tricks):

- ``step()`` returns normally a 5-tuple; the observation lies in ``observation_space``; the reward
  is the float 0.0 (no submit is ever generated); ``info`` is a dict (with ``"error"`` whenever
  the observation starts with ``ERROR:``) and has no ``"evaluation"`` unless the action really
  was an evaluation;
- afterwards the env still works: ``list_files`` lists solution.py and baseline.py, baseline.py
  still holds the task's baseline, solution.py is a regular file, and nothing was created
  outside the workspace (a canary directory that planted symlinks and ``../``/absolute paths aim
  at stays empty, the episode directory holds only the workspace, and a marker file name used in
  the path tricks never appears next to the workspace, in /tmp, in / or in HOME).

Evaluation tools are kept out of the random stream (``would_evaluate`` filters them), except for
invalid ``benchmark``/``profile``/``run_tests``/``submit`` arguments, which must be rejected before
anything runs, and a few fixed cases at the end.

The bugs this file found are kept as regression tests at the end.

One env serves the module (``gym.make`` with the usual wrappers, the 350-step limit lifted,
since ``reset()`` takes about a second on CPU); before every example the workspace is cleaned,
the symlinks re-planted and solution.py rewritten.

Deterministic: every ``@given`` runs with ``derandomize=True`` and no example database.
``D2K_FUZZ_SCALE=10 pytest tests/test_fuzz.py`` fuzzes ten times longer locally.
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import d2k_env
from conftest import call
from d2k_env.env import SOLUTION_STUB
from d2k_env.task import load_task
from d2k_env.tools import MAX_ACTION_CHARS, TOOLS, parse_action
from d2k_env.workspace import MAX_FILE_BYTES

TASK_ID = "fused_add_rmsnorm"
TASK = load_task(TASK_ID)
BASELINE_SOURCE = TASK.baseline_path.read_text()
CORRECT_SOLUTION = (Path(__file__).parent / "solutions" / "correct" / "fused_add_rmsnorm_chunked.py").read_text()
SMOKE_NAMES = sorted(w.name for w in TASK.smoke_workloads)  # the workloads the interpreter backend accepts
GPU_NAMES = sorted(w.name for w in TASK.workloads)  # valid on a GPU, unknown here
EVAL_TOOLS = ("run_tests", "benchmark", "profile", "submit")
FILE_TOOLS = ("read_file", "write_file", "str_replace")
ESCAPE_NAME = "d2k-fuzz-escape.py"  # a marker file name the path tricks try to create outside the workspace
INT_LIMIT = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # 4300 on CPython >= 3.11; 0 = no limit
SCALE = float(os.environ.get("D2K_FUZZ_SCALE", "1"))
RECORDED_CHARS_LIMIT = 40_000_000


def fuzz_settings(max_examples: int):
    return settings(max_examples=max(1, int(max_examples * SCALE)), derandomize=True, database=None,
                    deadline=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])


def _note(text: str) -> None:
    try:
        note(text)
    except Exception:  # outside a @given test
        pass


def _short(obj: Any, limit: int = 300) -> str:
    try:
        text = repr(obj)
    except Exception as exc:  # deep or huge values
        return f"<unprintable {type(obj).__name__}: {type(exc).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


# ---------------------------------------------------------------------------------------------
# Action specs: strategies build small descriptions; big/deep/path-dependent values are built at
# step time (hypothesis never generates megabytes char by char, and failures print compactly).
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Huge:
    unit: str
    n: int

    def build(self, h):
        return self.unit * self.n

    def __repr__(self):
        return f"Huge({self.unit!r} * {self.n})"


@dataclass(frozen=True)
class BigInt:
    digits: int
    negative: bool = False

    def build(self, h):
        value = 10 ** (self.digits - 1)
        return -value if self.negative else value

    def __repr__(self):
        return f"BigInt({'-' if self.negative else ''}{self.digits} digits)"


@dataclass(frozen=True)
class Deep:
    """Python nesting (list, dict or tuple) ``depth`` levels deep."""
    kind: str
    depth: int

    def build(self, h):
        return nest(self.kind, self.depth)


def nest(kind: str, depth: int) -> Any:
    """``depth`` levels of list, dict or tuple (the cyclic GC is paused: with torch loaded, the
    collections that 10^4 fresh containers trigger cost seconds)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        value: Any = "leaf"
        for _ in range(depth):
            value = [value] if kind == "list" else {"k": value} if kind == "dict" else (value,)
        return value
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class Ph:
    """A path placeholder resolved against the live workspace and canary."""
    name: str

    def build(self, h):
        return h.placeholder(self.name)


@dataclass(frozen=True)
class Cat:
    """String concatenation of rendered parts."""
    parts: tuple

    def build(self, h):
        return "".join(render(p, h) for p in self.parts)


@dataclass(frozen=True)
class Wire:
    """An action object and how it is sent: as a dict, as JSON text, or as raw text."""
    obj: Any
    mode: str  # "dict", "json", "json_ascii", "raw"


SPECS = (Huge, BigInt, Deep, Ph, Cat)


def render(obj: Any, h) -> Any:
    if isinstance(obj, SPECS):
        return obj.build(h)
    if isinstance(obj, list):
        return [render(x, h) for x in obj]
    if isinstance(obj, tuple):
        return tuple(render(x, h) for x in obj)
    if isinstance(obj, dict):
        return {render(k, h): render(v, h) for k, v in obj.items()}
    return obj


def to_action(wire: Wire, h) -> Any:
    obj = render(wire.obj, h)
    if wire.mode in ("dict", "raw"):
        return obj
    try:
        return json.dumps(obj, ensure_ascii=wire.mode == "json_ascii")
    except (TypeError, ValueError, RecursionError):  # tuple keys, bytes, deep or huge ints: send the dict
        return obj


def tool_of(action: Any) -> str | None:
    try:
        return parse_action(action).tool
    except Exception:
        return None


def would_evaluate(action: Any) -> bool:
    """True when the env would run an evaluation for this action (those are kept out of the stream)."""
    try:
        tc = parse_action(action)
    except Exception:
        return False
    if tc.tool == "benchmark":
        return all(w in SMOKE_NAMES for w in tc.args.get("workloads") or [])
    if tc.tool == "profile":
        return tc.args["workload"] in SMOKE_NAMES
    return tc.tool in EVAL_TOOLS


# ---------------------------------------------------------------------------------------------
# The harness: one env for the module, a canary directory, planted symlinks, invariant checks.
# ---------------------------------------------------------------------------------------------

LIST_BASELINE = re.compile(r"^baseline\.py  \(\d+ bytes\)  \[read-only\]$", re.M)
LIST_SOLUTION = re.compile(r"^solution\.py  \(\d+ bytes\)$", re.M)


class Harness:
    KEEP = ("baseline.py", "solution.py")

    def __init__(self, env, canary: Path):
        self.env = env
        self.canary = canary
        self.recorded_chars = 0
        self.terminated = False
        self.reset()

    @property
    def ws(self) -> Path:
        return self.env.unwrapped.workspace.root

    def links(self) -> dict[str, str]:
        """Symlinks planted in the workspace (an agent cannot make these; a solution process could)."""
        return {
            "canary_dir": str(self.canary),
            "canary_rel": os.path.relpath(self.canary, self.ws),
            "canary_file.py": str(self.canary / "via_link.py"),  # dangling
            "up": "..",
            "root_link": "/",
            "ws_abs_link": str(self.ws),
            "loop": "loop",
            "bl_link": "baseline.py",
            "sol_link": "solution.py",
        }

    def placeholder(self, name: str) -> str:
        return {
            "abs_canary": str(self.canary / ESCAPE_NAME),
            "rel_canary": os.path.relpath(self.canary / ESCAPE_NAME, self.ws),
            "deep_up": "../" * 40 + str(self.canary / ESCAPE_NAME).lstrip("/"),
            "abs_ws": str(self.ws / ESCAPE_NAME),
            "parent": "../" + ESCAPE_NAME,
            "tmp": "../../" + ESCAPE_NAME,
        }[name]

    def reset(self) -> None:
        self.env.reset(seed=0)
        self.recorded_chars = 0
        self.terminated = False
        self.plant()

    def plant(self) -> None:
        for name, target in self.links().items():
            p = self.ws / name
            if p.is_symlink() and os.readlink(p) == target:
                continue
            _remove(p)
            os.symlink(target, p)

    def prepare(self, solution: str = SOLUTION_STUB) -> None:
        """A known state: clean workspace with the planted links, empty canary, solution.py written."""
        ws = self.ws
        # The env records every action of the episode (for replay): start a new episode once the huge
        # payloads have piled up, to keep this module's memory bounded.
        if (self.terminated or self.recorded_chars > RECORDED_CHARS_LIMIT or (ws / "baseline.py").is_symlink()
                or not (ws / "baseline.py").is_file() or (ws / "baseline.py").read_text() != BASELINE_SOURCE):
            self.reset()
            ws = self.ws
        links = self.links()
        for entry in ws.iterdir():
            if entry.name in self.KEEP and not entry.is_symlink():
                continue
            if entry.name in links and entry.is_symlink() and os.readlink(entry) == links[entry.name]:
                continue
            _remove(entry)
        self.plant()
        for entry in self.canary.iterdir():
            _remove(entry)
        obs, *_ = self.raw_step(call("write_file", path="solution.py", content=solution))
        assert obs.startswith("Wrote "), obs

    def raw_step(self, action):
        self.recorded_chars += _approx_chars(action)
        out = self.env.step(action)
        self.terminated = self.terminated or out[2]
        return out

    def checked_step(self, action, *, evaluating: bool = False):
        """One fuzzed step with every property checked."""
        _note(f"action: {_short(action)}")
        t0 = time.perf_counter()
        out = self.raw_step(action)
        elapsed = time.perf_counter() - t0
        assert isinstance(out, tuple) and len(out) == 5, _short(out)
        obs, reward, terminated, truncated, info = out
        assert isinstance(obs, str) and self.env.observation_space.contains(obs), _short(obs)
        assert isinstance(reward, float), type(reward)
        assert isinstance(info, dict), type(info)
        is_submit = tool_of(action) == "submit"
        if not is_submit:
            assert reward == 0.0 and terminated is False, (reward, terminated)
        assert truncated is False
        if obs.startswith("ERROR:"):
            assert "error" in info and isinstance(info["error"], str), info
        if not evaluating:
            assert "evaluation" not in info, "an evaluation ran for an action that is not one"
        self.check_invariants()
        return obs, reward, terminated, truncated, info, elapsed

    def check_invariants(self) -> None:
        ws = self.ws
        baseline = ws / "baseline.py"
        assert not baseline.is_symlink() and baseline.read_text() == BASELINE_SOURCE, "baseline.py was changed"
        assert (ws / "solution.py").is_file() and not (ws / "solution.py").is_symlink(), "solution.py is gone"
        assert list(self.canary.iterdir()) == [], f"written outside the workspace: {list(self.canary.iterdir())}"
        assert set(os.listdir(ws.parent)) <= {"workspace", "triton-cache"}, os.listdir(ws.parent)
        for where in (ws.parent, ws.parent.parent, self.canary.parent, Path("/"), Path.home()):
            assert not (where / ESCAPE_NAME).exists(), f"written outside the workspace: {where / ESCAPE_NAME}"
        if self.terminated:
            return
        obs, reward, terminated, truncated, info = self.raw_step(call("list_files"))
        assert LIST_BASELINE.search(obs) and LIST_SOLUTION.search(obs), obs[:2000]
        assert reward == 0.0 and not terminated and "error" not in info
        obs, *_ = self.raw_step(call("read_file", path="baseline.py"))
        assert obs.startswith("baseline.py, lines 1-"), obs[:500]


def _approx_chars(action: Any) -> int:
    if isinstance(action, (str, bytes)):
        return len(action)
    total, stack, seen = 0, [action], 0
    while stack and seen < 10_000:
        v = stack.pop()
        seen += 1
        if isinstance(v, (str, bytes)):
            total += len(v)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(x for kv in v.items() for x in kv)
    return total


def _remove(p: Path) -> None:
    if p.is_symlink() or p.is_file():
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)
    elif os.path.lexists(p):
        os.unlink(p)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    # The whole wrapper stack agents get, but with the 350-step TimeLimit lifted: one episode serves
    # the module, because reset() is slow on CPU (~1 s: the prompt builds every workload's inputs).
    env = gym.make(d2k_env.env_id(TASK_ID), backend="interpreter", max_steps=10**9, max_episode_steps=10**9)
    h = Harness(env, tmp_path_factory.mktemp("canary"))
    yield h
    env.close()


@pytest.fixture
def h(harness):
    harness.prepare()
    return harness


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------

ANY_CHAR = st.one_of(  # every code point, lone surrogates and a few troublemakers made common
    st.characters(exclude_categories=()), st.characters(categories=["Cs"]),
    st.sampled_from(["\x00", "\r", "\n", "\t", "\x1b", "\x7f", "\u2028", "\ufeff", "\ufffd", "\U0001F600", "/", "\\",
                     '"', ".", "~"]),
)
full_text = st.lists(ANY_CHAR, max_size=40).map("".join)  # lists, not st.text: keeps the one_of weights
short_text = st.lists(ANY_CHAR, max_size=10).map("".join)
wires = st.sampled_from(["dict", "json", "json_ascii"])

big_ints = st.builds(BigInt, st.sampled_from([20, 400, INT_LIMIT or 5000, (INT_LIMIT or 5000) + 1, 5000]),
                     st.booleans())
odd_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), short_text, st.binary(max_size=8),
                        st.sampled_from(["", "solution.py", "baseline.py", "list_files", "submit", "args", "tool"]))
odd_keys = st.one_of(
    st.sampled_from(["tool", "args", "path", "content", "start", "end", "old", "new", "workloads", "workload",
                     "", " tool", "TOOL", "__proto__", "__class__", "constructor"]),
    short_text, st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.tuples(st.integers(), short_text), big_ints,
)
odd_values = st.recursive(
    st.one_of(odd_scalars, big_ints),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(odd_keys, inner, max_size=4)),
    max_leaves=10,
)

LINK_NAMES = ["canary_dir", "canary_rel", "canary_file.py", "up", "root_link", "ws_abs_link", "loop", "bl_link",
              "sol_link"]
PATH_FRAGMENTS = [
    "..", ".", "", "~", "~root", "...", "....", "solution.py", "baseline.py", "BASELINE.PY", "Baseline.py",
    "baseline.py ", " baseline.py", "baseline.py.", "baseline.py\x00", "baseline.py\x00.txt", ".solution.py.tmp",
    ".baseline.py.tmp", "sub", "workspace", "triton-cache", "tmp", "etc", "passwd", ESCAPE_NAME,
    "\u2025", "\uff0e\uff0e", "\u2024\u2024", "..\u200b", "\u202e..", "\u2026", "e\u0301", "\u00e9", "\u0130",
    "baseline\u2024py", "basel\u0131ne.py", "\udcff", "\udc80..", "\ud800", "\x00", "\t", "\n", " ", "C:",
    "\\\\?\\C:", "%2e%2e", "..%2f", "%00", "$HOME", "${HOME}", "*", "?", "con", "nul", "\u0000..",
] + LINK_NAMES
path_parts = st.one_of(
    st.sampled_from(PATH_FRAGMENTS),
    st.sampled_from(PATH_FRAGMENTS),
    st.builds(Ph, st.sampled_from(["abs_canary", "rel_canary", "deep_up", "abs_ws", "parent", "tmp"])),
    short_text,
    st.builds(Huge, st.sampled_from(["a", "\u00e9", "\U0001F600", "\udcff"]),  # names near the 255-byte limit
              st.sampled_from([60, 62, 63, 64, 84, 250, 251, 256, 1000])),
)
path_seps = st.sampled_from(["/", "/", "//", "\\", "/./", "/../", "\u2215", "\uff0f", "\x00"])
path_prefixes = st.sampled_from(["", "", "", "/", "./", "~/", "\\", "//", "../", "../../", "file://", "C:\\", " "])


@st.composite
def paths(draw):
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(full_text)
    if kind == 1:
        return draw(st.sampled_from(["", " ", "\t\n", ".", "./", "..", "/", "//", "~", "\x00", "solution.py\x00",
                                     "\\", "C:\\Windows\\win.ini", "/etc/passwd", "/proc/self/environ"]))
    if kind == 2:
        prefix = draw(st.builds(Huge, st.sampled_from(["a/", "../", "./", "sub/", "up/", "loop/"]),
                                st.sampled_from([10, 100, 1000, 2100])))
        return Cat((prefix, draw(st.sampled_from(["x.py", ESCAPE_NAME]))))
    parts = draw(st.lists(path_parts, min_size=1, max_size=5))
    seps = draw(st.lists(path_seps, min_size=len(parts) - 1, max_size=len(parts) - 1))
    out: list = [draw(path_prefixes)]
    for i, part in enumerate(parts):
        if i:
            out.append(seps[i - 1])
        out.append(part)
    return Cat(tuple(out))


@st.composite
def path_calls(draw):
    tool = draw(st.sampled_from(FILE_TOOLS))
    args: dict[str, Any] = {"path": draw(paths())}
    if tool == "read_file":
        for key in ("start", "end"):
            if draw(st.booleans()):
                args[key] = draw(st.integers(1, 10**6))
    elif tool == "write_file":
        args["content"] = draw(st.one_of(st.just("pwned"), full_text))
    else:
        args["old"] = draw(st.sampled_from(["import torch", "def forward", "raise NotImplementedError", "x"]))
        args["new"] = draw(st.one_of(st.just("PWNED"), short_text))
    return Wire({"tool": tool, "args": args}, draw(wires))


def _right_value(draw, tool: str, key: str, prop: dict):
    kind = prop["type"]
    if key == "path":
        return draw(paths())
    if kind == "string" and key == "workload":
        return draw(unknown_workloads)
    if kind == "string":
        return draw(st.one_of(full_text, st.sampled_from(["import torch", "def forward", ""])))
    if kind == "integer":
        return draw(st.one_of(st.integers(-3, 400), st.integers(), big_ints))
    if kind == "array":
        return draw(st.lists(unknown_workloads, min_size=1, max_size=3)) + draw(
            st.lists(st.sampled_from(SMOKE_NAMES), max_size=2))
    raise AssertionError(kind)


_PY_TYPES = {"string": str, "integer": int, "array": list, "object": dict}


def _wrong_value(draw, prop: dict):
    expected = _PY_TYPES[prop["type"]]
    return draw(odd_values.filter(lambda v: not isinstance(v, expected) or isinstance(v, bool)))


unknown_workloads = st.one_of(
    st.sampled_from(GPU_NAMES + [n.upper() for n in SMOKE_NAMES] + [" " + n for n in SMOKE_NAMES]
                    + [n + "\x00" for n in SMOKE_NAMES] + ["", "all", "*", "../" + SMOKE_NAMES[0], "\u2603"]),
    full_text,
).filter(lambda n: n not in SMOKE_NAMES)


@st.composite
def schema_calls(draw):
    """Calls shaped by d2k_env.tools.TOOLS: each argument right-typed, wrong-typed or missing, plus
    extra keys; calls to evaluation tools are always made invalid."""
    name = draw(st.sampled_from(sorted(TOOLS)))
    tool = TOOLS[name]
    args: dict[Any, Any] = {}
    for key, prop in tool.properties.items():
        mode = draw(st.sampled_from(["right", "right", "wrong", "missing"]))
        if mode == "right":
            args[key] = _right_value(draw, name, key, prop)
        elif mode == "wrong":
            args[key] = _wrong_value(draw, prop)
    extra = draw(st.dictionaries(st.one_of(short_text, st.sampled_from(["path", "content", "workloads", "x"])),
                                 odd_values, max_size=2))
    for k, v in extra.items():
        if k not in tool.properties:
            args[k] = v
    if name in ("run_tests", "submit") and not args:
        args[draw(st.sampled_from(["workloads", "seed", "x", "path", ""]))] = draw(odd_values)
    shape = draw(st.sampled_from(["args", "args", "args", "no_args", "args_not_object", "extra_top"]))
    obj: dict[Any, Any] = {"tool": name}
    if shape in ("args", "extra_top"):
        obj["args"] = args
    if shape == "args_not_object":
        obj["args"] = draw(st.one_of(st.lists(odd_scalars, max_size=3), short_text, st.integers(), st.booleans()))
    if shape == "extra_top":
        obj[draw(st.sampled_from(["tool_args", "arguments", "name", "", "ARGS"]))] = draw(odd_values)
    return Wire(obj, draw(wires))


@st.composite
def odd_dict_actions(draw):
    kind = draw(st.integers(0, 4))
    if kind == 0:
        obj = draw(st.dictionaries(odd_keys, odd_values, max_size=5))
    elif kind == 1:
        obj = {"tool": draw(odd_values)}
        if draw(st.booleans()):
            obj["args"] = draw(odd_values)
    elif kind == 2:
        obj = {"tool": draw(st.sampled_from(["list_files", *FILE_TOOLS])), "args": draw(odd_values)}
    elif kind == 3:
        obj = {"tool": draw(st.sampled_from(["list_files", *FILE_TOOLS])),
               "args": draw(st.dictionaries(odd_keys, odd_values, min_size=1, max_size=4))}
    else:
        obj = draw(odd_values)  # not a dict at all
    return Wire(obj, draw(st.sampled_from(["dict", "dict", "json", "json_ascii"])))


VALID_NON_EVAL = [
    {"tool": "list_files", "args": {}},
    {"tool": "read_file", "args": {"path": "baseline.py", "start": 2, "end": 4}},
    {"tool": "write_file", "args": {"path": "solution.py", "content": "import torch\n"}},
    {"tool": "str_replace", "args": {"path": "solution.py", "old": "import torch", "new": "import triton"}},
]
TRICKY_TEXT = [
    "", " ", "\x00", "null", "true", "0", "-0", "1e999", "NaN", "-Infinity", '"tool"', "[]", "{}", "{", "}",
    '{"tool": null}', '{"tool": "list_files", "args": []}', '{"tool": "list_files", "args": "x"}',
    '{"tool": "list_files", "args": null}', '{"tool": "list_files"} trailing', '{"tool": "list_files"}{"tool": 1}',
    '\ufeff{"tool": "list_files"}', '{"tool": "list_files", "tool": "read_file"}', '{"tool": "LIST_FILES"}',
    '{"tool": "list_files\\u0000"}', '{"tool": " list_files"}', '{"tool": "_tool_list_files"}',
    '{"tool": "__init__"}', '{"tool": "__class__"}', "{'tool': 'list_files'}",
    '```json\n{"tool": "list_files", "args": {}}\n```',
    '<tool_call>{"name": "list_files", "arguments": {}}</tool_call>',
    '{"tool": "read_file", "args": {"path": "solution.py", "start": 1.0}}',
    '{"tool": "read_file", "args": {"path": "solution.py", "start": 1e3}}',
    '{"tool": "read_file", "args": {"path": "solution.py", "start": true}}',
    '{"tool": "read_file", "args": {"path": "solution.py", "start": -1}}',
    '{"tool": "read_file", "args": {"path": "solution.py", "start": 3, "end": 2}}',
    '{"tool": "read_file", "args": {"path": "solution.py", "end": 99999999999999999999999}}',
    '{"tool": "read_file", "args": {"path": "\\ud800"}}', '{"tool": "read_file", "args": {"path": "\\udcff"}}',
    '{"tool": "write_file", "args": {"path": "solution.py", "content": "x"}, '
    '"args": {"path": "baseline.py", "content": "pwned"}}',
    '{"tool": "write_file", "args": {"path": "baseline.py", "path": "x.py", "content": "x"}}',
    '{"tool": "write_file", "args": {"path": "x.py", "path": "baseline.py", "content": "pwned"}}',
    '{"tool": "str_replace", "args": {"path": "baseline.py", "old": "def", "new": "pwned"}}',
    '{"tool": "write_file", "args": {"path": "solution.py", "content": "\\ud800\\udfff\\u0000"}}',
    '{"tool": "profile", "args": {"workload": null}}', '{"tool": "benchmark", "args": {"workloads": null}}',
    '{"tool": "benchmark", "args": {"workloads": "%s"}}' % SMOKE_NAMES[0],
    '{"tool": "benchmark", "args": {"workloads": [["%s"]]}}' % SMOKE_NAMES[0],
    '{"tool": "submit", "args": {"force": true}}', '{"tool": "run_tests", "args": [1]}',
    '{"tool": "run_tests", "args": "all"}', '{"tool": "submit", "args": 0}',
]


@st.composite
def mutated_calls(draw):
    text = json.dumps(draw(st.sampled_from(VALID_NON_EVAL)), ensure_ascii=draw(st.booleans()))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "truncate", "swap_quotes"]))
        i = draw(st.integers(0, max(len(text) - 1, 0)))
        if op == "insert":
            text = text[:i] + draw(short_text) + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 5)):]
        elif op == "replace":
            text = text[:i] + draw(st.sampled_from(list('{}[]":,\\ 0-9ntf\x00\ud800'))) + text[i + 1:]
        elif op == "truncate":
            text = text[:i]
        else:
            text = text.replace('"', "'")
    return text


json_tokens = st.sampled_from(list('{}[]":,\\ \n\t0123456789-+.eE')
                              + ["true", "false", "null", '"tool"', '"args"', '"path"', "\\u0000", "\\ud800",
                                 '"list_files"'])
raw_texts = st.one_of(
    full_text,
    st.lists(ANY_CHAR, max_size=400).map("".join),
    st.lists(json_tokens, max_size=40).map("".join),
    st.sampled_from(TRICKY_TEXT),
    mutated_calls(),
).map(lambda t: Wire(t, "raw"))


@st.composite
def huge_actions(draw):
    unit = draw(st.sampled_from(["x", "x", "\u00e9", "\u2603", "\U0001F600", "\udcff", "\ud800", "\x00", "\\", '"',
                                 "\r\n", "{", "["]))
    n = draw(st.sampled_from([300_000, 999_999, 1_000_001, 1_999_999, 2_000_001, 3_500_000])) // len(unit)
    if unit not in ("x", "{", "[", "\\", '"'):
        n = min(n, 1_100_000)  # escaping non-ASCII for the observation costs ~0.5 s per million characters
    big = Huge(unit, n)
    where = draw(st.sampled_from(["raw", "content", "content_new_file", "path", "tool", "arg_key", "top_key", "old",
                                  "new", "workload", "workloads_item", "start_digits"]))
    if where == "raw":
        return Wire(big, "raw")
    if where == "start_digits":
        digits = Huge("9", draw(st.sampled_from([4000, 5000, 300_000])))
        return Wire(Cat(('{"tool": "read_file", "args": {"path": "solution.py", "start": ', digits, "}}")), "raw")
    obj = {
        "content": {"tool": "write_file", "args": {"path": "solution.py", "content": big}},
        "content_new_file": {"tool": "write_file", "args": {"path": "big.py", "content": big}},
        "path": {"tool": "read_file", "args": {"path": big}},
        "tool": {"tool": big},
        "arg_key": {"tool": "list_files", "args": {big: 1}},
        "top_key": {"tool": "list_files", big: 1},
        "old": {"tool": "str_replace", "args": {"path": "solution.py", "old": big, "new": "x"}},
        "new": {"tool": "str_replace", "args": {"path": "solution.py", "old": "import torch", "new": big}},
        "workload": {"tool": "profile", "args": {"workload": big}},
        "workloads_item": {"tool": "benchmark", "args": {"workloads": [SMOKE_NAMES[0], big]}},
    }[where]
    return Wire(obj, draw(wires))


@st.composite
def deep_actions(draw):
    if draw(st.booleans()):  # deep JSON text
        depth = draw(st.sampled_from([100, 500, 900, 980, 1000, 2_000, 10_000, 100_000, 600_000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}"), ('[{"a":', "}]"), ('{"tool":', "}")]))
        body = Cat((Huge(opener, depth), "0", Huge(closer, depth if draw(st.booleans()) else depth // 2)))
        where = draw(st.sampled_from(["bare", "tool", "args", "path", "content", "extra_arg", "workloads"]))
        template = {
            "bare": ("", ""),
            "tool": ('{"tool": ', "}"),
            "args": ('{"tool": "list_files", "args": ', "}"),
            "path": ('{"tool": "read_file", "args": {"path": ', "}}"),
            "content": ('{"tool": "write_file", "args": {"path": "solution.py", "content": ', "}}"),
            "extra_arg": ('{"tool": "read_file", "args": {"path": "solution.py", "x": ', "}}"),
            "workloads": ('{"tool": "benchmark", "args": {"workloads": ', "}}"),
        }[where]
        return Wire(Cat((template[0], body, template[1])), "raw")
    kind = draw(st.sampled_from(["list", "dict", "tuple"]))
    deep = Deep(kind, draw(st.sampled_from([10, 100, 150, 1_000, 5_000, 20_000])))
    deep_key = Deep("tuple", deep.depth)
    obj = draw(st.sampled_from([
        {"tool": deep}, {"tool": "list_files", "args": deep}, {"tool": "read_file", "args": {"path": deep}},
        {"tool": "write_file", "args": {"path": "solution.py", "content": deep}},
        {"tool": "read_file", "args": {"path": "solution.py", "start": deep}},
        {"tool": "benchmark", "args": {"workloads": deep}}, {"tool": "profile", "args": {"workload": deep}},
        {"tool": "list_files", deep_key: 1}, {"tool": "list_files", "args": {deep_key: 1}},
        {"tool": "read_file", "args": {"path": "solution.py", deep_key: deep}}, deep,
    ]))
    return Wire(obj, draw(wires))


@st.composite
def invalid_eval_calls(draw):
    """benchmark/profile/run_tests/submit calls that must be rejected before any evaluation starts."""
    name = draw(st.sampled_from(["benchmark", "benchmark", "profile", "profile", "run_tests", "submit"]))
    kind = draw(st.integers(0, 3))
    args: Any
    if name == "benchmark":
        args = [
            {"workloads": draw(odd_values.filter(lambda v: not isinstance(v, list)))},
            {"workloads": draw(st.lists(st.sampled_from(SMOKE_NAMES), max_size=2))
             + [draw(odd_values.filter(lambda v: not isinstance(v, str)))]},
            {"workloads": draw(st.permutations(draw(st.lists(unknown_workloads, min_size=1, max_size=3))
                                               + draw(st.lists(st.sampled_from(SMOKE_NAMES), max_size=2))))},
            {"workloads": [Huge("x", draw(st.sampled_from([10_000, 1_000_000])))]},
        ][kind]
    elif name == "profile":
        args = [{}, {"workload": draw(odd_values.filter(lambda v: not isinstance(v, str)))},
                {"workload": draw(unknown_workloads)}, {"workload": [SMOKE_NAMES[0]]}][kind]
    else:
        args = [{draw(st.sampled_from(["workloads", "seed", "x", ""])): draw(odd_values)}, draw(short_text),
                draw(st.lists(odd_scalars, max_size=2)), draw(st.one_of(st.integers(), st.booleans()))][kind]
    if draw(st.integers(0, 4)) == 0 and isinstance(args, dict):
        args[draw(st.sampled_from(["verbose", "seed", "x"]))] = draw(odd_values)
    return Wire({"tool": name, "args": args}, draw(wires))


def _checked(harness: Harness, wire: Wire):
    action = to_action(wire, harness)
    assume(not would_evaluate(action))
    return harness.checked_step(action)


# ---------------------------------------------------------------------------------------------
# Fuzz properties
# ---------------------------------------------------------------------------------------------

@fuzz_settings(150)
@given(wire=raw_texts)
def test_fuzz_random_text_actions(harness, wire):
    harness.prepare()
    _checked(harness, wire)


@fuzz_settings(150)
@given(wire=odd_dict_actions())
def test_fuzz_odd_dict_actions(harness, wire):
    harness.prepare()
    _checked(harness, wire)


@fuzz_settings(220)
@given(wire=schema_calls())
def test_fuzz_schema_shaped_calls(harness, wire):
    harness.prepare()
    _checked(harness, wire)


@fuzz_settings(260)
@given(wire=path_calls())
def test_fuzz_path_tricks_never_leave_the_workspace(harness, wire):
    harness.prepare()
    obs = _checked(harness, wire)[0]
    action = render(wire.obj, harness)
    path = action["args"]["path"]
    if obs.startswith("Wrote ") or obs.startswith("Replaced "):
        target = (harness.ws / path).resolve()
        assert harness.ws in target.parents, f"{path!r} was written at {target}"


@fuzz_settings(25)
@given(wire=huge_actions())
def test_fuzz_huge_payloads(harness, wire):
    harness.prepare()
    obs = _checked(harness, wire)[0]
    action = render(wire.obj, harness)
    if isinstance(action, dict) and action.get("tool") == "write_file":
        written = (harness.ws / action["args"]["path"])
        data = action["args"]["content"].encode("utf-8", "surrogatepass")
        if len(data) > MAX_FILE_BYTES:  # refused, as an oversized action or an oversized file
            assert obs.startswith("ERROR:") and (f"files are limited to {MAX_FILE_BYTES} bytes" in obs or
                                                 f"at most {MAX_ACTION_CHARS} are accepted" in obs), obs[:300]
            if action["args"]["path"] == "solution.py":
                assert written.read_text() == SOLUTION_STUB
            else:
                assert not written.exists()


@fuzz_settings(40)
@given(wire=deep_actions())
def test_fuzz_deeply_nested_actions(harness, wire):
    harness.prepare()
    _checked(harness, wire)


@fuzz_settings(90)
@given(wire=invalid_eval_calls())
def test_fuzz_invalid_evaluation_arguments_are_rejected_before_anything_runs(harness, wire):
    # A solution that passes the static policy, so an evaluation that wrongly started would run
    # rather than be refused statically (and put its result in info).
    harness.prepare(solution=CORRECT_SOLUTION)
    obs, reward, terminated, truncated, info, elapsed = _checked(harness, wire)
    assert obs.startswith("ERROR:") and "error" in info and "evaluation" not in info, obs[:300]
    assert not terminated and reward == 0.0  # and no evaluation in info: nothing was submitted


@fuzz_settings(60)
@given(wires_=st.lists(st.one_of(path_calls(), schema_calls(), odd_dict_actions(), raw_texts), min_size=2,
                       max_size=6))
def test_fuzz_action_sequences(harness, wires_):
    harness.prepare()
    for wire in wires_:
        _checked(harness, wire)


# ---------------------------------------------------------------------------------------------
# Concrete regressions
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("wire", ["json", "dict"])
@pytest.mark.parametrize("unit", ["x", "\u00e9"])
@pytest.mark.parametrize("path", ["solution.py", "new.py"])
def test_a_5mb_write_is_refused_with_a_clear_message_and_changes_nothing(h, wire, unit, path):
    content = unit * (5_000_000 // len(unit.encode()))
    action = {"tool": "write_file", "args": {"path": path, "content": content}}
    out = h.checked_step(json.dumps(action) if wire == "json" else action)
    obs, info = out[0], out[4]
    # Either wire: the action is over the action limit (a dict runs from the JSON text it is recorded as).
    assert obs.startswith("ERROR: the action is") and f"at most {MAX_ACTION_CHARS} are accepted" in obs, obs
    assert "error" in info
    if path == "solution.py":
        assert (h.ws / "solution.py").read_text() == SOLUTION_STUB
    else:
        assert not (h.ws / path).exists()


def test_the_file_limit_counts_bytes_not_characters(h):
    just_fits = "x" * MAX_FILE_BYTES
    obs, *_ = h.checked_step(call("write_file", path="solution.py", content=just_fits))
    assert obs == f"Wrote {MAX_FILE_BYTES} bytes to solution.py."
    too_big = "\u00e9" * (MAX_FILE_BYTES // 2 + 1)  # fewer characters than the limit, more bytes
    action = json.dumps({"tool": "write_file", "args": {"path": "solution.py", "content": too_big}},
                        ensure_ascii=False)
    assert len(action) < MAX_ACTION_CHARS
    obs, *_ = h.checked_step(action)
    assert f"files are limited to {MAX_FILE_BYTES} bytes" in obs, obs
    assert (h.ws / "solution.py").read_text() == just_fits


@pytest.mark.parametrize("start", [14, 15, 10**6, 10**100])
def test_read_file_start_beyond_the_end_is_explained(h, start):
    n = len(BASELINE_SOURCE.splitlines())
    assert start > n
    obs, reward, _, _, info, _ = h.checked_step(call("read_file", path="baseline.py", start=start))
    if start > 10**9:  # the schema's bound on line numbers
        assert obs.startswith("ERROR: read_file: 'start' must be <= 1000000000."), obs
    else:
        assert obs == f"ERROR: 'baseline.py' has {n} lines; start={start} is past the end", obs
    assert info["error"] and reward == 0.0
    h.checked_step(call("write_file", path="empty.py", content=""))
    obs, *_ = h.checked_step(call("read_file", path="empty.py", start=2))
    assert obs == "ERROR: 'empty.py' has 0 lines; start=2 is past the end", obs


@pytest.mark.parametrize("path", ["canary_dir/x.py", "canary_rel/x.py", "canary_file.py", "up/x.py",
                                  "up/up/x.py", "root_link/etc/x.py", "ws_abs_link/../x.py", "sol_link/../../x.py",
                                  "canary_dir/../x.py", "CANARY_ABS"])
@pytest.mark.parametrize("tool", FILE_TOOLS)
def test_writes_through_planted_symlinks_pointing_outside_are_refused(h, path, tool):
    if path == "CANARY_ABS":
        path = "root_link" + str(h.canary / "x.py")
    (h.canary / "victim.py").write_text("import torch\n")  # something str_replace could hit
    if tool != "write_file":  # aim at a file that exists behind the link, so a successful edit would show
        path = path.replace("x.py", "victim.py")
    args = {"path": path, "content": "pwned"} if tool == "write_file" else \
        {"path": path, "old": "import torch", "new": "pwned"} if tool == "str_replace" else {"path": path}
    obs, reward, terminated, truncated, info = h.raw_step(json.dumps({"tool": tool, "args": args}))
    assert obs.startswith("ERROR:") and "outside the workspace" in obs, obs
    assert sorted(p.name for p in h.canary.iterdir()) == ["victim.py"]
    assert (h.canary / "victim.py").read_text() == "import torch\n"
    assert not (h.ws.parent / "x.py").exists() and not Path("/etc/x.py").exists()
    (h.canary / "victim.py").unlink()
    h.check_invariants()


def test_fixed_evaluation_calls_with_odd_shapes(h):
    """The few evaluations in this file: the stub fails the static policy, so no process starts."""
    for action in ('{"tool": "run_tests", "args": null}', '{"tool": "run_tests"}', {"tool": "run_tests"},
                   json.dumps({"tool": "benchmark", "args": {"workloads": []}}),
                   json.dumps({"tool": "benchmark", "args": {"workloads": SMOKE_NAMES[::-1]}}),
                   {"tool": "profile", "args": {"workload": SMOKE_NAMES[0]}}):
        obs, reward, terminated, truncated, info, elapsed = h.checked_step(action, evaluating=True)
        assert "evaluation" in info and "FAILED" in obs and reward == 0.0 and not terminated, obs[:300]
    obs, reward, terminated, truncated, info, _ = h.checked_step('{"tool": "submit", "args": {}}', evaluating=True)
    assert terminated and reward == 0.0 and "Submitted. Reward: 0.0000" in obs
    for action in ("garbage", {"tool": 10}, call("write_file", path="solution.py", content="x"), call("submit")):
        obs, reward, terminated, truncated, info = h.raw_step(action)
        assert "The episode has ended" in obs and reward == 0.0 and terminated and not truncated
        assert h.env.observation_space.contains(obs)
    h.check_invariants()
    h.reset()
    h.check_invariants()


# ---------------------------------------------------------------------------------------------
# Regressions: bugs this file found (each once let an exception escape step() or a write escape).
# ---------------------------------------------------------------------------------------------

def _expect_explained(h: Harness, action, require_error: bool = True) -> str:
    """The behaviour every bad action should have: an ordinary step with an ERROR observation."""
    try:
        out = h.raw_step(action)
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__} escaped step(): {str(exc)[:200]}")
    obs, reward, terminated, truncated, info = out
    assert h.env.observation_space.contains(obs) and reward == 0.0 and not terminated
    if require_error:
        assert obs.startswith("ERROR:") and "error" in info, obs[:300]
    h.check_invariants()
    return obs


@pytest.mark.parametrize("text", [
    '{"tool": "read_file", "args": {"path": "solution.py", "start": ' + "1" * 5000 + "}}",
    "9" * 4301,
    '{"tool": ' + "1" * 5000 + "}",
])
def test_regression_json_integer_over_the_int_digit_limit(h, text):
    _expect_explained(h, text)


def _odd_value_actions():
    deep_list, deep_tuple = nest("list", 20_000), nest("tuple", 20_000)
    return {
        "huge_int_tool": {"tool": 10**5000},
        "huge_int_top_level_key": {"tool": "list_files", 10**5000: 1},
        "huge_int_read_start": {"tool": "read_file", "args": {"path": "solution.py", "start": 10**5000}},
        "deep_list_tool": {"tool": deep_list},
        "deep_tuple_arg_key": {"tool": "list_files", "args": {deep_tuple: 1}},
        "mixed_type_arg_keys": {"tool": "list_files", "args": {1: 1, "a": 2}},
        "none_and_int_arg_keys": {"tool": "read_file", "args": {"path": "solution.py", None: 0, 0: 1}},
    }


def _recorded_action_cases():
    deep_list = nest("list", 20_000)
    return {
        "deep_content": {"tool": "write_file", "args": {"path": "solution.py", "content": deep_list}},
        "huge_int_content": {"tool": "write_file", "args": {"path": "solution.py", "content": 10**5000}},
        "huge_int_unknown_arg_value": {"tool": "list_files", "args": {"x": 10**5000}},
        "deep_args": {"tool": "list_files", "args": {"x": {"y": deep_list}}},
    }


@pytest.mark.parametrize("case", list(_recorded_action_cases()))
def test_regression_recording_odd_dict_actions(h, case):
    _expect_explained(h, _recorded_action_cases()[case])


@pytest.mark.parametrize("case", list(_odd_value_actions()))
def test_regression_odd_values_in_dict_actions(h, case):
    _expect_explained(h, _odd_value_actions()[case])


@pytest.mark.parametrize("tool, path", [
    ("read_file", "a" * 256), ("write_file", "a" * 256), ("str_replace", "a" * 256),
    ("write_file", "a/" * 2100 + "x.py"), ("read_file", "\ud800"), ("write_file", "\ud800"),
    ("str_replace", "\ud800"), ("write_file", "solution.py/x.py"), ("write_file", "baseline.py/x.py"),
])
def test_regression_os_errors_from_odd_paths(h, tool, path):
    args = {"path": path, "content": "x"} if tool == "write_file" else \
        {"path": path, "old": "x", "new": "y"} if tool == "str_replace" else {"path": path}
    _expect_explained(h, json.dumps({"tool": tool, "args": args}))


@pytest.mark.parametrize("tool", FILE_TOOLS)
@pytest.mark.parametrize("path", ["loop", "loop/x.py"])
def test_regression_symlink_loop_in_the_workspace(h, tool, path):
    assert os.readlink(h.ws / "loop") == "loop"  # planted by the harness
    args = {"path": path, "content": "x"} if tool == "write_file" else \
        {"path": path, "old": "x", "new": "y"} if tool == "str_replace" else {"path": path}
    # Replacing the loop by a regular file would be fine too; only an exception is wrong.
    _expect_explained(h, json.dumps({"tool": tool, "args": args}), require_error=False)


def test_regression_a_directory_at_the_temp_name_breaks_writes(h):
    obs, *_ = h.checked_step(call("write_file", path=".solution.py.tmp/x", content="x"))
    assert obs.startswith("Wrote ")
    try:
        obs, *_ = h.raw_step(call("write_file", path="solution.py", content="A = 1\n"))
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__} escaped step(): {exc}")
    assert obs.startswith("Wrote ") or obs.startswith("ERROR:"), obs
    obs, *_ = h.raw_step(call("read_file", path="solution.py"))
    assert "A = 1" in obs, obs


@pytest.mark.parametrize("target", ["canary", "baseline"])
def test_regression_write_follows_a_symlink_planted_at_the_temp_name(h, target):
    escaped = h.canary / ESCAPE_NAME
    os.symlink(escaped if target == "canary" else "baseline.py", h.ws / ".pwn.py.tmp")
    try:
        obs, *_ = h.raw_step(call("write_file", path="pwn.py", content="PWNED = True\n"))
    finally:
        written_outside = escaped.exists()
        baseline_now = (h.ws / "baseline.py").read_text()
    assert not written_outside, f"write_file('pwn.py') wrote {escaped}: {obs!r}"
    assert baseline_now == BASELINE_SOURCE, f"write_file('pwn.py') overwrote baseline.py: {obs!r}"


# Found by this file as a bug (RecursionError / MemoryError escaped step() from the static policy's
# ast.parse and tree walk); fixed in d2k_env/evaluator/policy.py while this file was written. Kept as a
# regression: a deeply nested solution.py is refused statically, without starting a process.
@pytest.mark.parametrize("content", ["x = " + "1+" * 500 + "1\n", "x = " + "1+" * 100_000 + "1\n",
                                     "x = " + "-" * 50_000 + "1\n"],
                         ids=["sum_of_500_terms", "sum_of_100000_terms", "50000_unary_minus"])
@pytest.mark.parametrize("tool", ["run_tests", "submit"])
def test_a_deeply_nested_solution_is_refused_by_the_static_policy(h, content, tool):
    h.checked_step(call("write_file", path="solution.py", content=content))
    obs, reward, terminated, truncated, info, elapsed = h.checked_step(call(tool), evaluating=True)
    assert "FAILED" in obs and "[policy]" in obs and reward == 0.0 and "evaluation" in info, obs[:300]
    assert terminated == (tool == "submit")
    assert info["evaluation"]["sandbox"] == {}, "a worker process was started (it reports its layers)"
