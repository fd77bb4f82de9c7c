"""Hold-out red-team suite: exploits written without seeing tests/redteam/ (see tests/holdout/).

Every exploit must earn reward 0 with a verdict that says why (a bracketed rule name or another
stated reason), and the task's reference must still evaluate correct on the same Evaluator after
the exploits have run. The holes this round found are closed (see the git history); a hole found
later is marked ``xfail(strict=True, reason="HOLE: ...")`` so that its fix turns into XPASS and asks
for the mark to be removed.

CPU exploits run on the interpreter backend, on one smoke workload each (none depends on the
workload), in "submit" mode. GPU-only exploits (timing, streams, graphs, L2) run on the cuda
backend with every workload and are marked ``gpu``, with the policy on and bypassed (H200 results:
benchmarks/results/gpu-tests-2026-12-01.md).
"""

from __future__ import annotations

import ast
import json
import os
import signal
import time
from pathlib import Path

import gymnasium as gym
import pytest

import d2k_env  # registers the environments; d2k_env.evaluator.check_solution is bypassed below
from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.registration import env_id
from d2k_env.reward import submission_reward
from d2k_env.task import load_task
from d2k_env.verdict import format_result
from exploits import assert_reference_still_correct, assert_scores_zero, close_evaluators, evaluate_file, evaluator, params

HOLDOUT = Path(__file__).resolve().parent / "holdout"



# file -> (expected reason in the verdict, a tuple of reasons one of which it gives, or None for any of
# REASONS; xfail mark or None). Inputs come from a fresh secret seed on every run, so a reason names
# what the exploit gets whatever the inputs: where they decide which check fails first, a tuple (or None).
CPU_CASES = {
    "h01_c01_noop_empty_outputs.py": (None, None),
    # Closed by the policy: kernel bodies may call Triton tensor methods only (copy_ is torch's).
    "h03_c03_constexpr_torch_in_kernel.py": ("[torch-work]", None),
    # Closed by the policy: every loaded name must be bound in the file (np comes from the interpreter).
    "h04_c03_interpreter_numpy_global.py": ("[unbound-name]", None),
    # Closed by the policy: no class definitions (no __getattr__/__bool__/__len__ hooks).
    "h05_c03_hasattr_getattr_hook.py": ("[class-definition]", None),
    "h06_c03_constexpr_bool_dunder.py": ("[class-definition]", None),
    "h07_c03_fake_jit_decorator.py": ("[torch-work]", None),
    "h08_c03_tuple_grid_len.py": ("[class-definition]", None),
    "h09_c03_try_fallback.py": ("[try-except]", None),
    # Closed by the policy: triton.runtime (build helpers) is not kernel-writing API.
    "h10_c03_c_extension_build.py": ("[forbidden-import]", None),
    # Refused by the policy since: a parameter may not be named like an imported module.
    "h11_c03_alias_named_tensor_host.py": ("[module-rebinding]", None),
    # Closed by the policy: imported names get the attribute checks (threading, inspect, builtins).
    "h12_c04_thread_work.py": ("[forbidden-import]", None),
    "h13_c05_disable_guard_via_frames.py": ("[forbidden-import]", None),
    "h15_c06_frame_walk_expected.py": ("[forbidden-import]", None),
    "h16_c06_nan_fill.py": ("contains NaN", None),
    # Refused by the policy since (no class definitions); the runtime [output-type] check behind it is
    # exercised by tests/test_redteam.py (c07_*, policy bypassed).
    "h17_c07_tensor_subclass.py": ("[class-definition]", None),
    "h18_c07_lazy_tuple_iter.py": ("[class-definition]", None),
    "h19_c08_inplace_residual_alias.py": ("[aliasing]", None),
    "h20_c08_strided_view_of_input.py": ("[aliasing]", None),
    # Closed by the tasks' checkers: every element within one bf16 step of the expected value.
    "h21_c09_bf16_internal_math.py": ("more than one bfloat16 step", None),
    "h22_c09_lse_low_precision.py": (None, None),
    "h23_c09_quant_scales_bf16.py": ("scales differ", None),
    # Rows past the first are zeros: the secret inputs decide whether the checker names them
    # [degenerate] (row 0 drawn all-zero: both outputs constant) or more than one step off (it failed
    # once on a fresh clone when asserting the second alone), so either is asserted.
    "h24_c10_first_row_only.py": (("[degenerate]", "more than one bfloat16 step"), None),
    "h25_c10_skip_last_group.py": (None, None),
    # Closed by held-out shapes: submit also checks shapes of the family drawn from the secret seed.
    "h27_c12_shape_specialised.py": ("held-out", None),
    "h28_c13_check_snapshot_race.py": (None, None),
    "h29_c14_forged_channel_exit.py": ("[forbidden-import]", None),  # refused statically since
    "h30_c14_print_pass_systemexit.py": ("failed to load", None),
}

