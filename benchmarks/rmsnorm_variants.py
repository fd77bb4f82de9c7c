"""Experiment: why torch.compile's fused add-RMSNorm is faster than ours, and variants to close it.

Dumps inductor's generated Triton kernel, then times kernel variants (do_bench medians, cold L2):
    PYTHONPATH=. python benchmarks/rmsnorm_variants.py --out DIR
"""

import argparse
import importlib.util
import itertools
from pathlib import Path

import torch
import triton
import triton.language as tl
from torch._inductor.utils import run_and_get_code


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@triton.jit
def _variant(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, M, N, eps,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HINTS: tl.constexpr, STORE_LATE: tl.constexpr,
             I64: tl.constexpr):
    if I64:
        rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    else:
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    offs = rows[:, None] * N + cols[None, :]
    if HINTS:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        r = tl.load(r_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    else:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        r = tl.load(r_ptr + offs, mask=mask, other=0.0)
    s = x.to(tl.float32) + r.to(tl.float32)
    if not STORE_LATE:
        tl.store(ro_ptr + offs, s.to(tl.bfloat16), mask=mask)
    rstd = tl.rsqrt(tl.sum(s * s, axis=1) / N + eps)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (s * rstd[:, None] * w[None, :]).to(tl.bfloat16), mask=mask)
    if STORE_LATE:
        tl.store(ro_ptr + offs, s.to(tl.bfloat16), mask=mask)


