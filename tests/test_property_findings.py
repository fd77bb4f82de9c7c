"""Design-property findings in every evaluation (d2k_env.tasks.properties, issue 30): the trusted
replay builds each workload's facts from the recording it runs, the result aggregates the findings
over workloads, the env's info and ``d2k eval`` / ``d2k show --properties`` show them, and the reward
never reads them.

The task here is a scratch copy of fused_add_rmsnorm with a property list of its own, so these
tests do not depend on the lists the shipped tasks carry.
"""

from __future__ import annotations

import ast
import json

import pytest

from d2k_env.evaluator import Evaluator
from d2k_env.evaluator.protocol import EvalResult, WorkloadResult
from d2k_env.evaluator.recording import parse
from d2k_env.evaluator.replay import kernels_using_dot, rebuild_kernels
from d2k_env.reward import submission_reward
from test_replay import _copy_of

TASK_ID = "fused_add_rmsnorm"
WORKLOAD = "8x256"
PROPERTIES = """
import dataclasses
from d2k_env.tasks.properties import BytesNearRoofline, DesignProperty, MaxLaunches, UsesDot
TASK = dataclasses.replace(TASK, design_properties=[
    DesignProperty("one_launch", "L1", "The add and the norm run in one kernel launch per call",
                   MaxLaunches(1)),
    DesignProperty("uses_dot", "L2", "Some kernel computes with tl.dot (a property built to fail here)", UsesDot()),
    DesignProperty("near_roofline", "L3", "DRAM traffic within 1.2x of reading and writing each byte once",
                   BytesNearRoofline(1.2)),
    DesignProperty("rows_in_l2", "L3", "The second pass over a row re-reads it from L2, not from DRAM"),
])
"""

# The add and the norm as two kernels, through an fp32 intermediate: correct, and not one launch.
SPLIT = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, res_ptr, r_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \\
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(r_ptr + row + cols, r, mask=mask)