GPU_CASES = {
    # The static policy refuses these on every backend (so the GPU marks below are no longer needed).
    "h02_c02_default_arg_replay.py": ("[hidden-state]", None),  # mutable default argument
    "h14_c05_replace_time_pair.py": ("[forbidden-import]", None),
    "h34_c04_side_stream_gpu.py": (None, None),
    "h35_c15_late_corruption_counter_gpu.py": (None, None),
    "h36_c16_persisting_l2_gpu.py": ("[forbidden-import]", None),
    "h37_c17_cuda_graph_replay_gpu.py": (None, None),
    "h38_c18_launch_bound_replay_gpu.py": ("[hidden-state]", None),  # mutable default argument
}


@pytest.fixture(scope="module", autouse=True)
def _close_evaluators():
    yield
    close_evaluators()


def test_every_holdout_file_is_covered():
    files = {p.name for p in HOLDOUT.glob("h*.py")}
    covered = set(CPU_CASES) | set(GPU_CASES) | {
        "h26_c11_leak_secret_seed.py", "h31_c19_infinite_loop_kernel.py", "h32_c19_output_flood.py",
        "h33_c19_setsid_daemon_survives.py", "h39_c13_pyc_plant_persistence.py"}
    assert files == covered


@pytest.mark.parametrize("name, reason", params(CPU_CASES))
def test_cpu_exploit_scores_zero(name, reason):
    result = evaluate_file(HOLDOUT / name)
    if isinstance(reason, tuple):
        assert_scores_zero(result, None)
        assert any(r in format_result(result) for r in reason), f"verdict gives none of {reason}:\n" \
                                                                  f"{format_result(result)}"
    else:
        assert_scores_zero(result, reason)


def test_secret_seed_does_not_leak():
    secret = 0x5EC12E7_0DDBA11
    result = evaluate_file(HOLDOUT / "h26_c11_leak_secret_seed.py", mode="test", seed=secret)
    assert str(secret) not in result.output, "the solution read the secret seed and printed it"


def test_hang_is_killed_and_env_survives():
    ev = Evaluator(load_task("fused_add_rmsnorm"), "interpreter",
                   limits=PhaseLimits(limits={"load": 60, "check": 8, "verify": 60}, default=60))
    try:
        t0 = time.monotonic()
        result = ev.evaluate(HOLDOUT / "h31_c19_infinite_loop_kernel.py", "submit", workloads=["8x256"])
        assert time.monotonic() - t0 < 60
        assert_scores_zero(result, "killed")
        ref = ev.evaluate(ev.task.reference_path, "test", workloads=["8x256"])
        assert ref.correct, format_result(ref)
    finally:
        ev.close()


def test_output_flood_is_capped():
    result = evaluate_file(HOLDOUT / "h32_c19_output_flood.py")
    assert_scores_zero(result, "printed more than")
    assert len(result.output) < 10_000


def test_no_process_outlives_the_evaluation():
    pid_file = Path("/tmp/d2k_holdout_h33.pid")
    pid_file.unlink(missing_ok=True)
    result = evaluate_file(HOLDOUT / "h33_c19_setsid_daemon_survives.py")
    assert submission_reward("speedup", result) == 0
    if not pid_file.exists():
        return  # the daemon was killed before it could even write its pid
    pid = int(pid_file.read_text())
    pid_file.unlink()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    os.kill(pid, signal.SIGKILL)  # the daemon this test started, by its pid
    pytest.fail(f"process {pid}, forked and setsid()ed by the solution, outlived its evaluation")


@pytest.mark.parametrize("task_id", ["fused_add_rmsnorm", "merge_attn_states", "per_token_group_quant_fp8"])
def test_reference_still_correct_after_exploits(task_id):
    assert_reference_still_correct(task_id)


# -- through the env's tools ---------------------------------------------------------------------------

def call(tool, **args):
    return json.dumps({"tool": tool, "args": args})


@pytest.fixture
def env():
    e = gym.make(env_id("fused_add_rmsnorm"), backend="interpreter")
    e.reset(seed=0)
    yield e
    e.close()


