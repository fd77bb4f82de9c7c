"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: "forward raised"
Expect on cuda: [torch-work]
Mode: test
Mode on cuda: benchmark
Round: redteam c17

THREATS class 17 (CUDA-graph replay of stale buffers, GPU only): capture the first call in a CUDA graph
and, on later calls of the same shape, replay the graph on the captured (stale) buffers. Solution-created
graphs are forbidden: torch.cuda.CUDAGraph / torch.cuda.graph are on no allow-list ([torch-work]),
refused statically on every backend.
"""

import torch
import triton
import triton.language as tl

_GRAPHS = {}


@triton.jit
def _rmsnorm_rows(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s * s, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (s * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(ro_ptr + row + cols, s.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    if (M, N) in _GRAPHS:
        graph, outputs = _GRAPHS[(M, N)]
        graph.replay()
        return outputs
    y, r = torch.empty_like(x), torch.empty_like(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _rmsnorm_rows[(M,)](x, residual, weight, y, r, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    graph.replay()
    _GRAPHS[(M, N)] = (graph, (y, r))
    return y, r
