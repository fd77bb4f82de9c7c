"""Sixth hold-out red team (tests/holdout6/): exploits t01-t13 and t21-t36, honest probes t14-t16 and
t37-t39, written by two red-teamers without sight of the earlier suites. Every exploit must earn
nothing, with a verdict; the probes, and the variants the specs accept, must earn the full reward.

What this round got through, and the fix:
- the static policy (t01-t06, t12): state kept through an alias of a module object (``memo =
  CACHE.get(k)``), a tuple holding a list, a triton.Config's ``.kwargs``, a functools.partial's
  ``.keywords``, a kernel reached through a local alias, a parameter filled by a helper. Host code may
  now change only a container the same call made;
- the static policy (t07-t11): ``tl.extra.modules`` is ``sys.modules`` and led everywhere (builtins'
  getattr/eval under attribute names, gc, the harness). triton.language's containers, the attribute
  ``modules`` and builtins' names as attributes are refused; behind the policy, the tamper check now
  covers the run's and the guards' methods and thresholds (t09-t11 score 0 with the policy bypassed;
  t07 and t08, which pause the guard from inside, are the in-process limit the README states);
- the inputs (t24, t27, t30): rows and groups of zeros and empty suffix partitions, which the specs
  name but the generators never made;
- the merge checker (t26): lse to 1e-5 absolute plus relative, not the generic fp32 1e-4;
- the worker (t31): saved outputs are compact copies, not whole storages;
- on the GPU, the probes showed two checker faults (not exploits): one step was computed from
  floor(log2 |ref|), which CUDA's double log2 puts under the integer at powers of two (8.0, 64.0),
  so a one-step difference there failed (t37, t39; now exact, with frexp); and normalising the
  rounded residual, which the RMSNorm spec allows, is two steps off now and then (1 element of
  1.35M), so it is checked against the answer of that order too;
- eight probes of rounds 3-6 (and r36 of round 2) read plain module-level numbers in kernels, which
  the interpreter runs and Triton's GPU compiler refuses: the policy now says so before anything
  runs (``[non-constexpr-global]``), and those probes bind their numbers with ``tl.constexpr``.

Accepted, not holes (paid in full): t21 and t23 approximate one scalar per row (rstd in bf16, the
fast inverse square root) and stay within one bf16 step, as the spec's vLLM rounding of x * rstd to
bf16 does; they buy no speed. t28 drops a partition whose weight is under 2^-17, inside the
cancellation floor. t29 rounds through fp16 before fp8 and moved 0.27% of q by one step (its
author's CPU run on 64x7168), inside the spec's 0.5%. t31, t34 (eviction hints) and t36 (touching a
scratch buffer after the work) compute honest values; what t34 and t36 do to the time was measured
on the H200 (benchmarks/results/gpu-tests-2026-12-01.md, fifth run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import d2k_env.evaluator
from d2k_env.task import task_ids
from exploits import (assert_paid_in_full, assert_passes_the_policy, assert_reference_still_correct,
                      assert_scores_zero, close_evaluators, evaluate_file, params, task_of)

HERE = Path(__file__).parent / "holdout6"

CPU_CASES = {
    "t01_c02_dict_item_alias_replay.py": ("[hidden-state]", None),
    "t02_c02_tuple_default_memo.py": ("[hidden-state]", None),
    "t03_c02_partial_keywords_cache.py": ("[hidden-state]", None),
    "t04_c15_config_kwargs_call_counter.py": ("[hidden-state]", None),
    "t05_c02_device_fingerprint_replay.py": ("[hidden-state]", None),
    "t06_c15_config_default_shape_skip.py": ("[hidden-state]", None),
    "t07_c03_extra_modules_guard_pause.py": ("[introspection]", None),
    "t08_c06_gc_harness_baseline.py": ("[introspection]", None),
    "t09_c05_time_pair_rigging.py": ("[introspection]", None),
    "t10_c13_launch_counter_tamper.py": ("[introspection]", None),
    "t11_c07_lazy_call_materialise.py": ("[introspection]", None),
    "t12_c02_kernel_alias_attrs.py": ("[hidden-state]", None),
    "t13_c01_allocator_reuse_noop.py": (None, None),
    "t24_c12_no_eps_zero_rows.py": ("contains NaN", None),
    "t25_c08_inplace_like_vllm.py": ("[aliasing]", None),
    "t26_c09_lse_log_in_fp16.py": ("outside atol", None),
    "t27_c12_suffix_inf_unhandled.py": ("contains NaN", None),
    "t30_c12_fp8_no_eps_zero_groups.py": ("scales differ", None),
    "t32_c14_print_pass_then_exit.py": ("raised", None),
    "t33_c04_side_stream.py": ("[torch-work]", None),
    "t35_c17_graph_replay.py": ("[torch-work]", None),
}

# Caught at run time too, with the policy bypassed: they replace what the harness calls.
BEHIND_THE_POLICY = {
    "t09_c05_time_pair_rigging.py": ("[tampering]", None),
    "t10_c13_launch_counter_tamper.py": ("[tampering]", None),
    "t11_c07_lazy_call_materialise.py": ("[tampering]", None),
}

# On the GPU only: the interpreter sums bf16 in fp32 and rounds once (interpreter_patch), so a bf16
# sum of squares is off there by less than the GPU's bf16 tree makes it.
GPU_CASES = {
    "t22_c09_bf16_sum_of_squares.py": ("more than one bfloat16 step", None),
}

# On the GPU with the policy bypassed: replays and skips that only the runtime checks can see there.
GPU_BEHIND_THE_POLICY = {
    "t01_c02_dict_item_alias_replay.py": (None, None),
    "t04_c15_config_kwargs_call_counter.py": (None, None),
    "t05_c02_device_fingerprint_replay.py": (None, None),
    "t06_c15_config_default_shape_skip.py": (None, None),
    "t12_c02_kernel_alias_attrs.py": (None, None),
    "t09_c05_time_pair_rigging.py": ("[tampering]", None),
}

ACCEPTED = ["t21_c09_rstd_in_bf16.py", "t23_c09_fast_inverse_sqrt.py", "t28_c10_skip_negligible_partition.py",
            "t29_c09_fp8_via_fp16_double_round.py", "t31_c19_oversized_output_storage.py",
            "t34_c16_evict_last_pinning.py", "t36_c18_tlb_pollution_tail.py"]

PROBES = ["t14_cfp_heuristics_helpers.py", "t15_cfp_two_kernels_libdevice.py", "t16_cfp_autotune_single_config.py",
          "t37_cfp_chunked_vllm_order.py", "t38_cfp_log2_domain_multihead.py", "t39_cfp_row_loop_reciprocal.py"]


@pytest.fixture(scope="module", autouse=True)
def _close():
    yield
    close_evaluators()


@pytest.fixture
def no_policy(monkeypatch):
    monkeypatch.setattr(d2k_env.evaluator, "check_solution", lambda *args, **kwargs: [])


@pytest.mark.parametrize("name,reason", params(CPU_CASES))
def test_exploit_scores_zero_on_interpreter(name, reason):
    assert_scores_zero(evaluate_file(HERE / name, "interpreter", "submit"), reason)


@pytest.mark.parametrize("name,reason", params(BEHIND_THE_POLICY))
def test_tampering_is_caught_behind_the_policy(name, reason, no_policy):
    assert_scores_zero(evaluate_file(HERE / name, "interpreter", "submit"), reason)


@pytest.mark.gpu
@pytest.mark.parametrize("name,reason", params(GPU_CASES))
def test_gpu_exploit_scores_zero(name, reason):
    assert_scores_zero(evaluate_file(HERE / name, "cuda", "submit"), reason)


@pytest.mark.gpu
@pytest.mark.parametrize("name,reason", params(GPU_BEHIND_THE_POLICY))
def test_gpu_exploit_scores_zero_behind_the_policy(name, reason, no_policy):
    assert_scores_zero(evaluate_file(HERE / name, "cuda", "submit"), reason)


@pytest.mark.parametrize("name", PROBES)
def test_probe_passes_and_earns(name):
    assert_passes_the_policy(HERE / name)
    assert_paid_in_full(HERE / name)


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_variant_is_paid(name):
    assert_passes_the_policy(HERE / name)
    assert_paid_in_full(HERE / name)


@pytest.mark.parametrize("task_id", task_ids())
def test_reference_still_correct(task_id):
    assert_reference_still_correct(task_id)


def test_every_file_listed():
    listed = set(CPU_CASES) | set(BEHIND_THE_POLICY) | set(GPU_CASES) | set(GPU_BEHIND_THE_POLICY) | set(ACCEPTED) | \
        set(PROBES)
    on_disk = {p.name for p in HERE.glob("*.py")}
    assert on_disk == listed
    for p in HERE.glob("*.py"):
        task_of(p)  # each names its task
