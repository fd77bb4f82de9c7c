"""The trust boundary's pieces on their own: the recording format (what the untrusted solution process
may hand the trusted side), the kernel-language check, and the replay's kernel rebuild.

End to end (a solution recorded, replayed on secret inputs, checked) is every evaluation's path:
tests/test_evaluator.py, tests/test_security.py and the escaped-solution suite cover it.
"""

from __future__ import annotations

import ast
import copy
import json

import pytest

from d2k_env.evaluator.recording import RecordingError, first_difference, parse

KERNEL = {"name": "k", "line": 5, "options": {}, "globals": {"tl": {"module": "triton.language"}}}


def good() -> dict:
    """A valid recording of one launch over input 0 into buffer 0, returning the buffer."""
    return {
        "buffers": [{"nbytes": 64, "dtype": "float32", "fill": None}],
        "steps": [{"fill": {"at": {"buffer": 0, "offset": 0}, "shape": [16], "strides": [1], "dtype": "float32",
                            "value": 0}},
                  {"launch": {"kernel": "k:5", "grid": [4],
                              "args": {"x": {"tensor": {"input": 0, "offset": 0}, "dtype": "float32"},
                                       "y": {"tensor": {"buffer": 0, "offset": 0}, "dtype": "float32"},
                                       "n": {"value": 16}, "BLOCK": {"value": 4}, "num_warps": {"value": 1}}}}],
        "outputs": [{"at": {"buffer": 0, "offset": 0}, "shape": [16], "strides": [1], "dtype": "float32"}],
        "kernels": {"k:5": copy.deepcopy(KERNEL)},
    }


def test_a_valid_recording_round_trips():
    recording = parse(json.dumps(good()), inputs=1)
    assert len(recording.launches) == 1 and recording.launches[0].grid == (4, 1, 1)
    assert parse(recording.to_json(), inputs=1) == recording


def _edit(path: str, value):
    data = good()
    *keys, last = path.split("/")
    target = data
    for key in keys:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is DELETE:
        del target[last]
    else:
        target[int(last) if isinstance(target, list) else last] = value
    return data


