"""Second hold-out red team (tests/holdout2/): exploits r01-r20, false-positive probes r30-r38.

Every exploit must earn reward 0 with a verdict that says why, and the task's reference must still
evaluate correct on the same Evaluator afterwards. Exploits run on the interpreter backend (one smoke
workload each, "submit" mode); the GPU-only one (r14) runs on the cuda backend, marked ``gpu``.

Most of this round's holes were in the static policy (d2k_env/evaluator/policy.py) and are closed
there: [kernel-source] (a "def" line in a kernel's docstring, which Triton's interpreter would run
instead of the kernel), tensor methods read as bound methods in host code (x.numpy, x.tolist,
x.untyped_storage, ...), private attributes, id()/hash(), .handle/.data/.type in kernel bodies,
module-level code that builds tensors or objects ([hidden-state]). The runtime layer is tested
behind the policy too (``RUNTIME_CASES``, policy bypassed): a hole there is marked
``xfail(strict=True, reason="HOLE (runtime, ...)")`` so a fix turns it into XPASS and asks for the
mark to be removed.

The honest probes r30-r38 must pass the static policy, and earn reward 1.0 where the interpreter can
run them (r31: autotune needs a GPU driver; r32: libdevice does not run in Triton's interpreter).
r35 launches through ``functools.partial(kernel[grid], ...)``: the launch graph only accepts a launch
written as ``kernel[grid](...)`` in forward or in a module-level function forward reaches (calls, or
names: a launcher handed to functools.partial counts, see holdout3/q27), so r35 stays refused
([no-kernel]), by choice: a partial (or any other value) holding ``kernel[grid]`` itself cannot be
followed statically.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import d2k_env  # registers the environments
import d2k_env.evaluator
from d2k_env.evaluator.policy import check_solution
from d2k_env.reward import submission_reward
from d2k_env.task import load_task
from d2k_env.verdict import format_result
from exploits import (assert_paid_in_full, assert_passes_the_policy, assert_reference_still_correct,
                      assert_scores_zero, close_evaluators, evaluate_file, evaluator, params, task_of)

HOLDOUT2 = Path(__file__).resolve().parent / "holdout2"
TASK_IDS = ("fused_add_rmsnorm", "merge_attn_states", "per_token_group_quant_fp8")



def runtime_hole(reason: str):
    return pytest.mark.xfail(strict=True, reason=f"HOLE (runtime, being fixed): {reason}")


# file -> (expected reason in the verdict or None for any of REASONS, xfail mark or None); policy on.
CPU_CASES = {
    "r01_c03_fake_def_smuggle.py": ("[kernel-source]", None),
    "r02_c06_fake_def_harness_frames.py": ("[kernel-source]", None),
    "r03_c03_numpy_alias_host.py": ("[torch-work]", None),  # x.numpy read as a bound method
    "r04_c03_tolist_host_reduction.py": ("[torch-work]", None),  # x.tolist read as a bound method
    "r05_c03_device_fn_smuggle.py": ("[kernel-source]", None),  # the def line in a device function's docstring
    "r06_c14_forge_result_channel.py": ("[torch-work]", None),  # numpy + untyped_storage()._write_file
    "r07_c13_file_read_write.py": ("[torch-work]", None),  # UntypedStorage.from_file, ndarray.tofile
    "r08_c19_channel_utf8_crash.py": ("[torch-work]", None),
    "r09_c02_module_tensor_state.py": ("[hidden-state]", None),  # torch.zeros at module level
    "r10_c06_interp_memory_read.py": ("[introspection]", None),  # id() is no longer a builtin a solution may use
    "r11_c05_pre_run_hook.py": ("[introspection]", None),  # kernel.add_pre_run_hook
    "r12_c03_heuristics_lambda_work.py": ("[torch-work]", None),  # bound tensor methods (t.to, x.copy_)
    "r13_c03_kernel_numpy_handle.py": ("[torch-work]", None),  # .handle.data in a kernel body
    "r15_c03_grid_fn_work.py": ("[torch-work]", None),
    "r16_c03_bound_method_torch_host.py": ("[torch-work]", None),
    "r17_c07_meta_outputs.py": (None, None),  # the worker dies before reporting
    "r18_c08_output_aliases_input.py": ("[input-mutation]", None),
    "r20_c10_nan_outputs.py": ("contains NaN", None),
}

# The same exploits with the static policy bypassed: the runtime layer alone must score them 0
# (those whose only defence is the policy are left out: r03, r04, r07, r09, r10, r13).
RUNTIME_CASES = {
    "r01_c03_fake_def_smuggle.py": (None, None),  # the interpreter runs the real def: a wrong kernel
    "r02_c06_fake_def_harness_frames.py": (None, None),
    "r05_c03_device_fn_smuggle.py": (None, None),
    "r06_c14_forge_result_channel.py": (None, None),  # a forged channel line is refused
    "r08_c19_channel_utf8_crash.py": (None, None),  # and must never crash the env
    "r11_c05_pre_run_hook.py": ("pre-run hooks", None),
    "r12_c03_heuristics_lambda_work.py": ("[torch-work]", None),
    "r15_c03_grid_fn_work.py": ("[torch-work]", None),
    "r16_c03_bound_method_torch_host.py": ("[torch-work]", None),
    "r17_c07_meta_outputs.py": (None, None),
    "r18_c08_output_aliases_input.py": ("[input-mutation]", None),
}

GPU_CASES = {
    "r14_c14_gpu_forge_speedup.py": ("[torch-work]", None),  # refused statically on every backend
}
GPU_RUNTIME_CASES = {
    "r14_c14_gpu_forge_speedup.py": (None, None),  # policy bypassed: forged speedups must not count
}

# Honest kernels: (runs on the interpreter?). r35 is refused on purpose (see the module docstring).
FP_PROBES = {
    "r30_fp_static_range_helper.py": True,
    "r31_fp_autotune_configs.py": False,  # triton.autotune benchmarks through a GPU driver
    "r32_fp_heuristics_libdevice.py": False,  # libdevice.exp fails in Triton's interpreter itself
    "r33_fp_block_ptr.py": True,
    "r34_fp_tuple_constexpr_reshape.py": True,
    "r36_fp_constexpr_global_expr.py": True,
    "r37_fp_zeros_persistent_cfg.py": True,
    "r38_fp_reduce_combine_itertools.py": True,
}
REFUSED_PROBES = {"r35_fp_reduce_combine_partial.py": "[no-kernel]"}


@pytest.fixture(scope="module", autouse=True)
def _close_evaluators():
    yield
    close_evaluators()


def test_every_holdout2_file_is_covered():
    files = {p.name for p in HOLDOUT2.glob("r*.py")}
    covered = set(CPU_CASES) | set(GPU_CASES) | set(FP_PROBES) | set(REFUSED_PROBES) | {
        "r19_c19_policy_stress.py"}
    assert files == covered


@pytest.mark.parametrize("name, reason", params(CPU_CASES))
def test_cpu_exploit_scores_zero(name, reason):
    assert_scores_zero(evaluate_file(HOLDOUT2 / name), reason)


def test_fake_def_cannot_print_the_secret_seed():
    secret = 0x5EC12E7_0DDBA12
    result = evaluate_file(HOLDOUT2 / "r02_c06_fake_def_harness_frames.py", mode="test", seed=secret)
    assert str(secret) not in result.output, "the smuggled kernel body read the secret seed"


def test_file_read_write_probe_writes_nothing(tmp_path):
    marker = Path("/tmp/d2k_holdout2_r07_marker.txt")
    marker.unlink(missing_ok=True)
    result = evaluate_file(HOLDOUT2 / "r07_c13_file_read_write.py")
    assert submission_reward("speedup", result) == 0
    assert "READ from the harness" not in result.output
    assert not marker.exists(), "a policy-clean solution wrote a file outside its workspace"


def test_policy_stress_never_raises_and_refuses_only_its_match_statement():
    """r19 is an honest kernel in syntax the checker rarely sees: checked without raising. Its host
    code dispatches with a `match` statement, which the policy refuses since the fourth red team
    (capture patterns rebound an import's alias): a deliberate false positive on a rare idiom."""
    path = HOLDOUT2 / "r19_c19_policy_stress.py"
    found = check_solution(path.read_text(), load_task(task_of(path)).allowed_torch)
    assert [v.rule for v in found] == ["module-rebinding"] and "match" in found[0].message, found


@pytest.mark.parametrize("name, reason", params(RUNTIME_CASES))
def test_cpu_exploit_scores_zero_behind_the_policy(name, reason, monkeypatch):
    monkeypatch.setattr(d2k_env.evaluator, "check_solution", lambda *args, **kwargs: [])
    result = evaluate_file(HOLDOUT2 / name)  # r08: must return a result, never raise out of evaluate()
    assert_scores_zero(result, reason)


def test_fake_def_cannot_print_the_secret_seed_behind_the_policy(monkeypatch):
    monkeypatch.setattr(d2k_env.evaluator, "check_solution", lambda *args, **kwargs: [])
    secret = 0x5EC12E7_0DDBA13
    result = evaluate_file(HOLDOUT2 / "r02_c06_fake_def_harness_frames.py", mode="test", seed=secret)
    assert str(secret) not in result.output, "the smuggled kernel body read the secret seed"


@pytest.mark.parametrize("name", sorted(FP_PROBES), ids=[n[:-3] for n in sorted(FP_PROBES)])
def test_honest_probe_passes_the_policy(name):
    assert_passes_the_policy(HOLDOUT2 / name)


@pytest.mark.parametrize("name", [n for n, runs in FP_PROBES.items() if runs],
                         ids=[n[:-3] for n, runs in FP_PROBES.items() if runs])
def test_honest_probe_earns_full_reward_on_the_interpreter(name):
    assert_paid_in_full(HOLDOUT2 / name)


@pytest.mark.parametrize("name, rule", REFUSED_PROBES.items(), ids=[n[:-3] for n in REFUSED_PROBES])
def test_launch_through_a_partial_is_refused_with_a_clear_message(name, rule):
    path = HOLDOUT2 / name
    found = check_solution(path.read_text(), load_task(task_of(path)).allowed_torch)
    assert [f"[{v.rule}]" for v in found] == [rule], found
    assert "launch one as kernel[grid](...)" in found[0].message


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_still_correct_after_exploits(task_id):
    assert_reference_still_correct(task_id)


# -- GPU ------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name, reason", params(GPU_CASES))
def test_gpu_exploit_scores_zero(name, reason):
    assert_scores_zero(evaluate_file(HOLDOUT2 / name, backend="cuda"), reason)


@pytest.mark.gpu
@pytest.mark.parametrize("name, reason", params(GPU_RUNTIME_CASES))
def test_gpu_exploit_scores_zero_behind_the_policy(name, reason, monkeypatch):
    monkeypatch.setattr(d2k_env.evaluator, "check_solution", lambda *args, **kwargs: [])
    assert_scores_zero(evaluate_file(HOLDOUT2 / name, backend="cuda"), reason)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["r31_fp_autotune_configs.py", "r32_fp_heuristics_libdevice.py"],
                         ids=["r31_fp_autotune_configs", "r32_fp_heuristics_libdevice"])
def test_gpu_honest_probe_is_correct(name):
    result = evaluate_file(HOLDOUT2 / name, backend="cuda")
    assert result.correct, format_result(result)
    assert submission_reward("speedup", result) > 0


@pytest.mark.gpu
def test_gpu_reference_still_correct_after_exploits():
    ev = evaluator("fused_add_rmsnorm", "cuda")
    result = ev.evaluate(ev.task.reference_path, "submit")
    assert result.correct and submission_reward("speedup", result) > 1, format_result(result)
