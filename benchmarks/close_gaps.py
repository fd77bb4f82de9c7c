"""Experiment: the two workloads where the first references missed their targets (benchmarks/NOTES.md).

- fused_add_rmsnorm 4096x7168: x0.97 against torch.compile. Candidates: the one-pass kernel at
  other warp counts, storing the new residual before the reduction, and the two-pass kernel with
  the width a compile-time constant (inductor's form, now the reference).
- per_token_group_quant_fp8 4096x7168 (88 MB): 78% of the 1 GiB copy's bandwidth but 97% of a copy
  of its own size. Candidates: other groups-per-program / warp counts, and a persistent grid.
  Diagnostic: the same kernels timed after a flush that leaves the L2 dirty (a write only, the
  protocol until 2026-12-01) and after the protocol's flush, which leaves it clean, to measure how
  much of the gap is the flush's write-back.

Every candidate is checked against the baseline, then timed against torch.compile(baseline) with
the evaluator's own protocol (time_pair: cold L2, interleaved, medians), in two rounds:
    PYTHONPATH=. python benchmarks/close_gaps.py
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from d2k_env.evaluator.checking import as_tuple, verdict_for
from d2k_env.evaluator.timing import L2Flusher, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task

DEV = torch.device("cuda")
SMS = torch.cuda.get_device_properties(DEV).multi_processor_count if torch.cuda.is_available() else 132


class DirtyFlusher(L2Flusher):
    """The protocol's flush before 2026-12-01: a write of twice the L2, whose dirty lines the timed
    call then writes back."""

    def __call__(self) -> None:
        self.buffer.zero_()


# -- RMSNorm candidates ----------------------------------------------------------------------------------

@triton.jit
def _rms_rows(x_ptr, res_ptr, w_ptr, y_ptr, ro_ptr, M, N, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    offs = rows[:, None] * N + cols[None, :]
    r = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=1) / N + eps)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (r * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + offs, r.to(ro_ptr.dtype.element_ty), mask=mask)


def rms_rows(block_m, warps):
    def forward(x, res, w):
        M, N = x.shape
        y, ro = torch.empty_like(x), torch.empty_like(x)
        _rms_rows[(triton.cdiv(M, block_m),)](x, res, w, y, ro, M, N, 1e-6, BLOCK_M=block_m,
                                               BLOCK_N=triton.next_power_of_2(N), num_warps=warps)
        return y, ro
    return forward


@triton.jit
def _rms_row_early(x_ptr, res_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK_N: tl.constexpr):
    # The one-pass kernel with the weight loaded first and the new residual stored before the
    # reduction: its store leaves the row early, so fewer values wait on the sum.
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_early(warps):
    def forward(x, res, w):
        M, N = x.shape
        y, ro = torch.empty_like(x), torch.empty_like(x)
        _rms_row_early[(M,)](x, res, w, y, ro, N, 1e-6, BLOCK_N=triton.next_power_of_2(N), num_warps=warps)
        return y, ro
    return forward


@triton.jit
def _rms_one_pass_const(x_ptr, res_ptr, w_ptr, y_ptr, ro_ptr, eps, N: tl.constexpr, BLOCK_N: tl.constexpr):
    # The one-pass kernel with the width a compile-time constant (int32 offsets, as measured).
    row = tl.program_id(0) * N
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=mask)


def rms_one_pass_const(warps):
    def forward(x, res, w):
        M, N = x.shape
        y, ro = torch.empty_like(x), torch.empty_like(x)
        _rms_one_pass_const[(M,)](x, res, w, y, ro, 1e-6, N=N, BLOCK_N=triton.next_power_of_2(N),
                                  num_warps=warps)
        return y, ro
    return forward


def reference_with_warps(ref, warps):
    def forward(x, res, w):
        M, N = x.shape
        y, ro = torch.empty_like(x), torch.empty_like(x)
        ref._rmsnorm_two_pass[(M,)](x, res, w, y, ro, 1e-6, N=N, CHUNK=min(4096, triton.next_power_of_2(N)),
                                    num_warps=warps)
        return y, ro
    return forward


def rmsnorm_candidates(ref):
    # The last round (NOTES.md, 2026-12-01). Earlier rounds' losers (two rows per program,
    # persistent grids, chunks of 1024/2048) are recorded there, not kept here.
    # int32 offsets in the reference's kernel measured the same as int64 (NOTES.md) and are gone.
    c = {"reference": ref.forward, "reference, 8 warps": reference_with_warps(ref, 8)}
    for warps in (8, 16):
        c[f"runtime-N one pass w{warps}"] = rms_rows(1, warps)
        c[f"const one-pass w{warps}"] = rms_one_pass_const(warps)
    c["early store w16"] = rms_early(16)
    return c


def dump_inductor(task_id: str, workload: str, out: str) -> None:
    """Writes inductor's generated code for one workload and prints the configs its autotuner kept."""
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.utils import run_and_get_code

    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_dump_{task_id}")
    w = next(w for w in task.workloads if w.name == workload)
    inputs = task.make_inputs(w, torch.Generator(DEV).manual_seed(0), DEV)
    torch._dynamo.reset()
    _, code = run_and_get_code(torch.compile(baseline.forward, dynamic=False), *inputs)
    with open(f"{out}/inductor_{task_id}_{workload}.py", "w") as f:
        f.write("\n\n".join(code))
    modules = PyCodeCache.modules
    for mod in (modules.values() if isinstance(modules, dict) else modules):
        for name, obj in vars(mod).items():
            if hasattr(obj, "launchers"):
                print(f"inductor {name}: " + "; ".join(str(launcher.config) for launcher in obj.launchers),
                      flush=True)


