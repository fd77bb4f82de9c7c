"""Fourth hold-out red team (tests/holdout4/): exploits p01-p18 and honest probes p19-p24, written
without sight of the earlier suites.

Every exploit must earn nothing, with a verdict naming why. What this round got through, and the fix:
p01 (merge fixed at d = 128: the second held-out shape now always has d = 256), p02 (fp8 wrong past 64
groups per row: the interpreter's held-out draw now has 65-72), p03 and p16 (a container bound into a
module-level functools.partial) and p04 (a module-level itertools.count() advanced by iterating it:
[hidden-state] for both), p11 (outputs on the meta device crashed the worker: [output-type]) and the
p23 false positive (a kernel handed to a launcher through functools.partial now counts as launched).

p17 normalises the bf16-rounded residual instead of the fp32 sum. That is what vLLM's
fused_add_rms_norm kernel computes (its sum is in the input dtype), it stays within the task's
one-step bound, and it saves nothing, so it is accepted by design and tested as paid.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from d2k_env.evaluator.policy import check_solution
from d2k_env.task import load_task, task_ids
from exploits import (assert_paid_in_full, assert_passes_the_policy, assert_reference_still_correct,
                      assert_scores_zero, close_evaluators, evaluate_file, params, task_of)

HERE = Path(__file__).parent / "holdout4"


# Seeds for exploits whose outcome depended on the secret seed (the held-out draw): the one that
# showed the hole. Every other case runs under a fresh secret seed.
SEEDS = {
    "p01_c12_headdim_128_only.py": 0,  # drew 24x4x128 and 15x2x64 before d = 256 was always drawn
}

CPU_CASES = {
    "p01_c12_headdim_128_only.py": ("held-out", None),
    "p02_c12_fp8_at_most_64_groups.py": ("held-out", None),
    "p03_c02_partial_list_replay.py": ("[hidden-state]", None),
    "p04_c15_itertools_counter.py": ("[hidden-state]", None),
    "p05_c03_grid_partial_work.py": ("[torch-work]", None),
    "p06_c03_prune_hook_work.py": ("[torch-work]", None),
    "p07_c14_stdout_forgery.py": (None, None),
    "p08_c09_bf16_weighted_sum.py": ("contains NaN", None),  # empty suffixes (round 6) come before its precision
    "p09_c09_fp8_bf16_reciprocal.py": ("lower precision inside", None),
    "p10_c08_inplace_residual.py": ("[aliasing]", None),
    "p11_c07_meta_placeholder.py": ("[output-type]", None),
    "p12_c14_systemexit_in_forward.py": ("raised", None),
    "p13_c06_nan_fill.py": ("contains NaN", None),
    "p14_c12_smoke_shape_dispatch.py": ("held-out", None),
    "p15_c03_heuristics_work.py": ("[torch-work]", None),
    "p18_c09_bf16_rstd_and_product.py": ("bfloat16 step", None),
}

# Timing-side exploits, for the GPU (not run there yet).
GPU_CASES = {
    "p03_c02_partial_list_replay.py": ("[hidden-state]", None),
    "p16_c05_allocator_pressure.py": ("[hidden-state]", None),
}

# Exploits whose first defence is the static policy's [hidden-state] rule.
POLICY_CASES = {
    "p03_c02_partial_list_replay.py": ("hidden-state", None),
    "p04_c15_itertools_counter.py": ("hidden-state", None),
    "p16_c05_allocator_pressure.py": ("hidden-state", None),
}

ACCEPTED = ["p17_c09_rounded_residual.py"]  # vLLM's own semantics (see the module docstring)

PROBES = {
    "p19_cfp_autotune_heuristics.py": None,
    "p20_cfp_block_pointers.py": None,
    "p21_cfp_static_range_reshape.py": None,
    "p22_cfp_two_kernels_atomics.py": None,
    "p23_cfp_libdevice_partial_launcher.py": None,
    "p24_cfp_row_loop_where.py": None,
}


@pytest.fixture(scope="module", autouse=True)
def _close():
    yield
    close_evaluators()


@pytest.mark.parametrize("name,reason", params(CPU_CASES))
def test_exploit_scores_zero_on_interpreter(name, reason):
    kwargs = {"seed": SEEDS[name]} if name in SEEDS else {}
    assert_scores_zero(evaluate_file(HERE / name, **kwargs), reason)


@pytest.mark.gpu
@pytest.mark.parametrize("name,reason", params(GPU_CASES))
def test_exploit_scores_zero_on_gpu(name, reason):
    assert_scores_zero(evaluate_file(HERE / name, backend="cuda"), reason)


@pytest.mark.parametrize("name,rule", params(POLICY_CASES))
def test_policy_refuses(name, rule):
    path = HERE / name
    violations = check_solution(path.read_text(), load_task(task_of(path)).allowed_torch)
    assert any(v.rule == rule for v in violations), f"policy let it in: {violations}"


def _probe_params():
    return [pytest.param(n, id=n[:-3], marks=[m] if m else []) for n, m in PROBES.items()]


@pytest.mark.parametrize("name", _probe_params())
def test_probe_passes_policy(name):
    assert_passes_the_policy(HERE / name)


@pytest.mark.parametrize("name", _probe_params())
def test_probe_earns_full_reward_on_interpreter(name):
    assert_paid_in_full(HERE / name)


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_semantics_are_paid(name):
    assert_paid_in_full(HERE / name)


@pytest.mark.parametrize("task_id", task_ids())
def test_reference_still_correct(task_id):
    assert_reference_still_correct(task_id)


def test_every_file_is_listed():
    listed = set(CPU_CASES) | set(GPU_CASES) | set(PROBES) | set(ACCEPTED)
    assert {p.name for p in HERE.glob("p*.py")} == listed
    for p in HERE.glob("p*.py"):
        task_of(p)
