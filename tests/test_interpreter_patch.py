"""bf16/fp8 under Triton's CPU interpreter with d2k_env.evaluator.interpreter_patch applied.

Each check runs as a script in a fresh process with TRITON_INTERPRET=1 (forked from a warm one, see
tests/interpreted.py): Triton reads that variable when a kernel is decorated, and the patch changes
the interpreter for the whole process, so neither may leak into the other test modules of this
pytest process.
"""

import textwrap

import pytest

PRELUDE = """\
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpreterBuilder

from d2k_env.evaluator import interpreter_patch

interpreter_patch.apply()
wrapped = InterpreterBuilder.binary_op
interpreter_patch.apply()
assert InterpreterBuilder.binary_op is wrapped, "apply() is not idempotent"
torch.manual_seed(0)


def bits(t):
    return t.view(torch.uint16 if t.element_size() == 2 else torch.uint8)


def assert_bitwise(out, ref):
    nan = ref.float().isnan()
    assert torch.equal(out.float().isnan(), nan), "NaN positions differ"
    bad = (bits(out) != bits(ref)) & ~nan
    assert not bad.any(), f"{int(bad.sum())} mismatches, e.g. {ref.float()[bad][:8]} -> {out.float()[bad][:8]}"
"""


@pytest.fixture
def run_interpreted(tmp_path, interpreted):
    def run(body):
        script = tmp_path / "check.py"  # a file, not `-c`: @triton.jit needs the kernel's source
        script.write_text(PRELUDE + textwrap.dedent(body))
        proc = interpreted.run(script, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return run


def test_fp32_to_bf16_store_rounds_to_nearest_even(run_interpreted):
    run_interpreted("""
        @triton.jit
        def store_bf16(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs))  # implicit fp32 -> bf16 cast

        # Random bit patterns, then the same upper halves with the lower 16 bits set to an exact
        # tie (0x8000: even and odd neighbours), just below and just above a tie, and round-ups
        # that carry into the exponent (mantissa all ones).
        raw = torch.randint(-2**31, 2**31, (1024,), dtype=torch.int32)
        upper = raw & ~0xFFFF
        patterns = torch.cat([raw, upper | 0x8000, upper | 0x7FFF, upper | 0x8001, upper | 0x7FFFFF])
        x = torch.cat([patterns.view(torch.float32),
                       torch.tensor([3.4e38, -3.4e38, 1e-40, -1e-45, float("inf"), float("nan"), 0.0, -0.0])])
        x = torch.cat([x, torch.zeros(8192 - x.numel())])
        y = torch.empty(x.shape, dtype=torch.bfloat16)
        store_bf16[(1,)](x, y, BLOCK=x.numel())
        assert_bitwise(y, x.to(torch.bfloat16))
    """)


def test_bf16_elementwise_ops_compute_in_fp32_then_round(run_interpreted):
    run_interpreted("""
        @triton.jit
        def ops(x_ptr, y_ptr, add_ptr, sub_ptr, mul_ptr, fma_ptr, const_ptr, exp_ptr, lt_ptr, ge_ptr,
                BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            y = tl.load(y_ptr + offs)
            tl.store(add_ptr + offs, x + y)
            tl.store(sub_ptr + offs, x - y)
            tl.store(mul_ptr + offs, x * y)
            tl.store(fma_ptr + offs, tl.fma(x, y, x))
            tl.store(const_ptr + offs, x * 1.5 + tl.full([BLOCK], 0.25, tl.bfloat16))
            # tl.exp rejects bf16 (on the GPU too): kernels upcast, then round the result.
            tl.store(exp_ptr + offs, tl.exp(x.to(tl.float32)).to(tl.bfloat16))
            tl.store(lt_ptr + offs, (x < y).to(tl.int8))
            tl.store(ge_ptr + offs, (x >= -y).to(tl.int8))

        n = 4096
        x = (torch.randn(n) * 4).to(torch.bfloat16)
        y = (torch.randn(n) * 4).to(torch.bfloat16)
        add, sub, mul, fma, const, exp = (torch.empty(n, dtype=torch.bfloat16) for _ in range(6))
        lt, ge = torch.empty(n, dtype=torch.int8), torch.empty(n, dtype=torch.int8)
        ops[(1,)](x, y, add, sub, mul, fma, const, exp, lt, ge, BLOCK=n)
        xf, yf = x.float(), y.float()
        assert_bitwise(add, (xf + yf).to(torch.bfloat16))
        assert_bitwise(sub, (xf - yf).to(torch.bfloat16))
        assert_bitwise(mul, (xf * yf).to(torch.bfloat16))
        assert_bitwise(fma, (xf * yf + xf).to(torch.bfloat16))
        assert_bitwise(const, ((xf * 1.5).to(torch.bfloat16).float() + 0.25).to(torch.bfloat16))
        assert torch.equal(lt, (x < y).to(torch.int8))
        assert torch.equal(ge, (x >= -y).to(torch.int8))
        # numpy's and torch's fp32 exp differ by an ulp or two, which flips the bf16 rounding of
        # results next to a tie (exp(6.84375) = 938.00002, halfway between 936 and 940): 1 bf16 ulp.
        torch.testing.assert_close(exp.float(), xf.exp().to(torch.bfloat16).float(), rtol=2**-7, atol=0)
    """)


def test_fp32_to_fp8_rounds_and_saturates(run_interpreted):
    run_interpreted("""
        @triton.jit
        def to_fp8(x_ptr, e4_ptr, e5_ptr, e4_fnuz_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(e4_ptr + offs, x.to(tl.float8e4nv))
            tl.store(e5_ptr + offs, x.to(tl.float8e5))
            tl.store(e4_fnuz_ptr + offs, x.to(tl.float8e4b8))

        # Magnitudes from fp8 subnormals to past the largest finite values, random signs, plus
        # values whose rounding carries into the exponent and exact ties.
        mags = torch.exp2(torch.empty(4000).uniform_(-20, 17))
        special = [126.88, 126.9, 31.97, 239.9, 1.0625, 1.1875, 2**-9 * 1.5, 2**-9 * 2.5, 447.0, 449.0,
                   464.0, 61439.0, 61440.0, 1e6, float("inf"), float("nan")]
        x = torch.cat([mags * (torch.randint(0, 2, (4000,)) * 2 - 1), torch.tensor(special), -torch.tensor(special)])
        x = torch.cat([x, torch.zeros(8192 - x.numel())])
        e4 = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
        e5 = torch.empty(x.shape, dtype=torch.float8_e5m2)
        e4_fnuz = torch.empty(x.shape, dtype=torch.float8_e4m3fnuz)
        to_fp8[(1,)](x, e4, e5, e4_fnuz, BLOCK=x.numel())

        # Hopper's cvt.rn.satfinite: nearest even, out-of-range values (and inf) clamp to +-max.
        assert_bitwise(e4, x.clamp(-448, 448).to(torch.float8_e4m3fn))
        assert_bitwise(e5, x.clamp(-57344, 57344).to(torch.float8_e5m2))
        assert_bitwise(e4_fnuz, x.clamp(-240, 240).to(torch.float8_e4m3fnuz))
        assert e4.float()[:4000].abs().max() == 448 and e5.float()[:4000].abs().max() == 57344
        e4_special = e4[4000:4000 + len(special)].float().tolist()
        assert e4_special[:5] == [128.0, 128.0, 32.0, 240.0, 1.0], e4_special
        assert e4_special[8:15] == [448.0] * 7, e4_special
    """)


def test_bf16_fp8_casts(run_interpreted):
    run_interpreted("""
        @triton.jit
        def casts(x_ptr, e4_ptr, back_ptr, e5_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            e4 = x.to(tl.float8e4nv)
            tl.store(e4_ptr + offs, e4)
            tl.store(back_ptr + offs, e4.to(tl.bfloat16))
            tl.store(e5_ptr + offs, x.to(tl.float8e5))

        n = 4096
        x = (torch.randn(n) * torch.exp2(torch.empty(n).uniform_(-8, 10))).to(torch.bfloat16)
        e4 = torch.empty(n, dtype=torch.float8_e4m3fn)
        e5 = torch.empty(n, dtype=torch.float8_e5m2)
        back = torch.empty(n, dtype=torch.bfloat16)
        casts[(1,)](x, e4, back, e5, BLOCK=n)
        ref = x.float().clamp(-448, 448).to(torch.float8_e4m3fn)
        assert_bitwise(e4, ref)
        assert_bitwise(back, ref.to(torch.bfloat16))
        assert_bitwise(e5, x.float().to(torch.float8_e5m2))
    """)


def test_int_bf16_casts(run_interpreted):
    run_interpreted("""
        @triton.jit
        def casts(i_ptr, bf_ptr, back_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            b = tl.load(i_ptr + offs).to(tl.bfloat16)
            tl.store(bf_ptr + offs, b)
            tl.store(back_ptr + offs, (b * 1.5).to(tl.int32))

        n = 4096
        i = torch.cat([torch.randint(-300, 300, (n // 2,)), torch.randint(-2**24, 2**24, (n // 2,))]).int()
        bf = torch.empty(n, dtype=torch.bfloat16)
        back = torch.empty(n, dtype=torch.int32)
        casts[(1,)](i, bf, back, BLOCK=n)
        ref = i.to(torch.bfloat16)
        assert_bitwise(bf, ref)
        assert torch.equal(back, (ref.float() * 1.5).to(torch.bfloat16).to(torch.int32))
    """)


def test_bf16_reductions(run_interpreted):
    run_interpreted("""
        @triton.jit
        def reduce(x_ptr, max_ptr, min_ptr, sum_ptr, R: tl.constexpr, C: tl.constexpr):
            rows = tl.arange(0, R)
            x = tl.load(x_ptr + rows[:, None] * C + tl.arange(0, C)[None, :])
            tl.store(max_ptr + rows, tl.max(x, axis=1))
            tl.store(min_ptr + rows, tl.min(x, axis=1))
            tl.store(sum_ptr + rows, tl.sum(x, axis=1))

        R, C = 16, 128
        # tl.max/tl.min promote bf16 to fp32 in the frontend; tl.sum reduces the bf16 values.
        # Multiples of 1/8: every fp32 partial sum is exact, so the result does not depend on the
        # summation order, and the row sums (up to ~2000) still need rounding to bf16.
        x = (torch.randint(-128, 129, (R, C)) / 8).to(torch.bfloat16)
        mx, mn, sm = (torch.empty(R, dtype=torch.bfloat16) for _ in range(3))
        reduce[(1,)](x, mx, mn, sm, R=R, C=C)
        assert_bitwise(mx, x.max(dim=1).values)
        assert_bitwise(mn, x.min(dim=1).values)
        assert_bitwise(sm, x.float().sum(dim=1).to(torch.bfloat16))
    """)


def test_bf16_dot_accumulates_in_fp32(run_interpreted):
    run_interpreted("""
        @triton.jit
        def matmul(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BK: tl.constexpr):
            rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, BK)
            acc = tl.zeros((M, N), dtype=tl.float32)
            for k in range(0, K, BK):
                a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
                b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
                acc += tl.dot(a, b)
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)

        M, N, K = 32, 32, 64
        a = torch.randn(M, K).to(torch.bfloat16)
        b = torch.randn(K, N).to(torch.bfloat16)
        c = torch.empty(M, N)
        matmul[(1,)](a, b, c, M=M, N=N, K=K, BK=32)
        # bf16 products are exact in fp32; only the fp32 summation order differs.
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)
    """)


# GPU-valid kernel idioms the stock interpreter cannot run (issue 11, item 4). Each check loads and
# runs the kernel under the patched interpreter directly: the static policy is not involved.

def test_autotune_with_several_configs_runs_the_first_config(run_interpreted):
    run_interpreted("""
        def drop_big(configs, named_args, **kwargs):
            return [c for c in configs if c.kwargs["BLOCK"] < 256]

        @triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2),
                                  triton.Config({"BLOCK": 128}, num_warps=4),
                                  triton.Config({"BLOCK": 256}, num_warps=8)], key=["n"])
        @triton.jit
        def double(x_ptr, y_ptr, used_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
            tl.store(used_ptr + tl.program_id(0), BLOCK)

        # The same configs listed the other way round, with a pruning hook that drops the first one.
        @triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 128}),
                                  triton.Config({"BLOCK": 64})],
                         key=["n"], prune_configs_by={"early_config_prune": drop_big})
        @triton.jit
        def double_pruned(x_ptr, y_ptr, used_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
            tl.store(used_ptr + tl.program_id(0), BLOCK)

        for n in (300, 200):  # two tuning keys
            x = torch.randn(n)
            y = torch.empty_like(x)
            used = torch.zeros(8, dtype=torch.int32)
            double[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, used, n)
            assert torch.equal(y, 2 * x)
            assert used[:triton.cdiv(n, 64)].eq(64).all(), used  # the first config ran
            assert double.best_config.kwargs == {"BLOCK": 64}
            used.zero_()
            double_pruned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, used, n)
            assert torch.equal(y, 2 * x)
            assert used[:triton.cdiv(n, 128)].eq(128).all(), used  # the first config left after pruning

        # As on the GPU, a tuned meta-parameter may not also be passed by the caller.
        try:
            double[(1,)](x, y, used, 1000, BLOCK=32)
        except ValueError as exc:
            assert "Conflicting meta-parameters" in str(exc), exc
        else:
            raise AssertionError("a meta-parameter given twice was accepted")
    """)


def test_bool_and_scalar_kernel_arguments_used_in_if(run_interpreted):
    run_interpreted("""
        @triton.jit
        def scale(x_ptr, y_ptr, n, factor, DOUBLE, negate, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            if DOUBLE:            # a bool argument (i1 on the GPU)
                x = x * 2
            if negate:
                x = -x
            if n > 100:           # an int argument
                x = x + 1
            if factor != 1.0:     # a float argument
                x = x * factor
            tl.store(y_ptr + offs, x, mask=offs < n)

        x = torch.randn(256)
        y = torch.empty_like(x)
        for double in (True, False):
            for negate in (True, False):
                for n in (50, 200):
                    for factor in (1.0, 0.5):
                        y.zero_()
                        scale[(1,)](x, y, n, factor, double, negate, BLOCK=256)
                        ref = x[:n] * (2 if double else 1) * (-1 if negate else 1)
                        ref = (ref + (1 if n > 100 else 0)) * factor
                        torch.testing.assert_close(y[:n], ref)
    """)


def test_libdevice_functions_imported_by_name(run_interpreted):
    run_interpreted("""
        from triton.language.extra import libdevice
        from triton.language.extra.libdevice import exp, fast_expf, fma, isnan, log1p, pow, rsqrt, tanh
        from triton.language.extra.cuda import libdevice as cuda_libdevice

        @triton.jit
        def maths(x_ptr, out_ptr, nan_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(out_ptr + 0 * BLOCK + offs, rsqrt(x))
            tl.store(out_ptr + 1 * BLOCK + offs, exp(-x))
            tl.store(out_ptr + 2 * BLOCK + offs, tanh(x - 2.0))
            tl.store(out_ptr + 3 * BLOCK + offs, log1p(x))
            tl.store(out_ptr + 4 * BLOCK + offs, pow(x, 1.5))
            tl.store(out_ptr + 5 * BLOCK + offs, fma(x, x, 1.0))
            tl.store(out_ptr + 6 * BLOCK + offs, fast_expf(-x))
            tl.store(out_ptr + 7 * BLOCK + offs, libdevice.sqrt(x))          # through the module
            tl.store(out_ptr + 8 * BLOCK + offs, tl.extra.libdevice.log(x))  # through tl
            tl.store(out_ptr + 9 * BLOCK + offs, cuda_libdevice.erf(x - 2.0))  # the backend's own module
            tl.store(nan_ptr + offs, isnan(tl.where(x > 2.0, float("nan"), x)).to(tl.int8))

        B = 256
        x = torch.rand(B) * 4 + 0.01
        out = torch.empty(10, B)
        nan = torch.empty(B, dtype=torch.int8)
        maths[(1,)](x, out, nan, BLOCK=B)
        refs = [x.rsqrt(), (-x).exp(), (x - 2).tanh(), x.log1p(), x.pow(1.5), x * x + 1, (-x).exp(), x.sqrt(),
                x.log(), torch.erf(x - 2)]
        for i, ref in enumerate(refs):
            torch.testing.assert_close(out[i], ref, rtol=2e-6, atol=1e-7, msg=f"function {i}")
        assert torch.equal(nan, (x > 2).to(torch.int8))

        # A function the table lacks names itself instead of returning None.
        @triton.jit
        def bessel(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, libdevice.cyl_bessel_i0(tl.load(x_ptr + offs)))

        try:
            bessel[(1,)](x, BLOCK=B)
        except Exception as exc:
            assert "cyl_bessel_i0" in str(exc), exc
        else:
            raise AssertionError("an unimplemented libdevice function ran")
    """)


def test_cuda_device_context_and_properties_on_cpu_tensors(run_interpreted):
    run_interpreted("""
        @triton.jit
        def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        x = torch.randn(1000)
        y = torch.empty_like(x)
        with torch.cuda.device(x.device):
            props = torch.cuda.get_device_properties(x.device)
            # Answered as for the H200 the tasks target.
            assert props.multi_processor_count == 132 and props.warp_size == 32, props
            assert getattr(props, "warp_size", 64) == 32
            assert props.name == "NVIDIA H200" and (props.major, props.minor) == (9, 0)
            assert torch.cuda.get_device_properties(x.device.index).multi_processor_count == 132
            assert torch.cuda.get_device_properties("cpu").shared_memory_per_block_optin == 232448
            assert torch.cuda.get_device_capability(x.device) == (9, 0)
            assert torch.cuda.get_device_name(x.device) == "NVIDIA H200"
            grid = (min(props.multi_processor_count, triton.cdiv(1000, 128)),)
            copy[grid](x, y, 1000, BLOCK=128)
        assert torch.equal(y, x)
        with torch.cuda.device("cpu"), torch.cuda.device(x.device.index):
            pass
    """)


def test_loop_induction_variables_are_tensors_as_on_the_gpu(run_interpreted):
    run_interpreted("""
        @triton.jit
        def rows_loop(x_ptr, y_ptr, M, N: tl.constexpr):
            # A persistent loop: the row index widened to int64 before it scales an offset, as
            # kernels do so that row * N cannot overflow int32.
            for row in tl.range(tl.program_id(0), M, tl.num_programs(0)):
                base = row.to(tl.int64) * N
                cols = tl.arange(0, N)
                tl.store(y_ptr + base + cols, tl.load(x_ptr + base + cols) + row.to(tl.float32))
            for i in range(2):  # a plain range loop too
                tl.store(y_ptr + M * N + i, i.to(tl.float32) + 10)
            for j in tl.static_range(2):  # static_range stays a Python int (unrolled)
                tl.store(y_ptr + M * N + 2 + j, tl.full([], j, tl.float32))

        M, N = 7, 16
        x = torch.randn(M * N)
        y = torch.empty(M * N + 4)
        rows_loop[(3,)](x, y, M, N=N)
        ref = x.view(M, N) + torch.arange(M, dtype=torch.float32)[:, None]
        assert torch.equal(y[:M * N].view(M, N), ref)
        assert y[M * N:].tolist() == [10.0, 11.0, 0.0, 1.0]
    """)
