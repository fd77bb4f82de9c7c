"""``d2k new-task ID``: the six files of a task, as a small worked example (row-wise L2
normalisation) whose every spec field says what it means. It loads and passes the generic task
tests as written; replace the operator with yours, piece by piece."""

from __future__ import annotations

from pathlib import Path

from d2k_env.task import GUIDANCE_LAYERS

SPEC = '''"""{title}: TODO one line on the operator and where real systems run it."""

import torch

from d2k_env.tasks import (BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output,
                           PerOutput, Roofline, TaskSpec, Workload)

EPS = 1e-6  # shared with the description; the baseline and the reference keep their own copy


def make_inputs(w, gen, device):
    """The inputs of one call, drawn from ``gen`` (a torch.Generator; None on the "meta" device).
    Make them look like the real system's: value ranges, zero rows, -inf, uneven lengths."""
    M, N = w["M"], w["N"]
    x = torch.randn(M, N, generator=gen, device=device) * torch.exp(torch.randn(M, 1, generator=gen, device=device))
    if M > 1:  # an all-zero row (padding): only eps keeps its norm from dividing by zero
        x[torch.randint(M, (1,), generator=gen, device=device)] = 0
    return (x,)


def roofline(w):
    """The least HBM traffic (bytes) and floating-point work (FLOPs) one call can do."""
    return Roofline(bytes=8 * w["M"] * w["N"], flops=3 * w["M"] * w["N"])


def heldout_workloads(rng, smoke):
    """Shapes of the family drawn from ``rng`` (seeded from a submission's secret seed); with
    ``smoke``, sizes the CPU interpreter runs in seconds. Submit checks them, untimed. On every axis
    one of them goes past every workload of its backend (the spec checks it when it loads), so a
    kernel right only up to the shapes it was shown fails; each is long on one axis and narrow on
    the others, as the interpreter pays per program (a few ms each; one per row here)."""
    if smoke:  # rows past a grid capped at a constant; a row wider than one block of the GPU widths
        shapes = [(rng.randint(97, 192), rng.randint(1, 64)), (rng.randint(1, 2), rng.randint(8193, 16384)),
                  (rng.randint(6, 12), rng.randint(101, 1000))]
    else:
        shapes = [(rng.randint(4097, 16384), rng.randint(1, 256)), (rng.randint(1, 64), rng.randint(8193, 32768)),
                  (rng.randint(1, 4096), rng.randint(1, 8192))]
    return [Workload(f"{{m}}x{{n}}", {{"M": m, "N": n}}) for m, n in shapes]


TASK = TaskSpec(
    # A short name, and the family the catalogue files it under.
    title="{title}",
    family="normalisation",
    # Where real systems keep the operator (read for design, never copied).
    sources=["TODO: system path/to/file.py (function)"],
    # What forward computes: inputs with shapes and dtypes, the math, the outputs. The "Checked:"
    # sentence is added from `check` below; do not write one.
    description=f"""
Input: x [M, N] fp32. Compute, per row, in fp32:
    y = x / sqrt(sum(x * x) + eps), eps = {{EPS}}
Return y [M, N] fp32, a new tensor.
""",
    # forward's outputs in order, with their dtypes (the checker's defaults follow the dtype).
    outputs=[Output("y", torch.float32)],
    # The GPU workloads, timed; params reach make_inputs and roofline. launch_bound=True marks
    # sizes dominated by launch latency (they also get a CUDA-graph timing).
    workloads=[Workload("4096x4096", {{"M": 4096, "N": 4096}}), Workload("64x8192", {{"M": 64, "N": 8192}}, launch_bound=True)],
    # Small shapes the CPU interpreter checks in seconds; include widths that are no power of two.
    smoke_workloads=[Workload("4x64", {{"M": 4, "N": 64}}), Workload("5x100", {{"M": 5, "N": 100}})],
    # torch functions a solution may call besides the always-allowed dtypes and queries: allocation.
    allowed_torch=["empty", "empty_like"],
    make_inputs=make_inputs,
    roofline=roofline,
    # How outputs are compared: PerOutput() gives each output the default for its dtype (one
    # rounding step for bf16/fp16/fp8, a tolerance for fp32, exact otherwise); name an output to
    # choose its check, e.g. PerOutput({{"lse": Tolerance(1e-5, 1e-5, why="...")}}).
    check=PerOutput(),
    # The held-out shape family, in the sentence the prompt shows, and how shapes are drawn. Axes the
    # family holds fixed (a group size, say) are named in Heldout(..., fixed=("G",)).
    heldout=Heldout("any M >= 1 and N >= 1; submit also checks three held-out shapes drawn at random, each "
                    "long on one axis: more rows than any workload of the backend, rows wider than 8192, and "
                    "a mid-sized one", heldout_workloads),
    # What an expert kernel realises, one idea per property at the guidance layer that teaches it (L1
    # algorithm, L2 dataflow, L3 GPU tricks), each checked automatically where a fact of the replay can
    # settle it (MaxLaunches, UsesDot, NoLargeIntermediate; BytesNearRoofline needs the GPU's byte
    # counters), else left to the judge. Reported in info["properties"], never in the reward.
    design_properties=[
        DesignProperty("one_kernel", "L1", "The whole computation is one kernel launch per call", MaxLaunches(1)),
        DesignProperty("row_read_once", "L2", "Each row is read from memory once and written once: no intermediate "
                                              "buffer as large as half the output", NoLargeIntermediate(0.5)),
        DesignProperty("bytes_at_the_floor", "L2", "The bytes moved are within 10% of the roofline's",
                       BytesNearRoofline(1.1)),
        DesignProperty("reciprocal_once_per_row", "L3", "One reciprocal square root per row, then a "
                                                        "multiplication per element"),
    ],
    # Optional: in_place_inputs=(i, ...) for inputs the task updates in place, updated_inputs=
    # (UpdatedInput(i, "name", dtype),) for those whose value afterwards is checked like an output,
    # and wrong_solutions={{kind: WrongSolution(edits=... or skip="why")}} where a generated wrong
    # solution needs help.
)
'''