# -- fp8 quantisation candidates ------------------------------------------------------------------------

@triton.jit
def _quant_persistent(x_ptr, q_ptr, s_ptr, n_groups, groups_per_row, stride_xm, eps, fp8_max, n_progs,
                      GROUP: tl.constexpr, BLOCK_G: tl.constexpr, STAGES: tl.constexpr):
    cols = tl.arange(0, GROUP)
    n_blocks = tl.cdiv(n_groups, BLOCK_G)
    for blk in tl.range(tl.program_id(0), n_blocks, n_progs, num_stages=STAGES):
        groups = blk * BLOCK_G + tl.arange(0, BLOCK_G)
        g_mask = groups < n_groups
        row = groups // groups_per_row
        x_offs = row.to(tl.int64) * stride_xm + (groups - row * groups_per_row).to(tl.int64) * GROUP
        x = tl.load(x_ptr + x_offs[:, None] + cols[None, :], mask=g_mask[:, None], other=0.0).to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=1), eps) / fp8_max
        q = tl.clamp(x / scale[:, None], -fp8_max, fp8_max)
        q_offs = groups.to(tl.int64) * GROUP
        tl.store(q_ptr + q_offs[:, None] + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=g_mask[:, None])
        tl.store(s_ptr + groups, scale, mask=g_mask)


def quant_config(ref, groups, elems_per_warp):
    def forward(x):
        saved = ref.GROUPS_PER_PROGRAM, ref.ELEMS_PER_WARP
        ref.GROUPS_PER_PROGRAM, ref.ELEMS_PER_WARP = groups, elems_per_warp
        try:
            return ref.forward(x)
        finally:
            ref.GROUPS_PER_PROGRAM, ref.ELEMS_PER_WARP = saved
    return forward


def quant_persistent(ref, block_g, warps, per_sm, stages):
    def forward(x):
        M, K = x.shape
        gpr = K // ref.GROUP
        n_groups = M * gpr
        q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
        s = torch.empty((M, gpr), dtype=torch.float32, device=x.device)
        grid = min(triton.cdiv(n_groups, block_g), per_sm * SMS)
        _quant_persistent[(grid,)](x, q, s, n_groups, gpr, x.stride(0), ref.EPS, ref.FP8_MAX, grid, GROUP=ref.GROUP,
                                BLOCK_G=block_g, STAGES=stages, num_warps=warps)
        return q, s
    return forward