@triton.jit
def _two_pass(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, M, N, eps,
              BLOCK_M: tl.constexpr, CHUNK: tl.constexpr):
    # inductor's shape: pass 1 streams the row in chunks (kept in L2) for the sum of squares,
    # pass 2 re-reads it (an L2 hit) to write both outputs.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = (rows < M)[:, None]
    acc = tl.zeros([BLOCK_M, CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = row_mask & (cols < N)[None, :]
        offs = rows[:, None] * N + cols[None, :]
        s = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32) + \
            tl.load(r_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += s * s
    rstd = tl.rsqrt(tl.sum(acc, axis=1) / N + eps)[:, None]
    for start in tl.range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = row_mask & (cols < N)[None, :]
        offs = rows[:, None] * N + cols[None, :]
        s = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32) + \
            tl.load(r_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + offs, (s * rstd * w[None, :]).to(tl.bfloat16), mask=mask)
        tl.store(ro_ptr + offs, s.to(tl.bfloat16), mask=mask)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    base = load("baselines/fused_add_rmsnorm.py", "b")
    dev = "cuda"
    compiled = torch.compile(base.forward, dynamic=False)
    for M, K in [(4096, 7168), (16384, 8192), (32768, 2048)]:  # same-size copies, for the fp8 quant
        src = torch.randn(3 * M * K // 8, device=dev)  # 3*M*K bytes read + written, as the quant moves
        dst = torch.empty_like(src)
        t = triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median")
        print(f"copy of {src.numel() * 8 / 1e6:.0f} MB (read+write): {t:.4f} ms "
              f"{src.numel() * 8 / t / 1e6:.0f} GB/s", flush=True)
    for M, N in [(16384, 4096), (8192, 8192), (4096, 7168), (64, 8192)]:
        x = torch.randn(M, N, device=dev).bfloat16()
        r = torch.randn(M, N, device=dev).bfloat16()
        w = torch.randn(N, device=dev).bfloat16()
        _, code = run_and_get_code(compiled, x, r, w)
        (out / f"inductor_{M}x{N}.py").write_text("\n\n".join(code))
        t_comp = min(triton.testing.do_bench(lambda: compiled(x, r, w), return_mode="median") for _ in range(3))
        nbytes = 8 * M * N
        print(f"{M}x{N}: compile {t_comp:.4f} ms {nbytes / t_comp / 1e6:.0f} GB/s", flush=True)
        BN = triton.next_power_of_2(N)
        results = []
        for bm, nw, hints, late, i64 in itertools.product([1, 2], [4, 8, 16, 32], [0], [0], [1]):
            if bm * BN // (nw * 32) < 4:
                continue
            y, ro = torch.empty_like(x), torch.empty_like(x)
            fn = lambda: _variant[(triton.cdiv(M, bm),)](x, r, w, y, ro, M, N, 1e-6, BLOCK_M=bm, BLOCK_N=BN,
                                                          HINTS=hints, STORE_LATE=late, I64=i64, num_warps=nw)
            t = triton.testing.do_bench(fn, return_mode="median")
            results.append((t, bm, nw, hints, late, i64))
        for bm, chunk, nw in itertools.product([1, 2], [1024, 2048, 4096, 8192], [8, 16, 32]):
            if bm * chunk // (nw * 32) < 4 or chunk > triton.next_power_of_2(N):
                continue
            y, ro = torch.empty_like(x), torch.empty_like(x)
            fn = lambda: _two_pass[(triton.cdiv(M, bm),)](x, r, w, y, ro, M, N, 1e-6, BLOCK_M=bm, CHUNK=chunk,
                                                           num_warps=nw)
            t = triton.testing.do_bench(fn, return_mode="median")
            results.append((t, bm, nw, f"two-pass chunk={chunk}", "-", "-"))
        results.sort(key=lambda row: row[0])
        for t, bm, nw, hints, late, i64 in results[:8]:
            print(f"   {t:.4f} ms {nbytes / t / 1e6:.0f} GB/s  BM={bm} warps={nw} hints={hints} late={late} "
                  f"i64={i64}", flush=True)


if __name__ == "__main__" and not __import__("os").environ.get("HARNESS"):
    main()


@triton.jit
def _two_pass_staged(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, CHUNK: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, CHUNK)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK, num_stages=STAGES):
        s = tl.load(x_ptr + row + start + cols, eviction_policy="evict_last").to(tl.float32) + \
            tl.load(r_ptr + row + start + cols, eviction_policy="evict_last").to(tl.float32)
        acc += s * s
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in tl.range(0, N, CHUNK, num_stages=STAGES):
        s = tl.load(x_ptr + row + start + cols, eviction_policy="evict_first").to(tl.float32) + \
            tl.load(r_ptr + row + start + cols, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + start + cols, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row + start + cols, (s * rstd * w).to(tl.bfloat16))
        tl.store(ro_ptr + row + start + cols, s.to(tl.bfloat16))


def harness_comparison():
    """Each candidate against torch.compile under the evaluator's own protocol (time_pair)."""
    from d2k_env.evaluator.timing import L2Flusher, time_pair
    from d2k_env.task import load_task

    task = load_task("fused_add_rmsnorm")
    ref = load("references/fused_add_rmsnorm.py", "ref")
    compiled = torch.compile(load("baselines/fused_add_rmsnorm.py", "b2").forward, dynamic=False)
    flush = L2Flusher(torch.device("cuda"))

    def masked(x, r, w):
        M, N = x.shape
        y, ro = torch.empty_like(x), torch.empty_like(x)
        _two_pass[(M,)](x, r, w, y, ro, M, N, 1e-6, BLOCK_M=1, CHUNK=4096, num_warps=16)
        return y, ro

    def staged(stages, chunk=4096, warps=16):
        def fwd(x, r, w):
            M, N = x.shape
            y, ro = torch.empty_like(x), torch.empty_like(x)
            _two_pass_staged[(M,)](x, r, w, y, ro, N, 1e-6, CHUNK=chunk, STAGES=stages, num_warps=warps)
            return y, ro
        return fwd

    candidates = {"reference": ref.forward, "masked": masked, "stages1": staged(1), "stages2": staged(2),
                  "stages1_c2048": staged(1, 2048), "stages3_c2048": staged(3, 2048)}
    for w in task.workloads[:2]:
        sets = lambda s: [task.make_inputs(w, torch.Generator("cuda").manual_seed(s + k), "cuda") for k in range(3)]
        a, b = sets(0), sets(10)
        for name, fn in candidates.items():
            p = time_pair(compiled, fn, a, b, a[0], b[0], flush, budget_s=1.5)
            print(f"{w.name:<12} {name:<14} compile {p.baseline.median_ms:.4f} cand {p.candidate.median_ms:.4f} "
                  f"x{p.speedup:.3f} ({p.speedup_ci[0]:.3f}-{p.speedup_ci[1]:.3f})", flush=True)


if __name__ == "__main__" and __import__("os").environ.get("HARNESS"):
    harness_comparison()