DELETE = object()
# What an untrusted process could write: each must be refused, naming what is wrong.
BAD = {
    "input out of range": ("steps/1/launch/args/x/tensor/input", 3, "input"),
    "buffer out of range": ("steps/1/launch/args/y/tensor/buffer", 1, "buffer"),
    "negative offset": ("steps/1/launch/args/y/tensor/offset", -8, "offset"),
    "unknown space": ("steps/1/launch/args/y/tensor", {"file": "/etc/passwd", "offset": 0}, "neither"),
    "grid too large": ("steps/1/launch/grid", [1, 70000], "grid"),
    "grid of floats": ("steps/1/launch/grid", [1.5], "grid"),
    "four grid dims": ("steps/1/launch/grid", [1, 1, 1, 1], "grid"),
    "unknown kernel": ("steps/1/launch/kernel", "other:1", "does not describe"),
    "private argument": ("steps/1/launch/args/__class__", {"value": 1}, "identifier"),
    "object argument": ("steps/1/launch/args/n", {"pickle": "..."}, "not an argument"),
    "os module global": ("kernels/k:5/globals/os", {"module": "os"}, "module"),
    "dunder global": ("kernels/k:5/globals/__builtins__", {"value": 1}, "plain identifier"),
    "kernel name not an identifier": ("kernels/k:5/name", "k; import os", "identifier"),
    "unknown jit option": ("kernels/k:5/options", {"debug": True}, "options"),
    "unknown dtype": ("outputs/0/dtype", "object", "dtype"),
    "extra key": ("outputs/0/path", "/tmp/x", "keys"),
    "huge buffer": ("buffers/0/nbytes", 1 << 50, "size"),
    "NaN fill": ("steps/0/fill/value", float("nan"), "number"),
    "missing outputs": ("outputs", DELETE, "keys"),
    "jit reference to nothing": ("kernels/k:5/globals/helper", {"jit": "missing:1"}, "lacks"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_malformed_recording_is_refused_with_a_reason(name):
    path, value, words = BAD[name]
    with pytest.raises(RecordingError, match=words):
        parse(json.dumps(_edit(path, value)), inputs=1)


def test_a_recording_that_is_not_json_or_too_large_is_refused():
    with pytest.raises(RecordingError, match="not JSON"):
        parse("{", inputs=1)
    with pytest.raises(RecordingError, match="bytes"):
        parse(" " * (5 << 20), inputs=1)


def test_first_difference_names_the_launch_and_what_differed():
    a = parse(json.dumps(good()), inputs=1)
    other = good()
    other["steps"][1]["launch"]["grid"] = [5]
    assert "had grid [4, 1, 1] one time and [5, 1, 1]" in first_difference(a, parse(json.dumps(other), inputs=1))
    other = good()
    other["steps"][1]["launch"]["args"]["n"] = {"value": 17}
    assert "passed n=16 one time and 17" in first_difference(a, parse(json.dumps(other), inputs=1))
    assert first_difference(a, parse(json.dumps(good()), inputs=1)) is None


# -- the kernel-language check -------------------------------------------------------------------------------

def _problems(body: str, extra: dict | None = None, launched: bool = False) -> list[str]:
    import math

    import triton
    import triton.language as tl

    from d2k_env.evaluator.kernel_language import problems

    node = ast.parse("def k(x_ptr, n, BLOCK: tl.constexpr):\n" + body).body[0]
    return problems(node, {"tl": tl, "triton": triton, "math": math, **(extra or {})}, launched=launched)


HONEST = [
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + offs, mask=offs < n)\n"
    "    tl.store(x_ptr + offs, (x * 2).to(x_ptr.dtype.element_ty), mask=offs < n)\n",
    "    acc = tl.zeros((BLOCK,), dtype=tl.float32)\n    for i in tl.static_range(4):\n        acc += i\n"
    "    bits: tl.constexpr = tl.float32.primitive_bitwidth\n    tl.static_assert(bits == 32, f'{bits}')\n",
    "    n_blocks = triton.cdiv(n, BLOCK)\n    x = tl.full((BLOCK,), float('-inf'), tl.float32)\n"
    "    y = tl.where(x > 0, x, 0.0).T\n    z = min(BLOCK, 4)\n",
    "    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)\n    for i in tl.range(0, n, BLOCK, num_stages=2):\n"
    "        acc += tl.load(x_ptr + i)\n    for j in tl.static_range(2):\n        acc += j\n    else:\n"
    "        acc += 1\n    c = int(BLOCK * 2) + float(math.pi)\n",
    "    if n > 0:\n        return\n    tl.store(x_ptr, tl.load(x_ptr), mask=(n >= 0) & (n < BLOCK))\n",
]


@pytest.mark.parametrize("body", HONEST)
def test_the_language_passes(body):
    assert _problems(body) == []


ESCAPES = {
    "an import": "    import os\n",
    "the interpreter's host array": "    x = tl.load(x_ptr)\n    x.handle.data.tofile('/proc/self/fd/3')\n",
    "a dunder name": "    b = __builtins__\n",
    "a private attribute": "    s = tl._semantic\n",
    "a module outside the language": "    d = triton.runtime.driver\n",
    "a lambda": "    f = lambda v: v\n",
    "a comprehension": "    v = [i for i in range(3)]\n",
    "a try": "    try:\n        pass\n    except Exception:\n        pass\n",
    "a name from nowhere": "    v = open('/etc/passwd')\n",
    "getattr": "    v = getattr(tl, 'load')\n",
    "a nested function": "    def g():\n        pass\n",
    "an attribute off the language": "    v = tl.arange(0, 4).numpy\n",
    # What Triton's GPU front end refuses (the policy's former [gpu-compile] and kernel [torch-work] rules).
    "break": "    for i in range(3):\n        break\n",
    "continue": "    for i in range(3):\n        continue\n",
    "a chained comparison": "    m = 0 <= n < BLOCK\n",
    "in": "    m = n in (1, 2)\n",
    "the matmul operator": "    v = n @ n\n",
    "a loop over a tuple": "    for i in (1, 2):\n        pass\n",
    "a loop over zip": "    for i in zip(range(2), range(2)):\n        pass\n",
    "a loop target tuple": "    for i, j in range(2):\n        pass\n",
    "a loop else": "    for i in range(3):\n        pass\n    else:\n        pass\n",
    "return in a loop": "    for i in range(3):\n        return\n",
    "a while on a constant": "    while 1:\n        pass\n",
    "a while else": "    while n > 0:\n        n = n - 1\n    else:\n        pass\n",
    "if on a string": "    if 'a':\n        pass\n",
    "several targets": "    a = b = n\n",
    "a starred target": "    a, *b = (n, n)\n",
    "a match": "    match n:\n        case 1:\n            pass\n",
    "a call of an argument": "    n()\n",
    "a call of a call": "    tl.load(x_ptr)()\n",
    "item assignment": "    v = tl.zeros((BLOCK,), tl.float32)\n    v[0] = 1\n",
    "the interpreter's .data": "    v = tl.load(x_ptr).data\n",
    "the interpreter's .base": "    v = x_ptr.base\n",
    "torch in a kernel": "    v = torch.relu(x_ptr)\n",
    "Python math on a value": "    v = math.sqrt(n)\n",
    "int of a value": "    v = int(tl.load(x_ptr))\n",
    "float of a parameter": "    v = float(n)\n",
    "a list of values": "    v = [tl.load(x_ptr), n]\n",
    "a dict display": "    v = {1: n}\n",
    "a set display": "    v = {n}\n",
    "an in-place constexpr": "    BLOCK += 1\n",
    "an in-place loop target": "    for i in range(3):\n        i += 1\n",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_what_is_not_the_language_is_refused(name):
    import torch

    assert _problems(ESCAPES[name], {"torch": torch}), name


def test_only_a_device_function_returns_a_value():
    body = "    return tl.load(x_ptr)\n"
    assert _problems(body) == []
    assert "only a device function" in _problems(body, launched=True)[0]


def test_a_jit_callee_and_a_constant_are_names_the_kernel_may_read():
    import triton.language as tl

    assert _problems("    helper(x_ptr)\n    v = SCALE * 2\n", {"helper": object(), "SCALE": tl.constexpr(3)}) == []


def test_a_plain_global_is_read_only_in_the_signature():
    """Triton's GPU compiler reads a global in a body only when it is a tl.constexpr; a default is Python's."""
    import triton.language as tl

    node = ast.parse("def k(x_ptr, n, BLOCK: tl.constexpr = SCALE):\n    v = SCALE * 2\n").body[0]
    from d2k_env.evaluator.kernel_language import located

    found = located(node, {"tl": tl, "SCALE": 3})
    assert [line for line, _ in found] == [2] and "tl.constexpr" in found[0][1]


# -- what forward allocates --------------------------------------------------------------------------------

def _copy_of(task_id: str, into, spec_tail: str = ""):
    """Task ``task_id`` copied as a task directory under ``into`` (its spec with ``spec_tail`` appended)."""
    import shutil

    from d2k_env.task import load_task

    task = load_task(task_id)
    for path in (task.spec_path, task.baseline_path, task.reference_path,
                 *(task.root / "guidance" / task_id / f"L{i}.md" for i in (1, 2, 3))):
        target = into / path.relative_to(task.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    (into / "tasks" / f"{task_id}.py").write_text(task.spec_path.read_text() + spec_tail)
    return load_task(task_id, into)


def test_allocated_bytes_are_reported_and_a_task_may_bound_them(tmp_path):
    """Every replayed workload reports what forward allocated (its recorded buffers: y and the new
    residual here, 2 x M x N bf16); a task with an allocation limit below that fails the workload."""
    from d2k_env.evaluator import Evaluator
    from d2k_env.task import load_task

    task = load_task("fused_add_rmsnorm")
    ev = Evaluator(task, "interpreter")
    try:
        result = ev.evaluate(task.reference_path, "test", workloads=["8x256"], seed=1)
    finally:
        ev.close()
    assert result.correct and result.workloads[0].allocated_bytes == 2 * 8 * 256 * 2

    bounded = _copy_of("fused_add_rmsnorm", tmp_path, "\nimport dataclasses\n"
                       "TASK = dataclasses.replace(TASK, allocation_limit=lambda w: w['M'] * w['N'] * 2)\n")
    ev = Evaluator(bounded, "interpreter")
    try:
        result = ev.evaluate(task.reference_path, "test", workloads=["8x256"], seed=1)
    finally:
        ev.close()
    w = result.workloads[0]
    assert not result.correct and w.message.startswith("[allocation-limit]") and w.allocated_bytes == 8192
