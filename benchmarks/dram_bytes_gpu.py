"""One reference call per task and GPU workload, inside a profiler range, for Nsight Compute to count
DRAM bytes: the measurement behind the ``BytesNearRoofline`` design properties (their factors are
reasoned from the code until it runs).

Each call runs once outside the range (compiles, allocator warm) and once inside it; ncu sums the
profiled kernels' DRAM reads and writes, and the script prints the roofline's bytes to divide by:

    python3 benchmarks/dram_bytes_gpu.py --list | while read -r t w; do
      ncu --profile-from-start off --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv \\
          python3 benchmarks/dram_bytes_gpu.py "$t" "$w" > "$OUT/dram_${t}_$w.csv"; done

Sum the CSV's rows (every kernel of the one profiled call) and divide by the printed roofline bytes;
the property holds where that is at most its factor. Needs a CUDA GPU; ``--list`` (the task and
workload pairs whose task has a bytes property) does not.
"""

from __future__ import annotations

import argparse
import torch

from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task, task_ids
from d2k_env.tasks.properties import BytesNearRoofline


def pairs_with_bytes_properties() -> list[str]:
    return [f"{t} {w.name}" for t in task_ids() for w in load_task(t).workloads
            if any(isinstance(p.check, BytesNearRoofline) for p in load_task(t).spec.design_properties)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", nargs="?")
    parser.add_argument("workload", nargs="?")
    parser.add_argument("--list", action="store_true", help="print the task and workload pairs and exit")
    args = parser.parse_args()
    if args.list or not (args.task and args.workload):
        print("\n".join(pairs_with_bytes_properties()))
        return
    task = load_task(args.task)
    w = task.workload(args.workload)
    reference = load_module(str(task.reference_path), f"reference_{task.id}")
    device = torch.device("cuda")
    inputs = task.make_inputs(w, torch.Generator(device=device).manual_seed(0), device)
    reference.forward(*inputs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    reference.forward(*inputs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    factor = min(p.check.factor for p in task.spec.design_properties if isinstance(p.check, BytesNearRoofline))
    print(f"{task.id} {w.name}: roofline bytes {task.roofline(w).bytes:.0f}, factor {factor:g}", flush=True)


if __name__ == "__main__":
    main()