BASELINE = '''"""PyTorch eager baseline: the way the source system's fallback path computes it."""

import torch

EPS = 1e-6


def forward(x):
    return x / torch.sqrt(x.pow(2).sum(dim=-1, keepdim=True) + EPS)
'''

REFERENCE = '''"""Expert Triton reference: one program per row, the row in registers, read once and written once."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _l2_normalise_rows(x_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N  # int64: row * N overflows int32 on large inputs
    cols = tl.arange(0, BLOCK)
    mask = cols < N  # the last block of a width that is no power of two
    x = tl.load(x_ptr + row + cols, mask=mask, other=0.0)
    inv_norm = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) + eps)  # once per row: a multiplication per element
    tl.store(y_ptr + row + cols, x * inv_norm, mask=mask)


def forward(x):
    M, N = x.shape
    y = torch.empty_like(x)
    _l2_normalise_rows[(M,)](x, y, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y
'''

GUIDANCE = {
    "L1": "Algorithm. Each row is independent: its sum of squares, one reciprocal square root, then one "
          "multiplication per element. Computing the reciprocal once per row turns a division per element into "
          "a multiplication, and keeping the statistic in fp32 keeps the result within a few roundings of the "
          "exact answer whatever the order of the additions. The small epsilon under the root is what keeps an "
          "all-zero row finite, so it belongs to the computation, never to an optional fast path. The work is "
          "a few operations per byte moved, so the kernel is bound by memory traffic: the only aim is to read "
          "each input byte once and write each output byte once.",
    "L2": "Dataflow. One program owns one row for its whole life. The row is loaded from global memory into "
          "registers once, reduced there to a single scalar, and scaled in place in registers before the one "
          "store of the result; nothing intermediate is ever written back to global memory. Rows that are too "
          "wide for the registers of one program are walked in chunks twice, and the second pass then finds "
          "its chunks in the level-two cache rather than in device memory. The statistic never leaves the "
          "program, so no second kernel and no synchronisation between programs are needed.",
    "L3": "Low level. Round the block width up to the next power of two and mask the tail, so that widths "
          "that are no power of two stay correct without a separate code path. Use 64-bit row offsets, since "
          "rows times width exceeds the 32-bit range on the largest inputs. Scale the number of warps with "
          "the width so that each thread holds a handful of contiguous values and issues wide vector loads. "
          "For very few rows, fewer programs than processors leave the machine idle: split each row across "
          "programs only when the launch would otherwise cover a small fraction of the device.",
}


def scaffold(task_id: str, root: Path) -> list[Path]:
    """Writes task ``task_id``'s six files into task directory ``root``; refuses an id that is no
    Python identifier and never overwrites a file. Returns the paths written (spec, baseline,
    reference, guidance)."""
    if not task_id.isidentifier():
        raise ValueError(f"task id {task_id!r} is not a Python identifier")
    title = task_id.replace("_", " ").capitalize()
    files = {
        root / "tasks" / f"{task_id}.py": SPEC.format(title=title),
        root / "baselines" / f"{task_id}.py": BASELINE,
        root / "references" / f"{task_id}.py": REFERENCE,
        **{root / "guidance" / task_id / f"{layer}.md": GUIDANCE[layer] + "\n" for layer in GUIDANCE_LAYERS},
    }
    existing = [str(p) for p in files if p.exists()]
    if existing:
        raise ValueError(f"not overwriting {', '.join(existing)}")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)
