"""The evaluator on the CPU backend: verdicts for broken solutions, isolation, and recovery."""

import textwrap

import pytest
import torch

from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.evaluator.checking import check_contract
from d2k_env.tasks import PerOutput, dtype_step
from d2k_env.evaluator.protocol import derive_seed
from d2k_env.evaluator.worker import portable
from d2k_env.reward import submission_reward
from d2k_env.task import load_task
from d2k_env.verdict import format_result

# A policy-abiding preamble: a copy kernel that forward bodies below launch as copy(src, dst).
HEADER = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _copy(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


    def copy(src, dst):
        _copy[(triton.cdiv(src.numel(), 1024),)](src, dst, src.numel(), BLOCK=1024)
        return dst
""")


@pytest.fixture(scope="module")
def evaluator():
    ev = Evaluator(load_task("fused_add_rmsnorm"), "interpreter", limits=PhaseLimits(default=60))
    yield ev
    ev.close()


def solution(tmp_path, body: str):
    path = tmp_path / "solution.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def test_syntax_error_is_reported_before_running(evaluator, tmp_path):
    result = evaluator.evaluate(solution(tmp_path, "def forward(x, r, w)\n    return x\n"))
    assert not result.correct and "[syntax]" in result.error and "nothing was run" in result.error


def test_missing_forward(evaluator, tmp_path):
    result = evaluator.evaluate(solution(tmp_path, "x = 1\n"))
    assert "[policy]" in result.error and "must define forward(*inputs) at module level" in result.error


def test_exception_in_forward_names_each_workload(evaluator, tmp_path):
    body = "def forward(x, r, w):\n    copy(x, torch.empty_like(x))\n    raise ValueError('boom')\n"
    result = evaluator.evaluate(solution(tmp_path, body))
    assert result.error is None and len(result.workloads) == 3
    assert all(not w.correct and "ValueError: boom" in w.message for w in result.workloads)


def test_torch_work_before_an_exception_is_named_as_the_rule_broken(evaluator, tmp_path, monkeypatch):
    monkeypatch.setattr("d2k_env.evaluator.check_solution", lambda source, allowed: [])
    body = "def forward(x, r, w):\n    copy(x, torch.empty_like(x))\n    s = x + r\n    raise ValueError('after')\n"
    result = evaluator.evaluate(solution(tmp_path, body))
    assert all(w.message.startswith("[torch-work]") and "aten.add" in w.message and "ValueError: after" in w.message
               for w in result.workloads), format_result(result)


@pytest.mark.parametrize("body, message", [
    ("def forward(x, r, w):\n    return copy(x, torch.empty_like(x))\n", "returned 1 value(s); expected 2"),
    ("def forward(x, r, w):\n    y = torch.empty(x.shape, dtype=torch.float32, device=x.device)\n"
     "    return copy(x, y), copy(r, torch.empty_like(r))\n", "dtype torch.float32; expected torch.bfloat16"),
    ("def forward(x, r, w):\n    return copy(x, torch.empty_like(x))[:1], copy(r, torch.empty_like(r))\n",
     "has shape"),
    ("def forward(x, r, w):\n    return [copy(x, torch.empty_like(x))], copy(r, torch.empty_like(r))\n",
     "[output-type] output 'y' is a list"),
])
def test_output_contract(evaluator, tmp_path, body, message):
    result = evaluator.evaluate(solution(tmp_path, body))
    assert not result.correct and message in result.workloads[0].message


def test_hang_is_killed_and_the_next_evaluation_works(tmp_path):
    task = load_task("fused_add_rmsnorm")
    ev = Evaluator(task, "interpreter", limits=PhaseLimits({"record": 15}))
    body = "def forward(x, r, w):\n    while True:\n        copy(x, torch.empty_like(x))\n"
    result = ev.evaluate(solution(tmp_path, body))
    assert not result.correct and "phase 'record' of workload 8x256 exceeded its 15 s limit" in result.error
    assert ev.evaluate(task.reference_path).correct
    ev.close()


def test_early_exit_is_a_failure_not_a_pass(evaluator, tmp_path):
    body = "print('PASSED: every workload correct')\ndef forward(x, r, w):\n    copy(x, torch.empty_like(x))\n" \
           "    raise SystemExit(0)\n"
    result = evaluator.evaluate(solution(tmp_path, body))
    assert not result.correct and all("SystemExit" in w.message for w in result.workloads)


def test_behind_the_policy_a_hard_exit_is_still_a_failure(evaluator, tmp_path, monkeypatch):
    """Defence in depth: were the static policy bypassed, os._exit still cannot forge a pass."""
    monkeypatch.setattr("d2k_env.evaluator.check_solution", lambda source, allowed: [])
    body = "import os\nprint('PASSED')\ndef forward(x, r, w):\n    os._exit(0)\n"
    result = evaluator.evaluate(solution(tmp_path, body))
    assert not result.correct and "died (exit status 0) before reporting" in result.error


def test_output_flood_is_clipped(evaluator, tmp_path):
    body = "def forward(x, r, w):\n    copy(x, torch.empty_like(x))\n    for _ in range(200000):\n" \
           "        print('spam' * 20)\n    raise ValueError('x')\n"
    result = evaluator.evaluate(solution(tmp_path, body))
    assert len(result.output) < 5000 and "output clipped" in result.output


def test_workspace_files_do_not_shadow_packages(evaluator, tmp_path):
    (tmp_path / "torch.py").write_text("raise SystemExit('shadowed!')\n")
    task = load_task("fused_add_rmsnorm")
    sol = tmp_path / "solution.py"
    sol.write_text(task.reference_path.read_text())
    assert evaluator.evaluate(sol).correct


def test_default_fp32_check_rejects_nan_and_reports_the_first_bad_element():
    import torch
    ref = torch.ones(4, 4)
    out = ref.clone()
    out[2, 3] = 1.5
    verdict = PerOutput().verdict({"y": out}, {"y": ref}, ())
    assert not verdict.ok and "first at [2, 3]" in verdict.message
    out[0, 0] = float("nan")
    assert "NaN" in PerOutput().verdict({"y": out}, {"y": ref}, ()).message
    assert check_contract((ref,), (ref,), ["y"]) is None


def test_heldout_shapes_come_from_the_secret_seed_and_only_on_submit(rmsnorm_task):
    first = rmsnorm_task.heldout_workloads(1, smoke=True)
    assert first == rmsnorm_task.heldout_workloads(1, smoke=True) != rmsnorm_task.heldout_workloads(2, smoke=True)
    assert all(w.heldout and w.name.startswith("held-out ") for w in first)
    published = {tuple(w.params.items()) for w in rmsnorm_task.workloads + rmsnorm_task.smoke_workloads}
    draws = [w for seed in range(20) for w in rmsnorm_task.heldout_workloads(seed, smoke=False)]
    assert len({tuple(w.params.items()) for w in draws} - published) >= 35  # nearly always new shapes
    ev = Evaluator(rmsnorm_task, "interpreter")
    tested = ev.evaluate(rmsnorm_task.reference_path, "test", seed=5)
    submitted = ev.evaluate(rmsnorm_task.reference_path, "submit", seed=5)
    ev.close()
    assert not any(w.name.startswith("held-out") for w in tested.workloads)
    held = [w for w in submitted.workloads if w.name.startswith("held-out")]
    assert [w.name for w in held] == [w.name for w in rmsnorm_task.heldout_workloads(derive_seed(5, "heldout"), True)]
    assert submitted.correct and all(w.correct and w.speedup is None for w in held)
    assert [w.heldout for w in submitted.workloads] == [w.name.startswith("held-out") for w in submitted.workloads]


def test_a_shape_specialised_kernel_passes_the_tests_but_scores_zero_on_submit(rmsnorm_task, tmp_path):
    # Right only for the published shapes: any other width skips the weight.
    reference = rmsnorm_task.reference_path.read_text()
    published = sorted({w["N"] for w in rmsnorm_task.workloads + rmsnorm_task.smoke_workloads})
    solution = tmp_path / "solution.py"
    solution.write_text(reference.replace(
        "    _rmsnorm_two_pass[(M,)](x, residual, weight, y, residual_out, EPS, N=N, CHUNK=chunk, num_warps=num_warps)",
        f"    w = weight if N in {published} else residual_out\n"
        "    _rmsnorm_two_pass[(M,)](x, residual, w, y, residual_out, EPS, N=N, CHUNK=chunk, num_warps=num_warps)"))
    ev = Evaluator(rmsnorm_task, "interpreter")
    seed = 11  # its held-out widths are not published ones
    assert not {w["N"] for w in rmsnorm_task.heldout_workloads(derive_seed(seed, "heldout"), True)} & set(published)
    tested = ev.evaluate(solution, "test", seed=seed)
    submitted = ev.evaluate(solution, "submit", seed=seed)
    ev.close()
    assert tested.correct, format_result(tested)
    assert submission_reward("speedup", submitted) == 0
    failing = [w.name for w in submitted.workloads if not w.correct]
    assert failing and all(name.startswith("held-out") for name in failing), format_result(submitted)


def test_dtype_step_is_the_spacing_of_the_dtype():
    values = torch.tensor([1.0, 3.0, -0.3, 0.0])
    assert dtype_step(values, torch.bfloat16).tolist() == [2.0 ** -7, 2.0 ** -6, 2.0 ** -9, 2.0 ** -133]
    assert dtype_step(torch.tensor([1.0, 300.0]), torch.float8_e4m3fn).tolist() == [0.125, 32.0]


def test_one_step_check_admits_one_rounding_step_and_no_more():
    gen = torch.Generator().manual_seed(0)  # the same values whatever ran before in the process
    ref = (torch.randn(64, 32, generator=gen) * 3).to(torch.bfloat16)
    lse = torch.randn(64, generator=gen)
    up_one = ref.view(torch.int16).add(1).view(torch.bfloat16)  # the next bf16 value away from zero
    up_two = ref.view(torch.int16).add(2).view(torch.bfloat16)

    def one_step_check(outputs, expected, names):  # the default: one step for bf16, a tolerance for fp32
        return PerOutput().verdict(dict(zip(names, outputs)), dict(zip(names, expected)), ())

    names = ["out", "lse"]
    assert one_step_check((up_one, lse + 1e-6), (ref, lse), names).ok
    two = one_step_check((up_two, lse), (ref, lse), names)
    assert not two.ok and "more than one bfloat16 step" in two.message
    assert not one_step_check((ref, lse + 1e-2), (ref, lse), names).ok  # fp32 outputs keep their tolerance
    nan = ref.clone()
    nan[3, 4] = float("nan")
    assert "NaN" in one_step_check((nan, lse), (ref, lse), names).message
    inf_ref, inf_out = ref.clone(), ref.clone()
    inf_ref[0, 0] = float("inf")
    assert "infinities" in one_step_check((inf_out, lse), (inf_ref, lse), names).message


def test_saved_outputs_hold_their_own_elements_only(tmp_path):
    """A 16-element view of a 4 MiB storage (hold-out t31): torch.save would write the whole storage.
    The layout travels unchanged (the checker refuses a transposed or strided output)."""
    big = torch.arange(2.0**20)
    views = (big[:16], big[:64].view(8, 8).t(), big[3:35:2])
    torch.save(portable(views), tmp_path / "out.pt")
    assert (tmp_path / "out.pt").stat().st_size < 8192
    for saved, view in zip(torch.load(tmp_path / "out.pt"), views):
        assert torch.equal(saved, view) and saved.stride() == view.stride()


def test_a_dataclass_under_postponed_annotations_loads(tmp_path):
    """dataclasses looks the class's module up in sys.modules; the worker registers the solution
    there while it runs, as an import would (before, such a module failed to load)."""
    from d2k_env.evaluator.worker import load_module
    path = tmp_path / "solution.py"
    path.write_text("from __future__ import annotations\nimport dataclasses\n\n"
                    "@dataclasses.dataclass(frozen=True)\nclass Launch:\n    block: int\n    warps: int = 4\n")
    assert load_module(str(path), "solution_dataclass_probe").Launch(8).warps == 4


class _Driver:
    """libcuda as ctypes sees it: cuInit and cuDeviceGetCount, with ``devices`` devices."""

    def __init__(self, devices: int):
        self.devices = devices

    def cuInit(self, flags):  # noqa: N802 - the driver's name
        return 0

    def cuDeviceGetCount(self, count):  # noqa: N802
        count._obj.value = self.devices
        return 0


@pytest.fixture
def cuda_build_of_torch(tmp_path, monkeypatch):
    """find_spec("torch") answers a package whose lib/ holds libtorch_cuda, as a CUDA build's does."""
    import importlib.util
    from types import SimpleNamespace

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libtorch_cuda.so").touch()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: SimpleNamespace(origin=str(tmp_path / "__init__.py")))


def test_quick_backend_agrees_with_torch_here():
    from d2k_env.evaluator import quick_backend, resolve_backend
    assert quick_backend("auto") == resolve_backend("auto")
    assert quick_backend("interpreter") == "interpreter" and quick_backend("cuda") == "cuda"
    with pytest.raises(ValueError, match="unknown backend"):
        quick_backend("tpu")


@pytest.mark.parametrize("devices, expected", [(1, "cuda"), (0, "interpreter")])
def test_quick_backend_of_a_cuda_build_asks_the_driver_for_devices(cuda_build_of_torch, monkeypatch, devices,
                                                                   expected):
    import ctypes
    from d2k_env.evaluator import quick_backend
    monkeypatch.setattr(ctypes, "CDLL", lambda name: _Driver(devices))
    assert quick_backend("auto") == expected


def test_quick_backend_without_a_driver_is_the_interpreter(cuda_build_of_torch, monkeypatch):
    import ctypes
    from d2k_env.evaluator import quick_backend

    def no_driver(name):
        raise OSError(f"{name}: cannot open shared object file")
    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    assert quick_backend("auto") == "interpreter"



@pytest.mark.parametrize("devices, visible, reason", [
    (1, None, None), (0, None, "the CUDA driver finds no GPU"),
    (0, "", "the CUDA driver finds no GPU (CUDA_VISIBLE_DEVICES='')")])
def test_no_gpu_reason_names_what_is_missing(cuda_build_of_torch, monkeypatch, devices, visible, reason):
    import ctypes
    from d2k_env.evaluator import no_gpu_reason
    monkeypatch.setattr(ctypes, "CDLL", lambda name: _Driver(devices))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert no_gpu_reason() == reason


def test_no_gpu_reason_of_a_cpu_build_or_without_a_driver(cuda_build_of_torch, tmp_path, monkeypatch):
    import ctypes
    from d2k_env.evaluator import no_gpu_reason

    def no_driver(name):
        raise OSError(f"{name}: cannot open shared object file")
    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    assert no_gpu_reason() == "no CUDA driver (libcuda.so.1 cannot be loaded)"
    (tmp_path / "lib" / "libtorch_cuda.so").unlink()
    assert no_gpu_reason() == "the installed torch is a CPU-only build"
