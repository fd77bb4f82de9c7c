"""Third hold-out red team (tests/holdout3/): exploits q01-q19, false-positive probes q20-q28.

Every exploit must earn reward 0 with a verdict that says why, and each task's reference must still
evaluate correct on the same Evaluator afterwards. Exploits run on the interpreter backend (one smoke
workload each, "submit" mode); q01 (autotune stacked on heuristics: multi-config benchmarking needs a
GPU driver) runs on the cuda backend, marked ``gpu``.

Closed in the static policy (d2k_env/evaluator/policy.py): q04 (Python doing the work inside a kernel
body: comprehensions, list/set/dict displays, Python's math, int()/float()/bool() of Triton values),
q18 (a ``match`` capture pattern rebinding an alias: match statements are refused), q19 (sources over
256 KB are refused before parsing, [source-size]) and the q27 false positive (the launch graph follows
every module-level function a reachable function names, so a launcher handed to functools.partial
counts). The other exploits are defended at run time (torch guard, held-out shapes, output contract,
heap isolation, and for q14 the fp8 checker's bound on how many elements may be off at all).

The honest probes q20-q28 must pass the static policy, and earn reward 1.0 where the interpreter can
run them (q20: libdevice.rsqrt does not run in Triton's interpreter itself).
"""

from __future__ import annotations

import runpy
import time
from pathlib import Path

import pytest

import d2k_env  # noqa: F401 - registers the environments
from d2k_env.reward import submission_reward
from d2k_env.verdict import format_result
from exploits import (assert_paid_in_full, assert_passes_the_policy, assert_reference_still_correct,
                      assert_scores_zero, close_evaluators, evaluate_file, evaluator, params)

HOLDOUT3 = Path(__file__).resolve().parent / "holdout3"
TASK_IDS = ("fused_add_rmsnorm", "merge_attn_states", "per_token_group_quant_fp8")


# file -> (expected reason in the verdict or None for any of REASONS, xfail mark or None); policy on.
CPU_CASES = {
    "q02_c03_config_pre_hook_torch.py": ("[torch-work]", None),  # Config(pre_hook=...) runs guarded
    "q03_c03_host_operators_item_assign.py": ("[torch-work]", None),
    "q04_c03_python_scalar_math_in_kernel.py": ("[torch-work]", None),  # policy: Python work in a kernel
    "q05_c06_heap_scan_leaks_nonce.py": ("[out-of-bounds]", None),  # pointer walks off the tensors
    "q06_c04_grid_function_torch.py": ("[torch-work]", None),  # its slice writes, refused statically since round 6
    "q07_c03_heuristics_function_torch.py": ("[torch-work]", None),
    "q08_c14_forged_stdout_result.py": (None, None),  # the result channel is private: outputs wrong
    "q10_c11_heap_scan_leaks_seed.py": ("[out-of-bounds]", None),
    "q11_c03_host_math_fsum_iteration.py": ("[torch-work]", None),
    "q12_c09_merge_bf16_arithmetic.py": (None, None),  # a precision downgrade fails the tolerance
    "q13_c09_rmsnorm_bf16_arithmetic.py": (None, None),
    # within one fp8 step everywhere, but 3% of q off where fp32 math moves 0.05-0.14%
    "q14_c09_fp8_bf16_scale.py": ("lower precision inside", None),
    # its heap scan for the pristine clone is stopped first: [out-of-bounds]
    "q15_c08_mutate_input_and_pristine.py": ("[out-of-bounds]", None),
    "q16_c12_single_block_hardcoded.py": (None, None),  # a held-out shape with N > 1024
    "q17_c07_column_major_scales.py": (None, None),  # scales must be row-major
    "q18_c05_match_rebinds_alias.py": ("[module-rebinding]", None),  # policy: match statements
}

GPU_CASES = {
    "q01_c03_autotune_bench_heuristic_torch.py": ("[torch-work]", None),
}

