"""The reset observation: everything an agent needs to start on a task."""

from __future__ import annotations

from d2k_env import tools
from d2k_env.evaluator import rules
from d2k_env.task import Task, Workload

LAYER_NAMES = {"L1": "L1 - algorithm", "L2": "L2 - dataflow", "L3": "L3 - low-level GPU realisation"}


def describe_inputs(task: Task, w: Workload) -> str:
    """Shapes and dtypes of a workload's inputs, read off tensors built on the meta device."""
    import torch

    parts = []
    for x in task.make_inputs(w, None, torch.device("meta")):
        if isinstance(x, torch.Tensor):
            parts.append(f"{str(x.dtype).replace('torch.', '')}[{', '.join(map(str, x.shape))}]")
        else:
            parts.append(repr(x))
    return ", ".join(parts)


def workload_table(task: Task, workloads: list[Workload]) -> str:
    rows = []
    for w in workloads:
        note = "  (launch-bound: also timed in a CUDA graph)" if w.launch_bound else ""
        rows.append(f"- {w.name}: forward({describe_inputs(task, w)}){note}")
    return "\n".join(rows)


# What a solution may do, and the rules an honest kernel author could run into, read from the rule
# registry (docs/security.md has them all); the rest follow from the contract or never
# come up in ordinary code.
PROMPT_RULES = ("kernel-source", "kernel-language", "torch-work", "launch-contract", "side-stream")
CAPABILITIES = (
    "Host code is ordinary Python: any imports, classes and wrapper objects, try/except, caches, "
    "@triton.autotune and @triton.heuristics (as decorators or applied by call), device queries, "
    "__main__ self-tests. What is checked and timed is what your kernels do: forward's launches are "
    "recorded and replayed on other inputs, so they may depend only on the inputs' shapes, dtypes, "
    "strides and device. Not allowed (a refusal names its rule in brackets and says what to do instead): "
    + "; ".join(f"{rules.BY_ID[rid].refuses} [{rid}]" for rid in PROMPT_RULES)
    + ". Every evaluation runs in a sandbox: it can write only its own scratch directory."
)


def _guidance_sections(task: Task, layers: tuple[str, ...]) -> list[str]:
    shown = ", ".join(layers) if layers else "none"
    sections = [f"## Expert guidance (layers shown: {shown})"]
    if layers:
        for layer in layers:
            sections.append(f"### {LAYER_NAMES[layer]}\n{task.guidance(layer)}")
    else:
        sections.append("No guidance layers are shown in this episode.")
    return sections


def build_design_prompt(task: Task, layers: tuple[str, ...], baseline_source: str, max_steps: int) -> str:
    """The reset observation of a design-only episode: the task, its baseline, its workloads and the
    guidance shown, and what a design should state. It names no design property: those are what
    the judge grades."""
    sections = [
        f"# Task: {task.id} - {task.title}",
        f"Family: {task.family}. Real-world sources: {'; '.join(task.sources)}.",
        "Design a Triton kernel that computes exactly what the PyTorch baseline computes, faster. This is a "
        "design-only episode: you write no code and nothing is run. State your design in prose and pseudo-code "
        "and submit it with submit_design.",
        "## What forward computes\n" + task.description,
        "## Baseline (baseline.py in your workspace, read-only)\n```python\n" + baseline_source.strip() + "\n```",
        "## Workloads (the shapes the kernel is timed on, on the GPU)\n" + workload_table(task, task.workloads),
        *(["## Held-out shapes\nThe kernel must also be correct for " + task.heldout_shapes + "."]
          if task.heldout_shapes else []),
        *_guidance_sections(task, layers),
        "## What the design states\nBe concrete and commit to choices: the algorithm (what is computed in "
        "which order, and with what precision); the dataflow (how many kernels and launches, what each program "
        "owns, what is read and written to global memory and how often, what stays on chip); and the GPU "
        "realisation (block sizes, tiling, tl.dot or element-wise work, vectorised and contiguous accesses, "
        "pipelining, atomics or not). A judge grades the design against the task's design properties, "
        "reading what it commits to, not what it says it might do.",
        "## Tools\n" + tools.manual("design"),
        "## Action format\n" + tools.format_note("design"),
        f"## Budget\nAt most {max_steps} steps; every tool call is one step. submit_design ends the episode. "
        "The episode's reward is 0: a design is graded by the judge, never rewarded.",
    ]
    return "\n\n".join(sections) + "\n"


def build_prompt(task: Task, layers: tuple[str, ...], baseline_source: str, backend: str,
                 max_steps: int, reward_note: str) -> str:
    sections = [
        f"# Task: {task.id} - {task.title}",
        f"Family: {task.family}. Real-world sources: {'; '.join(task.sources)}.",
        "Write a Triton kernel that computes exactly what the PyTorch baseline computes, faster.",
        "## What forward computes\n" + task.description,
        "## Baseline (baseline.py in your workspace, read-only)\n```python\n" + baseline_source.strip() + "\n```",
        "## Contract\n"
        "solution.py must define forward(*inputs) with the baseline's signature, returning the same "
        f"outputs ({', '.join(task.outputs)}) with the same dtypes, shapes and device, as new tensors. "
        "The work must be done by @triton.jit kernels defined at the top level of solution.py; use torch "
        "only to allocate (torch.empty, torch.zeros) and make views. Do not modify the inputs. "
        "forward's Python runs only to record its kernel launches, which are then replayed on the secret "
        "inputs without it: its launches (kernels, grids, arguments) must depend only on the inputs' "
        "shapes, dtypes, strides and device, never on their values (no .item(), no host sync), and "
        "nothing it keeps between calls reaches the replay.",
        "## What solution.py may and may not do\n" + CAPABILITIES,
        "## Workloads (timed on the GPU)\n" + workload_table(task, task.workloads),
        "## Smoke workloads (checked on the CPU interpreter backend)\n" + workload_table(task, task.smoke_workloads),
        *(["## Held-out shapes (checked on submit, never timed)\nforward must be correct for " + task.heldout_shapes
           + ". A kernel that only works on the shapes above scores 0."] if task.heldout_shapes else []),
        f"This environment's backend: {backend}. "
        + ("Evaluations check correctness and time against the baseline on the GPU workloads."
           if backend == "cuda" else
           "Evaluations check correctness on the smoke workloads with Triton's CPU interpreter; nothing is timed."),
    ]
    sections += _guidance_sections(task, layers)
    sections += [
        "## Tools\n" + tools.manual(),
        "## Action format\n" + tools.FORMAT,
        f"## Budget and reward\nAt most {max_steps} steps; every tool call is one step. Only submit is "
        f"rewarded, and it ends the episode: {reward_note}",
    ]
    return "\n\n".join(sections) + "\n"
