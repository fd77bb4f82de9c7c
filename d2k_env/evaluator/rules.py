"""Every rule the evaluator enforces, once: the names its verdicts put in brackets.

Each rule has its threat classes (the numbered exploit classes of docs/security.md),
where it is checked, what it refuses, what an honest solution does instead, and two examples.
The verdict of a policy refusal, docs/security.md's capability table and the prompt's capability lines
are all read from here, so a rule is explained in one place. The examples of rules checked in the
source are appended to :data:`SCAFFOLD` and checked by the policy in tests/test_rules.py.

``python -m d2k_env.evaluator.rules`` rewrites that table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SOURCE = "source"  # the static policy (policy.py) refuses it in solution.py, before anything runs
RUN = "run"  # the recorder, the replay, the checker or the sandbox refuse it while the solution runs
LIMIT = "limit"  # a bound on what the policy analyses (size, time): its refused example says it in a comment


@dataclass(frozen=True)
class Violation:
    """One break of ``rule`` at ``line`` of solution.py, in the words of ``message``."""
    rule: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}"


# Prepended to the examples of every rule: a complete, honest solution minus its forward.
SCAFFOLD = '''import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, block=1024):
    y = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y
'''
# The torch allocators every shipped task allows: the examples are checked against these.
EXAMPLE_TORCH = frozenset({"empty", "empty_like", "empty_strided"})

_FORWARD = "def forward(x):\n    return launch(x)\n"


@dataclass(frozen=True)
class Rule:
    id: str  # the bracketed name in verdicts
    threats: tuple[int, ...]  # exploit classes it stops (docs/security.md)
    checked: tuple[str, ...]  # SOURCE, RUN or LIMIT
    refuses: str
    instead: str  # the honest alternative, appended to a verdict that names the rule
    refused: str  # an example the rule refuses (after SCAFFOLD)
    allowed: str = _FORWARD  # an honest solution it accepts (after SCAFFOLD)


def as_solution(example: str) -> str:
    """A rule's example as the solution.py it stands for."""
    return f"{SCAFFOLD}\n\n{example}"


def _kernel(body: str, prelude: str = "") -> str:
    """A solution whose own kernel has ``body`` as its middle line (the kernel-level examples)."""
    return f'''{prelude}@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    {body}
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def forward(x):
    y = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
'''


