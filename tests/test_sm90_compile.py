"""Every reference compiles for sm_90 (H100/H200) on a machine without a GPU.

The CPU interpreter never runs Triton's GPU front end, so its type rules and the shared-memory budget
of an SM are checked nowhere else in CI. On 2026-12-07 an H100 refused three references that passed
every CPU test: a helper-calling kernel rebuilt by the replay (its namespace had no module name),
a variable whose shape an ``if`` changed, and a config asking for 296 KB of shared memory.
benchmarks/compile_sm90.py reproduced all three; here it runs on each task's published workloads and
one held-out draw, in a process of its own (it replaces Triton's driver and launch path).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from d2k_env.task import task_ids

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "benchmarks" / "compile_sm90.py"


def _tool(tmp: Path, *args: str, timeout: int) -> tuple[subprocess.CompletedProcess, list[dict]]:
    report = tmp / "report.json"
    proc = subprocess.run([sys.executable, str(TOOL), *args, "--json", str(report)], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp)
    return proc, json.loads(report.read_text()) if report.exists() else []


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    proc, reports = _tool(tmp_path_factory.mktemp("sm90"), "--seeds", "1", timeout=1800)
    assert reports, f"the tool wrote no report:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return {r["task"]: r for r in reports}


@pytest.mark.parametrize("task_id", task_ids())
def test_reference_compiles_for_sm90(reports, task_id):
    report = reports[task_id]
    assert report["compiled"] > 0, "no kernel was compiled: the reference launched nothing"
    assert not report["failures"], "\n".join(f"{f['workload']}: {f['error']}" for f in report["failures"])


# The shipped reference with an ``if`` on a run-time value that gives ``acc`` a 4-wide block where a
# CHUNK-wide one was: the interpreter runs it, Triton's GPU front end refuses it.
BROKEN_LINE = ("    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)\n",
               "    if eps > 0.5:\n        acc = tl.zeros([4], dtype=tl.float32)\n")


def test_a_kernel_the_gpu_compiler_refuses_fails_with_its_message(tmp_path):
    """The check can fail: a kernel only the GPU front end refuses is reported with Triton's message."""
    reference = (ROOT / "references" / "fused_add_rmsnorm.py").read_text()
    line, added = BROKEN_LINE
    assert line in reference
    solution = tmp_path / "solution.py"
    solution.write_text(reference.replace(line, line + added))
    proc, reports = _tool(tmp_path, "fused_add_rmsnorm", "--seeds", "0", "--solution", str(solution), timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failures = reports[0]["failures"]
    assert failures and all("the then block redefines it" in f["error"] for f in failures), failures
