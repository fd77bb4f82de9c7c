"""How close honest solutions come to failing the task checkers, on the device's own arithmetic.

Runs each task's baseline and the given solutions (default: the references) on every workload and on
held-out shapes drawn from several seeds, applies the task's full verdict (contract, degenerate
outputs, checker), and prints per solution the verdicts and the worst errors seen. The checkers'
bounds were chosen on the CPU: this is where a GPU's exp, log, rsqrt and summation order show
whether honest kernels keep their distance. Runs in-process, without the evaluator's sandbox: give
it trusted files only. Without a GPU it runs the smoke workloads under Triton's interpreter.

    python3 benchmarks/check_margins.py [--seeds 4] [FILE ...]    (each FILE names its task: 'Task: <id>')
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if not torch.cuda.is_available():  # the smoke workloads under the interpreter, patched as the evaluator does
    os.environ["TRITON_INTERPRET"] = "1"
    from d2k_env.evaluator import interpreter_patch
    interpreter_patch.apply()

from d2k_env.evaluator.checking import as_tuple, verdict_for  # noqa: E402
from d2k_env.evaluator.worker import load_module  # noqa: E402
from d2k_env.task import load_task, task_ids  # noqa: E402


def task_of(path: Path) -> str:
    if path.stem in task_ids():
        return path.stem
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return next(t for t in task_ids() if f"Task: {t}" in doc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    files = args.files or [load_task(t).reference_path for t in task_ids()]
    print(f"device {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}, torch {torch.__version__}")
    print(f"{'solution':44} {'task':26} {'checked':>7} {'failed':>6}  worst |err| and |err| / (1 + |ref|) per output")
    failures = 0
    for path in files:
        task = load_task(task_of(path))
        solution = load_module(str(path), f"solution_{path.stem}")
        baseline = load_module(str(task.baseline_path), "baseline")
        smoke = device.type != "cuda"
        workloads = list(task.smoke_workloads if smoke else task.workloads)
        for seed in range(args.seeds):
            workloads += task.heldout_workloads(seed, smoke)
        checked = failed = 0
        worst = {name: [0.0, 0.0] for name in task.outputs}
        for i, w in enumerate(workloads):
            gen = torch.Generator(device=device)
            gen.manual_seed(1000 + i)
            inputs = task.make_inputs(w, gen, device)
            expected = as_tuple(baseline.forward(*(x.clone() for x in inputs)))
            checked += 1
            try:
                outputs = as_tuple(solution.forward(*inputs))
            except Exception as exc:  # noqa: BLE001 - a solution that fails here is reported, not fatal
                failed += 1
                print(f"  FAILED {path.name} {w.name}: raised {type(exc).__name__}: {str(exc)[:300]}")
                continue
            verdict = verdict_for(task, outputs, expected, inputs)
            for name, o, e in zip(task.outputs, outputs, expected):
                o, e = o.double(), e.double()
                both = torch.isfinite(o) & torch.isfinite(e)
                err = (o - e).abs()[both]
                if err.numel():
                    worst[name][0] = max(worst[name][0], err.max().item())
                    worst[name][1] = max(worst[name][1], (err / (1 + e.abs()[both])).max().item())
            if not verdict.ok:
                failed += 1
                print(f"  FAILED {path.name} {w.name}: {verdict.message[:200]}")
        failures += failed
        errors = "  ".join(f"{n} {a:.3g} / {r:.3g}" for n, (a, r) in worst.items())
        print(f"{path.name[:44]:44} {task.id:26} {checked:7d} {failed:6d}  {errors}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
