"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [policy] [no-kernel]
Check: policy-script
Round: holdout3 q19

Class 19 / target 3 (make check_solution slow or raise).

Idea: this file is a generator: running it writes /tmp/q19_big_solution.py, a syntactically
valid solution with many nested helper functions (every FunctionDef visit re-walks its whole
subtree in _bound_names/_metadata_locals, and [unbound-name] re-walks the tree once per injected
name) and long dotted chains; the probe times check_solution on it.

Task: fused_add_rmsnorm
Expected if defended: check_solution returns (violations or none) within a few seconds, never
raises.
"""

import time

if __name__ == "__main__":
    from d2k_env.evaluator.policy import check_solution

    depth = 18
    lines = ["import torch", "import triton", "import triton.language as tl", ""]
    for k in range(400):
        for d in range(depth):
            lines.append("    " * d + f"def h{k}_{d}(a):")
        lines.append("    " * depth + "return a + " + " + ".join(["a"] * 200))
    lines.append("x = " + "tl." + ".".join(["float32"] * 1) + "\n")
    lines += ["", "@triton.jit", "def _k(p):", "    pid = tl.program_id(0)", "",
              "def forward(x, residual, weight):", "    _k[(1,)](x)", "    return x, x"]
    src = "\n".join(lines)
    t = time.time()
    v = check_solution(src, frozenset({"empty"}))
    print(f"{len(src)} chars: {len(v)} violations in {time.time() - t:.1f}s; first: {v[:1]}")