@triton.jit
def norm_kernel(r_ptr, w_ptr, y_ptr, res_out_ptr, eps, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(r_ptr + row + cols, mask=mask, other=0.0)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(res_out_ptr + row + cols, r.to(res_out_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    r = torch.empty((M, N), dtype=torch.float32, device=x.device)
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block = triton.next_power_of_2(N)
    add_kernel[(M,)](x, residual, r, N=N, BLOCK=block)
    norm_kernel[(M,)](r, weight, y, residual_out, 1e-6, N=N, BLOCK=block)
    return y, residual_out
'''


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """The reference and the split solution, each evaluated once (mode test) on one smoke workload of
    the scratch task."""
    root = tmp_path_factory.mktemp("props_task")
    task = _copy_of(TASK_ID, root, PROPERTIES)
    split = root / "split" / "solution.py"
    split.parent.mkdir()
    split.write_text(SPLIT)
    ev = Evaluator(task, "interpreter")
    try:
        yield task, {name: ev.evaluate(path, "test", workloads=[WORKLOAD], seed=1)
                     for name, path in (("reference", task.reference_path), ("split", split))}
    finally:
        ev.close()


def test_the_reference_realises_one_launch_and_bytes_stay_unchecked(results):
    _, by = results
    result = by["reference"]
    assert result.correct, result
    found = result.workloads[0].properties
    assert found["one_launch"]["status"] == "realised" and "_rmsnorm_two_pass" in found["one_launch"]["detail"]
    assert found["near_roofline"] == {"status": "unchecked", "detail": "bytes moved were not measured (no backend "
                                                                       "reads a DRAM traffic counter yet)"}
    assert "rows_in_l2" not in found  # the judge's: no automatic finding
    summary = result.properties
    assert summary["one_launch"]["status"] == "realised"
    assert summary["one_launch"]["workloads"]["realised"] == [WORKLOAD]
    assert summary["near_roofline"]["status"] == "unchecked"


def test_two_launches_are_not_realised_and_named_and_no_dot_is_seen(results):
    _, by = results
    result = by["split"]
    assert result.correct, result
    summary = result.properties
    assert summary["one_launch"]["status"] == "not realised"
    assert "add_kernel, norm_kernel" in summary["one_launch"]["detail"]
    assert summary["one_launch"]["workloads"]["not realised"] == [WORKLOAD]
    assert summary["uses_dot"]["status"] == "not realised"


def test_a_solution_that_violates_a_property_is_paid_as_before(results):
    """Findings are reported, never paid: the split solution's reward is what it is without them."""
    _, by = results
    result = by["split"]
    paid = {kind: submission_reward(kind, result) for kind in ("binary", "speedup", "log_speedup")}
    stripped = EvalResult.from_dict(result.to_dict())
    for w in stripped.workloads:
        w.properties = {}
    assert paid == {kind: submission_reward(kind, stripped) for kind in paid}
    assert paid["binary"] == 1.0


def test_findings_survive_the_wire_and_eval_prints_one_line_per_property(results):
    from d2k_env.verdict import format_properties

    task, by = results
    result = EvalResult.from_dict(json.loads(json.dumps(by["split"].to_dict())))
    assert result.workloads[0].properties == by["split"].workloads[0].properties
    lines = format_properties(task.spec.design_properties, result).splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("property one_launch (L1): not realised on 8x256")
    assert lines[2].startswith("property near_roofline (L3): unchecked: bytes moved were not measured")
    assert lines[3] == "property rows_in_l2 (L3): judge (no automatic check)"


def test_the_summary_says_where_a_property_fails_and_what_was_unchecked():
    def w(name, **statuses):  # not_realised: "not realised"
        return WorkloadResult(name, True, "", properties={
            pid: {"status": s.replace("_", " "), "detail": f"{name} saw {s}"} for pid, s in statuses.items()})

    result = EvalResult("test", "interpreter", workloads=[
        w("a", p="realised", q="realised", r="unchecked"), w("b", p="not_realised", q="unchecked", r="unchecked"),
        WorkloadResult("c", False, "[record] never replayed")])
    s = result.properties
    assert s["p"]["status"] == "not realised" and s["p"]["detail"] == "not realised on b (b: b saw not_realised)"
    assert s["q"]["status"] == "realised" and s["q"]["detail"].endswith("; unchecked on b")
    assert s["r"] == {"status": "unchecked", "detail": "a saw unchecked",
                      "workloads": {"realised": [], "not realised": [], "unchecked": ["a", "b"]}}
    assert EvalResult("test", "interpreter").properties == {}


SOURCE = '''import triton
import triton.language as tl
from triton.language import dot as mma


@triton.jit
def helper(a, b):
    return tl.dot(a, b)


@triton.jit
def via_helper(x_ptr):
    helper(x_ptr, x_ptr)


@triton.jit
def by_member(x_ptr):
    mma(x_ptr, x_ptr)


@triton.jit
def plain(x_ptr):
    tl.store(x_ptr, tl.sum(x_ptr))

'''


def _kernel(name: str, line: int, **globals_) -> dict:
    return {"name": name, "line": line, "options": {}, "globals": globals_}


@pytest.mark.parametrize("launched, expected", [
    ("via_helper", {"via_helper"}), ("by_member", {"by_member"}), ("plain", set())])
def test_dot_is_found_in_a_kernel_or_a_helper_it_reaches(launched, expected):
    """tl.dot through a jit helper of the kernel table, or bound by name from triton.language, counts;
    a kernel without it does not."""
    # Each kernel's line is its decorator's, the line above its def.
    lines = {line[4:].split("(")[0]: i for i, line in enumerate(SOURCE.splitlines()) if line.startswith("def ")}
    tl = {"module": "triton.language"}
    kernels = {"helper": _kernel("helper", lines["helper"], tl=tl),
               "via_helper": _kernel("via_helper", lines["via_helper"], helper={"jit": "helper"}),
               "by_member": _kernel("by_member", lines["by_member"], mma={"member": ["triton.language", "dot"]}),
               "plain": _kernel("plain", lines["plain"], tl=tl)}
    recording = parse(json.dumps({
        "buffers": [{"nbytes": 64, "dtype": "float32", "fill": None}],
        "steps": [{"launch": {"kernel": launched, "grid": [1],
                              "args": {"x_ptr": {"tensor": {"buffer": 0, "offset": 0}, "dtype": "float32"}}}}],
        "outputs": [{"at": {"buffer": 0, "offset": 0}, "shape": [16], "strides": [1], "dtype": "float32"}],
        "kernels": kernels}), inputs=0)
    rebuilt = rebuild_kernels(SOURCE, "/tmp/solution.py", recording)
    assert all(isinstance(t, ast.FunctionDef) for t in rebuilt.trees.values())
    assert kernels_using_dot(recording, rebuilt.trees) == expected


@pytest.fixture
def scratch_task(tmp_path, monkeypatch):
    """The scratch task under an id of its own, found through D2K_TASKS_PATH and registered; its
    env id unregistered afterwards."""
    import gymnasium as gym

    from d2k_env.registration import register_all
    from d2k_env.task import TASKS_PATH_VAR
    from test_packaging import copy_task

    copy_task(TASK_ID, tmp_path, "props_rmsnorm")
    spec = tmp_path / "tasks" / "props_rmsnorm.py"
    spec.write_text(spec.read_text() + PROPERTIES)
    monkeypatch.setenv(TASKS_PATH_VAR, str(tmp_path))
    before = set(gym.registry)
    register_all()
    yield "props_rmsnorm"
    for gid in set(gym.registry) - before:
        del gym.registry[gid]


def test_show_lists_the_properties_and_eval_prints_their_findings(scratch_task, tmp_path, capsys):
    from d2k_env.cli import main

    assert main(["show", scratch_task, "--properties"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == ("one_launch (L1): The add and the norm run in one kernel launch per call "
                        "[check: at most 1 kernel launch per call]")
    assert shown[3].endswith("[check: judge]") and len(shown) == 4

    split = tmp_path / "split.py"
    split.write_text(SPLIT)
    assert main(["eval", scratch_task, str(split), "--backend", "interpreter", "--workloads", WORKLOAD]) == 0
    out = capsys.readouterr().out
    assert "PASSED" in out
    assert f"property one_launch (L1): not realised on {WORKLOAD}" in out
    assert "property rows_in_l2 (L3): judge (no automatic check)" in out


def test_the_env_reports_findings_in_info_and_pays_the_submission_as_before(scratch_task):
    import gymnasium as gym

    import d2k_env

    env = gym.make(d2k_env.env_id(scratch_task), backend="interpreter")
    try:
        env.reset(seed=0)
        env.step({"tool": "write_file", "args": {"path": "solution.py", "content": SPLIT}})
        _, _, _, _, info = env.step({"tool": "run_tests"})
        assert info["properties"]["one_launch"]["status"] == "not realised"
        assert info["properties"]["near_roofline"]["status"] == "unchecked"
        _, reward, terminated, _, info = env.step({"tool": "submit"})
        assert terminated and info["properties"]["one_launch"]["status"] == "not realised"
        assert reward == 1.0  # correct on the interpreter: paid in full, whatever the findings
    finally:
        env.close()


@pytest.mark.parametrize("role, kept", [("solution", False), ("check", False), ("replay", True)])
def test_only_the_replay_reports_findings(role, kept):
    """Findings on a solution or check process's channel are void: the solution process could write
    any it liked. The trusted replay's are kept."""
    from d2k_env.evaluator.protocol import EvalRequest
    from d2k_env.evaluator.sandbox import WorkerOutcome
    from d2k_env.task import load_task

    found = {"one_launch": {"status": "realised", "detail": "1 launch per call (k); at most 1"}}
    forged = EvalResult("test", "interpreter", workloads=[WorkloadResult(WORKLOAD, True, "", properties=found)])
    req = EvalRequest(TASK_ID, "", "", "test", "cpu", [WORKLOAD], True, 0, role=role)
    ev = Evaluator(load_task(TASK_ID), "interpreter")
    try:
        result = ev._result(req, WorkerOutcome(forged.to_dict(), "", 0, None))
    finally:
        ev.close()
    assert result.workloads[0].properties == (found if kept else {})