RULES = (
    # -- the static policy: checked on the source before anything runs --------------------------
    Rule("syntax", (19,), (SOURCE,),
         "a file that does not parse or cannot be analysed",
         "Fix the syntax error the verdict names, and keep nesting shallow.",
         "def forward(x)\n    return launch(x)\n"),
    Rule("source-size", (19,), (LIMIT,),
         "a solution.py over 256 KB",
         "Compute tables in the kernel or at launch instead of pasting them into the source.",
         "# 300 KB of pasted constants: TABLE = (0.125, 0.25, ...)\n" + _FORWARD),
    Rule("policy-time", (19,), (LIMIT,),
         "a source whose analysis takes over 10 s",
         "Write ordinary code: honest kernels are analysed in well under a second.",
         "# 90 KB of deeply nested expressions\n" + _FORWARD),
    Rule("source-text", (3,), (SOURCE, RUN),
         "line breaks other than `\\n` and `\\r\\n` (form feed, `\\x85`, `\\u2028`, ...)",
         "Use plain `\\n` (or `\\r\\n`) line ends and no control characters.",
         "# section one\x0c\n" + _FORWARD, "# section one\n" + _FORWARD),
    Rule("kernel-source", (3,), (SOURCE,),
         "kernels that are not `def`s at the top level of solution.py (only those are rebuilt and run), and "
         "lines in a kernel that start with `def` other than its own",
         "Define each kernel with `def` at the top level, decorated with `@triton.jit` (or passed to "
         "`triton.jit`); keep `def` off the start of its docstring's lines.",
         "def forward(x):\n    @triton.jit\n    def twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
         "        offs = tl.arange(0, BLOCK)\n"
         "        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)\n"
         "    y = torch.empty_like(x)\n    twice[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n"
         "    return y\n",
         "fast_copy = triton.autotune([triton.Config({}, num_warps=4)], key=[])(copy_kernel)\n\n\n" + _FORWARD),
    Rule("kernel-language", (3, 5, 6), (SOURCE,),
         "kernel code outside Triton's language: what its GPU compiler refuses (break, chained comparisons, "
         "loops over anything but range, ...), calls of arguments, Python's math, torch or module-level "
         "values that are not `tl.constexpr`",
         "Write kernels as the GPU compiles them: masks with `&`, loops over range or tl.range, tl.* functions, "
         "globals bound as `NAME = tl.constexpr(value)`.",
         _kernel("mask = 0 <= offs < n"), _kernel("mask = (offs >= 0) & (offs < n)")),
    Rule("no-kernel", (3,), (SOURCE, RUN),
         "a solution.py without a module-level `forward`, or a `forward` that launches no `@triton.jit` kernel "
         "of solution.py",
         "Define forward at module level and launch a kernel of solution.py from it as `kernel[grid](...)`.",
         "# forward is missing: only launch(x) is defined\n"),
    # -- at run time: the worker's guards, the recorder, the replay, the checker, the sandbox ---------
    Rule("torch-work", (3,), (RUN,),
         "torch compute outside your kernels (allocation, views and metadata only)",
         "Do the arithmetic in a Triton kernel; use torch only to allocate outputs and reshape views.",
         "return torch.relu(launch(x))",
         "def forward(x):\n    return launch(x.contiguous().view(-1)).view(x.shape)\n"),
    Rule("record", (3, 14), (RUN,),
         "launches the replay cannot rebuild: kernels of other files, outputs no launch or allocation made, "
         "kernel arguments and globals other than tensors, numbers, strings, dtypes and tl.constexpr",
         "Return tensors forward allocated and its kernels wrote; give kernels tensors, numbers and dtypes.",
         "return torch.ones_like(x)  # written by no kernel"),
    Rule("launch-contract", (2, 15), (RUN,),
         "launches that differ between two calls with inputs of the same shapes",
         "Let forward's launches depend only on the inputs' shapes, dtypes, strides and device, never on "
         "their values or on earlier calls.",
         "block = 1024 if x[0, 0] > 0 else 512"),
    Rule("allocation-limit", (19,), (RUN,),
         "allocating more than the task allows on a workload, for tasks whose point is bounded memory",
         "Work through the data in chunks, reusing one buffer, as the task's description says.",
         "logits = torch.empty(tokens, vocab, device=h.device)  # the whole [tokens, vocab] at once"),
    Rule("gpu-compile", (3,), (RUN,),
         "kernel code Triton's GPU compiler refuses for its values (an `if` on a block tensor, a float loop bound)",
         "Branch on scalars and loop over integer bounds, as the GPU compiles them.",
         "if tl.load(x_ptr + offs) > 0:  # a block, not a scalar"),
    Rule("launch-args", (3, 5), (RUN,),
         "kernel arguments other than tensors, numbers, strings and dtypes, and autotune hooks",
         "Pass tensors and numbers to kernels; autotune's reset_to_zero and restore_value are fine.",
         "copy_kernel[grid](x, y, {\"n\": x.numel()}, BLOCK=1024)",
         "def forward(x):\n    y = torch.empty_like(x)\n"
         "    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n    return y\n"),
    Rule("side-stream", (4,), (RUN,),
         "launches on another CUDA stream",
         "Launch every kernel on the current stream.",
         "with torch.cuda.stream(side):\n    copy_kernel[grid](x, y, n, BLOCK=1024)"),
    Rule("output-type", (7,), (RUN,),
         "outputs that are not plain `torch.Tensor`s on the inputs' device",
         "Return tensors allocated with torch.empty or torch.empty_like on the inputs' device.",
         "return LazyOutput(x)  # a torch.Tensor subclass"),
    Rule("aliasing", (8,), (RUN,),
         "outputs sharing storage with an input",
         "Allocate every output with torch.empty or torch.empty_like.",
         "return x"),
    Rule("input-mutation", (8,), (RUN,),
         "inputs changed by `forward`",
         "Write only to tensors forward allocated.",
         "copy_kernel[grid](y, x, n, BLOCK=1024)"),
    Rule("degenerate", (10,), (RUN,),
         "a constant output where the expected one varies",
         "Compute every element from the inputs.",
         "return torch.zeros_like(x)"),
    Rule("late-corruption", (2, 15), (RUN,),
         "outputs that go wrong after the timed calls",
         "Recompute from the inputs on every call.",
         "return _replay[x.data_ptr()]"),
    Rule("below-roofline", (9, 18), (RUN,),
         "a time more than 10% under the roofline floor",
         "Do all of the work: no kernel beats the memory bandwidth.",
         "copy_kernel[(1,)](x, y, 16, BLOCK=16)  # skips most of the rows"),
    Rule("out-of-bounds", (6, 20), (RUN,),
         "loads or stores outside the launch's tensors (the interpreter's bounds, guard bands around the "
         "inputs, and compute-sanitizer memcheck on a GPU submit's held-out shapes)",
         "Mask every load and store with the tensor's bounds, and store only into the tensors the kernel is given.",
         "tl.store(y_ptr + offs, v)  # no mask"),
    Rule("memory", (19,), (RUN,),
         "an evaluation over its memory limit",
         "Allocate only the outputs and the scratch the kernel needs.",
         "scratch = torch.empty(1 << 40, device=x.device)"),
    Rule("forged-result", (14,), (RUN,),
         "results from anything but the harness's own channel",
         "Return outputs from forward; nothing printed counts.",
         "os.write(3, b'{\"correct\": true}')"),
)

BY_ID = {rule.id: rule for rule in RULES}


def advice(rule_ids) -> str:
    """What to do instead, one line per distinct rule in ``rule_ids`` (in their order)."""
    return "\n".join(f"[{rid}] instead: {BY_ID[rid].instead}" for rid in dict.fromkeys(rule_ids) if rid in BY_ID)


def table() -> str:
    """docs/security.md's capability table, in markdown."""
    rows = ["| rule | checked | refuses | do instead |", "|---|---|---|---|"]
    for r in RULES:
        cells = (f"`[{r.id}]`", ", ".join(r.checked), r.refuses, r.instead)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


SECURITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BEGIN, END = "<!-- capability table: python -m d2k_env.evaluator.rules -->", "<!-- end of capability table -->"


def doc_with_table(text: str) -> str:
    """``text`` with the table between the markers replaced by :func:`table`."""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{SECURITY_DOC.name} has no {BEGIN} ... {END} block")
    return pattern.sub(lambda _: f"{BEGIN}\n{table()}\n{END}", text)


if __name__ == "__main__":
    SECURITY_DOC.write_text(doc_with_table(SECURITY_DOC.read_text()))