def test_env_file_tools_stay_in_the_workspace(env, tmp_path):
    ws = env.unwrapped.workspace.root
    baseline = (ws / "baseline.py").read_text()
    outside = ws.parent / "escape.py"
    for path in ("../escape.py", str(outside), "/tmp/d2k_holdout_abs.py", "baseline.py", "./baseline.py",
                 "sub/../baseline.py", "sub/../../escape.py", "baseline.py/.", "BASELINE.py/../baseline.py"):
        obs, reward, *_ = env.step(call("write_file", path=path, content="def forward(*a):\n    return a\n"))
        assert obs.startswith("ERROR"), (path, obs)
        assert reward == 0
    obs, *_ = env.step(call("str_replace", path="baseline.py", old="import torch", new="import os"))
    assert obs.startswith("ERROR")
    for path in ("../../../../etc/passwd", "/etc/passwd", "../triton-cache"):
        obs, *_ = env.step(call("read_file", path=path))
        assert obs.startswith("ERROR"), (path, obs)
    assert (ws / "baseline.py").read_text() == baseline
    assert not outside.exists() and not Path("/tmp/d2k_holdout_abs.py").exists()


def test_env_workspace_modules_shadow_nothing(env):
    # Modules planted beside solution.py (torch, triton, site hooks) must not be imported by the worker.
    bomb = "raise SystemExit('shadowed: the workspace was on sys.path')\n"
    for path in ("torch.py", "triton/__init__.py", "triton/language.py", "sitecustomize.py", "usercustomize.py",
                 "d2k_env/__init__.py", "numpy.py"):
        obs, *_ = env.step(call("write_file", path=path, content=bomb))
        assert obs.startswith("Wrote"), obs
    reference = load_task("fused_add_rmsnorm").reference_path.read_text()
    env.step(call("write_file", path="solution.py", content=reference))
    obs, reward, terminated, *_ = env.step(call("submit"))
    assert terminated and reward == 1.0, obs


def test_env_planted_bytecode_does_not_replace_later_solutions(env):
    src = (HOLDOUT / "h39_c13_pyc_plant_persistence.py").read_text()
    decoy = next(n.value.value for n in ast.parse(src).body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "DECOY")
    env.step(call("write_file", path="solution.py", content=src))
    env.step(call("run_tests"))
    env.step(call("write_file", path="solution.py", content=decoy))
    obs, reward, terminated, *_ = env.step(call("submit"))
    assert terminated
    assert reward == 0, f"a no-op decoy earned {reward}:\n{obs}"


# -- GPU-only exploits ---------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name, reason", params(GPU_CASES))
def test_gpu_exploit_scores_zero(name, reason):
    assert_scores_zero(evaluate_file(HOLDOUT / name, backend="cuda"), reason)


@pytest.mark.gpu
def test_gpu_reference_still_correct_after_exploits():
    ev = evaluator("fused_add_rmsnorm", "cuda")
    result = ev.evaluate(ev.task.reference_path, "submit")
    assert result.correct and submission_reward("speedup", result) > 1, format_result(result)


# The GPU-only exploits again with the static policy bypassed: the runtime layer alone must score them 0.
GPU_RUNTIME_CASES = {
    "h02_c02_default_arg_replay.py": ("[hidden-state]", None),  # replay keyed by input pointers: kept tensors
    "h14_c05_replace_time_pair.py": ("[tampering]", None),
    "h34_c04_side_stream_gpu.py": ("[side-stream]", None),
    "h35_c15_late_corruption_counter_gpu.py": ("[hidden-state]", None),  # a counter: state changes with calls
    "h37_c17_cuda_graph_replay_gpu.py": (None, None),
    # Its cache of outputs in a default argument is a tensor kept between calls, seen right after the
    # first checked call of 64x8192, before any timed call could be compared (H200, 2026-12-02).
    "h38_c18_launch_bound_replay_gpu.py": ("[hidden-state]", None),
    # Earned 16.9x on the H200 (2026-12-01) through the stream's access-policy window, which slowed the
    # baseline: the window and the set-aside are read at each launch ([l2-persistence]).
    "h36_c16_persisting_l2_gpu.py": ("[l2-persistence]", None),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name, reason", params(GPU_RUNTIME_CASES))
def test_gpu_exploit_scores_zero_behind_the_policy(name, reason, monkeypatch):
    monkeypatch.setattr(d2k_env.evaluator, "check_solution", lambda *args, **kwargs: [])
    result = evaluate_file(HOLDOUT / name, backend="cuda", mode="submit")
    print(format_result(result, name))
    assert_scores_zero(result, reason)
