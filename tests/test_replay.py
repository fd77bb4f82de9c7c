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

def _problems(body: str, extra: dict | None = None) -> list[str]:
    import triton
    import triton.language as tl

    from d2k_env.evaluator.kernel_language import problems

    node = ast.parse("def k(x_ptr, n, BLOCK: tl.constexpr):\n" + body).body[0]
    return problems(node, {"tl": tl, "triton": triton, **(extra or {})})


HONEST = [
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + offs, mask=offs < n)\n"
    "    tl.store(x_ptr + offs, (x * 2).to(x_ptr.dtype.element_ty), mask=offs < n)\n",
    "    acc = tl.zeros((BLOCK,), dtype=tl.float32)\n    for i in tl.static_range(4):\n        acc += i\n"
    "    bits: tl.constexpr = tl.float32.primitive_bitwidth\n    tl.static_assert(bits == 32, f'{bits}')\n",
    "    n_blocks = triton.cdiv(n, BLOCK)\n    x = tl.full((BLOCK,), float('-inf'), tl.float32)\n"
    "    y = tl.where(x > 0, x, 0.0).T\n    z = min(BLOCK, 4)\n",
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
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_what_is_not_the_language_is_refused(name):
    assert _problems(ESCAPES[name]), name


def test_a_jit_callee_and_a_constant_are_names_the_kernel_may_read():
    assert _problems("    helper(x_ptr)\n    v = SCALE * 2\n", {"helper": object(), "SCALE": 3}) == []


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