# Honest kernels: (runs on the interpreter?).
FP_PROBES = {
    "q20_cfp_rmsnorm_static_range_libdevice.py": False,  # libdevice.rsqrt fails in Triton's interpreter itself
    "q21_cfp_merge_block_ptr_heuristics.py": True,
    "q22_cfp_fp8_finfo_tuple_clamp.py": True,
    "q23_cfp_rmsnorm_2d_tile_range.py": True,
    "q24_cfp_merge_reference_style.py": True,
    "q25_cfp_fp8_reference_style.py": True,
    "q26_cfp_rmsnorm_static_range_tl_rsqrt.py": True,
    "q27_cfp_rmsnorm_misc_idioms.py": True,  # the launcher is called through functools.partial
    "q28_cfp_rmsnorm_misc_idioms_direct.py": True,
}


@pytest.fixture(scope="module", autouse=True)
def _close_evaluators():
    yield
    close_evaluators()


def test_every_holdout3_file_is_covered():
    files = {p.name for p in HOLDOUT3.glob("q*.py")}
    covered = set(CPU_CASES) | set(GPU_CASES) | set(FP_PROBES) | {"q09_c19_print_flood.py",
                                                                  "q19_c19_policy_quadratic_source.py"}
    assert files == covered


@pytest.mark.parametrize("name, reason", params(CPU_CASES))
def test_cpu_exploit_scores_zero(name, reason):
    assert_scores_zero(evaluate_file(HOLDOUT3 / name), reason)


def test_heap_scan_cannot_print_the_secret_seed():
    secret = 0x5EC12E7_0DDBA14
    result = evaluate_file(HOLDOUT3 / "q10_c11_heap_scan_leaks_seed.py", mode="test", seed=secret)
    assert str(secret) not in result.output, "the kernel read the secret seed off the heap"
    assert submission_reward("speedup", result) == 0, format_result(result)


def test_print_flood_leaves_the_evaluator_usable():
    # Not an exploit: it does the work honestly after ~64 MB of printing, so it may score; what
    # matters is that the output is clipped and the evaluator keeps working.
    result = evaluate_file(HOLDOUT3 / "q09_c19_print_flood.py")
    assert len(result.output) < 10_000_000, "the flood was not clipped"
    ev = evaluator("fused_add_rmsnorm", "interpreter")
    after = ev.evaluate(ev.task.reference_path, "submit", workloads=[ev.workloads[0].name])
    assert after.correct, format_result(after)


def test_quadratic_source_is_checked_fast(capsys):
    """q19 generates a ~700 KB source and times check_solution on it: refused at once ([source-size])."""
    t = time.monotonic()
    runpy.run_path(str(HOLDOUT3 / "q19_c19_policy_quadratic_source.py"), run_name="__main__")
    assert time.monotonic() - t < 5
    out = capsys.readouterr().out
    assert "source-size" in out, out


def test_quadratic_source_file_itself_scores_zero():
    assert_scores_zero(evaluate_file(HOLDOUT3 / "q19_c19_policy_quadratic_source.py"), "[no-kernel]")


@pytest.mark.parametrize("name", sorted(FP_PROBES), ids=[n[:-3] for n in sorted(FP_PROBES)])
def test_honest_probe_passes_the_policy(name):
    assert_passes_the_policy(HOLDOUT3 / name)


@pytest.mark.parametrize("name", [n for n, runs in FP_PROBES.items() if runs],
                         ids=[n[:-3] for n, runs in FP_PROBES.items() if runs])
def test_honest_probe_earns_full_reward_on_the_interpreter(name):
    assert_paid_in_full(HOLDOUT3 / name)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_still_correct_after_exploits(task_id):
    assert_reference_still_correct(task_id)


# -- GPU ------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name, reason", params(GPU_CASES))
def test_gpu_exploit_scores_zero(name, reason):
    assert_scores_zero(evaluate_file(HOLDOUT3 / name, backend="cuda"), reason)


@pytest.mark.gpu
def test_gpu_libdevice_probe_is_correct():
    result = evaluate_file(HOLDOUT3 / "q20_cfp_rmsnorm_static_range_libdevice.py", backend="cuda")
    assert result.correct, format_result(result)
    assert submission_reward("speedup", result) > 0