def quant_candidates(ref):
    c = {"reference": ref.forward}
    for groups, epw in ((8, 1024), (16, 1024), (32, 2048), (32, 4096), (64, 4096), (64, 8192)):
        c[f"{groups} groups, {epw}/warp"] = quant_config(ref, groups, epw)
    for block_g, warps, per_sm, stages in ((16, 1, 16, 2), (16, 2, 16, 3), (32, 2, 8, 2), (32, 4, 8, 3),
                                           (64, 4, 4, 2)):
        c[f"persistent G{block_g} w{warps} {per_sm}/SM s{stages}"] = quant_persistent(ref, block_g, warps, per_sm,
                                                                                       stages)
    return c


# -- the comparison -------------------------------------------------------------------------------------

def compare(task_id: str, workload: str, make_candidates, flushes: dict, rounds: int = 2) -> None:
    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_{task_id}")
    ref = load_module(str(task.reference_path), f"reference_{task_id}")
    compiled = torch.compile(baseline.forward, dynamic=False)
    w = next(w for w in task.workloads if w.name == workload)
    sets = lambda s: [task.make_inputs(w, torch.Generator(DEV).manual_seed(s + k), DEV) for k in range(3)]
    a, b = sets(0), sets(10)
    check_in = sets(50)[0]
    expected = as_tuple(baseline.forward(*[t.clone() for t in check_in]))
    nbytes = task.roofline(w).bytes
    print(f"\n## {task_id} {workload} ({nbytes / 1e6:.0f} MB)", flush=True)
    print(f"{'candidate':<34} {'flush':<6} {'round':<5} {'compile ms':>10} {'cand ms':>9} {'vs compile':>10} "
          f"{'95% CI':>13} {'TB/s':>6}", flush=True)
    copy_src = torch.empty(int(nbytes // 2) // 4, dtype=torch.int32, device=DEV).random_()
    copy_dst = torch.empty_like(copy_src)
    copy_sets = [(copy_dst, copy_src)] * 3
    for name, fn in make_candidates(ref).items():
        verdict = verdict_for(task, as_tuple(fn(*check_in)), expected, check_in)
        if not verdict.ok:
            print(f"{name:<34} WRONG: {verdict.message}", flush=True)
            continue
        for flush_name, flush in flushes.items():
            for rnd in range(rounds):
                p = time_pair(compiled, fn, a, b, a[0], b[0], flush, budget_s=1.5)
                ms = p.candidate.median_ms
                print(f"{name:<34} {flush_name:<6} {rnd:<5} {p.baseline.median_ms:>10.4f} {ms:>9.4f} "
                      f"{p.speedup:>9.3f}x {p.speedup_ci[0]:>6.3f}-{p.speedup_ci[1]:.3f} {nbytes / ms / 1e9:>6.2f}",
                      flush=True)
            if name != "reference":
                break  # the clean-flush diagnostic only for the reference and the copy below
    for flush_name, flush in flushes.items():
        p = time_pair(lambda d, s: d.copy_(s), lambda d, s: d.copy_(s), copy_sets, copy_sets, copy_sets[0],
                      copy_sets[0], flush, budget_s=1.0)
        print(f"{'same-size copy':<34} {flush_name:<6} {'-':<5} {'':>10} {p.candidate.median_ms:>9.4f} {'':>10} "
              f"{'':>13} {nbytes / p.candidate.median_ms / 1e9:>6.2f}", flush=True)


def main() -> None:
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="+", default=["fused_add_rmsnorm", "per_token_group_quant_fp8"])
    ap.add_argument("--workloads", nargs="+", default=["4096x7168"])
    ap.add_argument("--dump", default=None, help="folder for inductor's generated code")
    args = ap.parse_args()
    flushes = {"dirty": DirtyFlusher(DEV), "clean": L2Flusher(DEV)}
    print(f"{torch.cuda.get_device_name(DEV)}, torch {torch.__version__}, triton {triton.__version__}, {SMS} SMs")
    candidates = {"fused_add_rmsnorm": rmsnorm_candidates, "per_token_group_quant_fp8": quant_candidates}
    for task_id in args.tasks:
        if args.dump:
            dump_inductor(task_id, "4096x7168", args.dump)
        for workload in args.workloads:
            compare(task_id, workload, candidates[task_id], flushes)


if __name__ == "__main__":
    main()
