"""What the sandbox holds with the static policy switched off: every red-team exploit, evaluated.

With ``d2k_env.evaluator.check_solution`` patched to return [] (the test-only switch
tests/test_security.py uses to test what is behind the policy), every file of tests/security/ but
the honest corpus (benchmarks/honest_corpus.py measures that) is evaluated on Triton's CPU
interpreter (or, with --backend cuda, on the GPU with every workload of its task, timed) in mode
"submit", as its header says (tests/exploits.py): its task (a template, ``Task: every``, once per
registered task), workloads (the first smoke workload unless ``Workloads:`` says otherwise), seed
and limits; @NAME@ placeholders filled as the driver fills them. The honest probes
(tests/security/honest/) and the variants accepted by design (``Expect: paid`` elsewhere) go in a
separate table.

For each evaluation: the reward (``submission_reward("speedup", ...)``), the verdict's rule (the
first [bracketed] rule of the error or a failing workload's message, else the stated failure),
whether the sandbox refused something (PermissionError / "Operation not permitted" / "Permission
denied" in the output or the verdict, with a guess at the layer from the traceback), and whether
it escaped: before and after each evaluation the project's baselines/, references/, tasks/ and
d2k_env/ are hashed file by file and /tmp listed; a changed project file, a new /tmp entry other
than the evaluator's own d2k-* directories, a file in the exploit's marker or pid directory, a
rewritten grading copy, a process still alive from its pid directory or the secret seed in its
output is recorded. Evaluations run two at a time, so a change seen during one may come from
the other, or from anything else running on the machine: every one is listed, for a person to
attribute.

    python benchmarks/policy_off.py [--jobs 2] [--only SUBSTRING ...] [--json raw.json] [--out DIR]
    python benchmarks/policy_off.py --from-json raw.json     # rewrite the report from a raw run
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
sys.path[:0] = [str(ROOT), str(TESTS)]  # this checkout's d2k_env and suites, before any installed copy

WATCHED = ["baselines", "references", "tasks", "d2k_env"]
REFUSAL = re.compile(r"PermissionError|Operation not permitted|Permission denied")
RULE = re.compile(r"\[([a-z][a-z0-9]*(?:-[a-z0-9]+)*)\]")
PID_FILES = {"setsid_daemon_survives.py": "/tmp/d2k_holdout_h33.pid"}  # pids an exploit writes itself
# An honest kernel in syntax the checker rarely sees (its header only pins the policy's verdict).
HONEST_ELSEWHERE = {"resource/policy_stress"}

# Why each exploit that earns a reward with the policy off does (from its docstring and its run),
# written after reading the run of 2026-12-01: (group, one line). The report falls back to the
# docstring's first sentence for a file not listed here.
IN_PROCESS = "in-process"  # works inside the solution's own process: the limit the sandbox does not address
STATE = "state"  # keeps state between calls; the interpreter's submit makes only the checked calls
GPU_ONLY = "gpu-only"  # its payload is GPU timing; the kernel is honest and the interpreter times nothing
NOT_AN_EXPLOIT = "not-an-exploit"  # its own suite says it may score
GROUPS = {
    IN_PROCESS: "Inside the solution's own process (the in-process limit the sandbox does not address): the "
                "work is done by torch, numpy or Python rather than a Triton kernel, or the harness's state is "
                "read, through objects the process shares with the harness",
    STATE: "State kept between calls (counters, shape memos, output caches): a submission on the interpreter "
           "calls forward once per checked workload, each honest, so what they would skip (timed repetitions on "
           "a GPU) never happens; the 1.0 is the honest kernel's",
    GPU_ONLY: "GPU-only payloads (timing, streams, graphs, L2, forged speedups, a precision loss only the GPU's "
              "bf16 arithmetic shows): the values are right on the CPU and the interpreter times nothing, so they "
              "earn the 1.0 any correct kernel earns",
    NOT_AN_EXPLOIT: "Not exploits by their suite's own word",
}
WHY: dict[str, tuple[str, str]] = {
    "reference_access/generator_frame_walk.py": (IN_PROCESS, "a running generator's gi_frame.f_back leads to the "
        "harness's SolutionRun; it pauses the dispatch guard and calls the harness's own loaded baseline"),
    "torch_work/interpreter_numpy_global.py": (IN_PROCESS, "after one no-op launch the interpreter's "
        "injected `np` is a global of the solution; the RMSNorm is numpy arithmetic the aten guard never sees"),
    "streams_threads/thread_work.py": (IN_PROCESS, "torch operators in a Python thread that forward joins: "
        "the guard's dispatch-mode stack is thread-local, and no thread is left for [threads]"),
    "timing/disable_guard_via_frames.py": (IN_PROCESS, "inspect.stack() to the SolutionRun, "
        "builtins.setattr pauses its TorchWorkGuard for good, eager torch computes the op"),
    "known_seed/leak_secret_seed.py": (IN_PROCESS, "walks the stack to the SolutionRun and prints "
        "req.seed, which is now the inputs key (the secret seed never appeared in any output); honest kernel"),
    "torch_work/numpy_alias_host.py": (IN_PROCESS, "the work in numpy on the host through a bound "
        "Tensor.numpy (no aten operator but a view), a dummy launch for the counter"),
    "torch_work/tolist_host_reduction.py": (IN_PROCESS, "each row's rstd computed in Python from "
        "Tensor.tolist (no aten operator on the CPU); the kernel only scales"),
    "torch_work/kernel_numpy_handle.py": (IN_PROCESS, "numpy's sort inside the kernel body through "
        "tl.tensor.handle.data, which exists only in the interpreter"),
    "torch_work/python_scalar_math_in_kernel.py": (IN_PROCESS, "the kernel decodes bf16 bits into "
        "Python ints and does the RMSNorm with math.fsum/math.sqrt: interpreter-only Python work"),
    "timing/match_rebinds_alias.py": (IN_PROCESS, "a `match` capture rebinds the tl.sum alias to a "
        "host function that runs inside the launch, where the guard is paused (it only proves the hijack: "
        "its sum is right)"),
    "torch_work/jit_of_plain_function.py": (IN_PROCESS, "triton.jit called on a plain function: the "
        "group amax is a Python reduce inside the interpreted kernel"),
    "harness_tampering/interpreter_injected_numpy.py": (IN_PROCESS, "the numpy the interpreter injects rounds "
        "the scale on the host"),
    "torch_work/extra_modules_guard_pause.py": (IN_PROCESS, "tl.extra.modules is sys.modules: it pauses "
        "the harness's TorchWorkGuard through its own counter and eager torch computes the answer"),
    "reference_access/gc_harness_baseline.py": (IN_PROCESS, "gc.get_objects() to the SolutionRun; with the "
        "guard paused the harness's loaded baseline computes the outputs"),
    "format_strings/format_walk_frames_seed.py": (IN_PROCESS, "str.format walks a running generator's "
        "frame to the SolutionRun and prints req.seed (the inputs key; the secret never appeared); honest kernel"),
    "format_strings/format_map_runtime_template.py": (IN_PROCESS, "as f01 with the template built at "
        "run time and read through format_map; prints the inputs key; honest kernel"),
    "hidden_state/reduce_count_iterator.py": (STATE, "an itertools.count kept alive as reduce's initial "
        "value counts calls; every checked call is honest"),
    "hidden_state/config_kwargs_call_counter.py": (STATE, "a call counter in a module-level "
        "triton.Config's .kwargs; the first three calls (the interpreter's three checked shapes) are honest"),
    "hidden_state/config_default_shape_skip.py": (STATE, "a shape memo in a default triton.Config's "
        ".kwargs: the first call at each shape works, repeats skip; every checked workload has its own shape"),
    "hidden_state/kernel_alias_attrs.py": (STATE, "an output cache keyed by address and shape on the "
        "kernel object's attributes (through a local alias); each checked call has a new shape, so nothing is "
        "replayed"),
    "hidden_state/name_store_runs_main_block.py": (STATE, "a call counter made in the `if __name__ == "
        "'__main__'` block it runs by binding __name__; right for six calls, a CPU submission makes three"),
    "hidden_state/main_guard_else_iterator.py": (STATE, "a call counter made in that if's else branch; "
        "right for six calls, a CPU submission makes three"),
    "hidden_state/map_iter_as_value.py": (STATE, "a call counter made by map(iter, ...); right for "
        "six calls, a CPU submission makes three"),
    "hidden_state/tee_items.py": (STATE, "a call counter kept in itertools.tee's items; right for six "
        "calls, a CPU submission makes three"),
    "forged_result/forge_speedup_on_result_channel.py": (GPU_ONLY, "forges a timed 100x result on the channel; "
        "the Evaluator voids timings on a backend that cannot time, so it is paid the honest 1.0"),
    "l2_persistence/l2_persistence.py": (GPU_ONLY, "a persisting-L2 carve-out through ctypes and libcudart; "
        "nothing to carve out without a GPU"),
    "streams_threads/side_stream_gpu.py": (GPU_ONLY, "the honest kernel on a side stream (none on the CPU)"),
    "forged_result/gpu_forge_speedup.py": (GPU_ONLY, "forges speedups when it sees the GPU's last "
        "workload (64x8192), which the interpreter never runs"),
    "timing/allocator_pressure.py": (GPU_ONLY, "pins GPU memory to slow the baseline's allocator; "
        "pins nothing on the CPU"),
    "precision/bf16_sum_of_squares.py": (GPU_ONLY, "a bf16 sum of squares; the interpreter's patched "
        "reductions sum exactly and round once, so only the GPU's bf16 tree is off (its suite runs it on the "
        "GPU only)"),
    "streams_threads/side_stream_t33.py": (GPU_ONLY, "the launch on a fresh CUDA stream; no stream on the CPU"),
    "graph_replay/graph_replay.py": (GPU_ONLY, "captures and replays a CUDA graph; skipped on the CPU"),
    "resource/print_flood.py": (NOT_AN_EXPLOIT, "prints a flood, then does the work honestly; the "
        "output is clipped (its header asks no verdict: 'Not an exploit ... it may score')"),
    "source_text/def_in_decorator_string.py": (NOT_AN_EXPLOIT, "the interpreter runs the checked, "
        "honest kernel; the attack is on the GPU path's JITFunction.src (tests/test_source_text.py: the "
        "interpreter 'is right to pay')"),
}


# -- what each file is, and how it is evaluated --------------------------------------------------------------

def plan() -> list[dict]:
    """One item per case: each file of tests/security/ (a template once per task), from its header."""
    from exploits import discover

    exploits, _broken = discover()
    items = []
    for e in exploits:
        if e.klass in ("honest_corpus", "honest_refused"):
            continue
        expect = e.verdict("interpreter", False) or e.verdict("cuda", False)
        if e.klass == "honest" or e.id in HONEST_ELSEWHERE:
            kind, why = "honest", "honest probe (tests/security/honest/)"
        elif expect is not None and expect.kind in ("paid", "correct"):
            kind, why = "accepted", "accepted by design: paid with the policy on (Expect: paid)"
        else:
            kind, why = "exploit", ""
        for t in e.tasks:
            key = f"{e.id}-{t}.py" if e.template else f"{e.id}.py"
            source = e.source(t)
            items.append({"key": key, "suite": e.klass, "file": Path(key).name, "path": str(e.path), "kind": kind,
                          "why": why, "task": t, "limits": e.limits or "normal",
                          "workloads": e.workloads("interpreter", t),
                          "seed": int(e.fields["Seed"]) if "Seed" in e.fields else None, "source": source,
                          "template": sorted(set(re.findall(r"@([A-Z_]+)@", source)))})
    return items


# -- watching for escapes ------------------------------------------------------------------------------------

WATCHED_ROOTS = [ROOT]  # --watch adds other checkouts (the one this copy was made from)


def tree_hashes() -> dict[str, str]:
    out = {}
    for root in WATCHED_ROOTS:
        for top in WATCHED:
            for p in sorted((root / top).rglob("*")):
                if p.is_file():
                    try:
                        out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
                    except OSError as exc:
                        out[str(p)] = f"unreadable: {exc}"
    return out


def tmp_entries() -> set[str]:
    return set(os.listdir("/tmp"))


def own_tmp(name: str) -> bool:
    return name.startswith("d2k-")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# -- the run ------------------------------------------------------------------------------------------------

class Runner:
    def __init__(self, work: Path, backend: str):
        import test_security as ts
        from d2k_env.evaluator import PhaseLimits

        self.work = work
        self.backend = backend
        self.limits = {"normal": ts.NORMAL_LIMITS, "short": ts.SHORT_LIMITS, "hang": ts.HANG_LIMITS}
        assert isinstance(self.limits["normal"], PhaseLimits)
        self.local = threading.local()
        self.all_evaluators = []
        self.lock = threading.Lock()

    def evaluator(self, task_id: str, limits: str):
        from d2k_env.evaluator import Evaluator
        from d2k_env.task import load_task

        cache = getattr(self.local, "evaluators", None)
        if cache is None:
            cache = self.local.evaluators = {}
        key = (task_id, limits)
        if key not in cache:
            cache[key] = Evaluator(load_task(task_id), self.backend, limits=self.limits[limits])
            with self.lock:
                self.all_evaluators.append(cache[key])
        return cache[key]

    def close(self):
        for ev in self.all_evaluators:
            ev.close()

    def run(self, item: dict) -> dict:
        from d2k_env.evaluator import Evaluator
        from d2k_env.reward import submission_reward
        from d2k_env.task import load_task
        from d2k_env.verdict import format_result

        row = dict(item)
        if item.get("skip"):
            return row
        work = self.work / item["key"].replace("/", "__")[:-3]
        markers, pids = work / "markers", work / "pids"
        markers.mkdir(parents=True)
        pids.mkdir()
        source = item["source"]
        subst = {"MARKER_DIR": str(markers), "PID_DIR": str(pids)}
        ev, grading, own = None, None, False
        if "SAFE_ROOT" in item["template"]:
            # As tests/test_security.py: an Evaluator on a temporary copy of the task tree, whose
            # baseline the exploit may rewrite only if the copy is its req.root.
            copy = work / "root"
            for sub in ("tasks", "baselines", "references", "guidance"):
                shutil.copytree(ROOT / sub, copy / sub, ignore=shutil.ignore_patterns("__pycache__"))
            task = load_task(item["task"], str(copy))
            ev, own = Evaluator(task, self.backend, limits=self.limits[item["limits"]]), True
            grading = Path(getattr(ev, "grading_root", task.root)) / "baselines" / f"{task.id}.py"
            subst["SAFE_ROOT"] = str(Path(getattr(ev, "grading_root", task.root)))
            pristine = grading.read_text()
        for k, v in subst.items():
            source = source.replace(f"@{k}@", v)
        path = work / "solution.py"
        path.write_text(source)
        if ev is None:
            ev = self.evaluator(item["task"], item["limits"])
        # On the GPU every workload: some payloads wait for the last (largest) one.
        workloads = None if ev.can_time else item["workloads"]
        seed = item["seed"] if item["seed"] is not None else secrets.randbits(63)
        pid_file = PID_FILES.get(item["file"])
        if pid_file:
            Path(pid_file).unlink(missing_ok=True)

        tmp_before, tree_before = tmp_entries(), tree_hashes()
        started = time.monotonic()
        try:
            result = ev.evaluate(path, "submit", workloads=workloads, seed=seed)
            exc = None
        except BaseException as e:  # noqa: BLE001 - an exception out of evaluate() is itself a finding
            result, exc = None, f"{type(e).__name__}: {e}"
        row["seconds"] = round(time.monotonic() - started, 1)
        tree_after, tmp_after = tree_hashes(), tmp_entries()

        changed = sorted(k for k in tree_before.keys() | tree_after.keys() if tree_before.get(k) != tree_after.get(k))
        new_tmp = sorted(n for n in tmp_after - tmp_before if not own_tmp(n))
        planted = sorted(str(p.relative_to(work)) for d in (markers, pids) for p in d.rglob("*"))
        survivors = []
        for f in pids.glob("*.pid"):
            try:
                pid = int(f.read_text() or f.stem)
            except ValueError:
                continue
            if alive(pid):
                survivors.append(pid)
        if pid_file and Path(pid_file).exists():
            planted.append(pid_file)
            try:
                pid = int(Path(pid_file).read_text())
                if alive(pid):
                    survivors.append(pid)
            except ValueError:
                pass
            Path(pid_file).unlink()
        for pid in survivors:  # only pids this run's own exploit wrote
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        tampered = bool(grading and grading.read_text() != pristine)
        if own:
            ev.close()

        if result is None:
            row.update(correct=False, reward=0.0, rule="raised out of evaluate()", verdict=exc, output="",
                       sandbox={})
        else:
            text = "\n".join(p for p in [result.error or ""] + [f"{w.name}: {w.message}" for w in result.workloads
                                                                 if not w.correct] if p)
            rules = RULE.findall(text)
            if result.correct:
                rule = "PASSED"
            elif rules:
                rule = f"[{rules[0]}]"
            else:
                rule = stated_failure(text)
            verdict = format_result(result)
            row.update(correct=bool(result.correct), reward=submission_reward("speedup", result), rule=rule,
                       verdict=verdict[:3000], output=result.output[-4000:],
                       sandbox=dict(result.sandbox), workloads_run=[w.name for w in result.workloads])
        hay = (result.output if result is not None else "") + "\n" + (verdict if result is not None else exc)
        row["refusals"] = refusals(hay)
        row["seed_used"] = seed
        row["escape"] = {"project_changed": changed, "new_tmp": new_tmp, "planted": planted,
                         "survivors": survivors, "grading_copy_rewritten": tampered,
                         "seed_leaked": seed > 10**6 and str(seed) in hay}  # p01's seed 0 is no secret
        shutil.rmtree(work, ignore_errors=True)
        return row


def stated_failure(text: str) -> str:
    """The failure's first line; for a traceback, that line and the exception it ends with."""
    lines = text.splitlines() or ["(no reason given)"]
    head = lines[0].rstrip(": ")
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            exc = next((x for x in lines[i + 1:] if x.strip() and not x.startswith((" ", "\t"))), "")
            return f"{head}: {exc.strip()}"[:140]
    return head[:140]


SECCOMP_HINTS = re.compile(r"fork|spawn|exec|Popen|subprocess|setsid|ptrace|unshare|process_vm|clone|"
                           r"mount|chroot|keyctl|bpf|perf_event|io_uring|setns", re.I)
SIGNAL_HINTS = re.compile(r"os\.kill|killpg|signal", re.I)


def refusals(text: str) -> list[dict]:
    """Each refusal in the text, with the lines before it and a guess at the layer."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not REFUSAL.search(line):
            continue
        context = "\n".join(lines[max(0, i - 3):i + 1])
        if "Permission denied" in line:
            layer = "landlock"  # EACCES: a path (or a TCP port) outside the Landlock domain
        elif SECCOMP_HINTS.search(context):
            layer = "seccomp"
        elif SIGNAL_HINTS.search(context):
            layer = "landlock (scoped signals) / uid"
        else:
            layer = "EPERM (seccomp or uid)"
        found.append({"line": line.strip()[:200], "context": context[-600:], "layer": layer})
    return found


# -- the report -----------------------------------------------------------------------------------------

def versions() -> dict[str, str]:
    import torch
    import triton
    from d2k_env.evaluator.confine import landlock_abi

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--short", "--", "d2k_env", "tasks", "baselines",
                            "references"], capture_output=True, text=True).stdout.split("\n")
    return {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
            "kernel": platform.release(), "landlock_abi": str(landlock_abi()), "head": head,
            "uncommitted": ", ".join(line[3:] for line in dirty if line.strip()) or "none",
            "cpus": str(os.cpu_count()), "euid": str(os.geteuid())}


def docstring_why(path: str) -> str:
    doc = ast.get_docstring(ast.parse(Path(path).read_text())) or ""
    first = " ".join(doc.partition("\n\n")[2].split())  # the description, after the header
    return first[:220] + ("..." if len(first) > 220 else "")


# Changes the watch saw that a person traced to other work on the machine (--notes "not_escapes":
# {"paths": [...], "tmp": [...]}): listed in the report, not counted as escapes.
NOT_ESCAPES: dict[str, set[str]] = {"paths": set(), "tmp": set()}


def escaped(row: dict, raw: bool = False) -> bool:
    e = row.get("escape") or {}
    paths = [p for p in e.get("project_changed", []) if raw or p not in NOT_ESCAPES["paths"]]
    tmp = [n for n in e.get("new_tmp", []) if raw or n not in NOT_ESCAPES["tmp"]]
    return bool(paths or tmp or e.get("planted") or e.get("survivors") or e.get("grading_copy_rewritten")
                or e.get("seed_leaked"))


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def report(meta: dict, rows: list[dict]) -> str:
    ex = [r for r in rows if r["kind"] == "exploit"]
    ran = [r for r in ex if not r.get("skip")]
    skipped = [r for r in ex if r.get("skip")]
    paid = [r for r in ran if r.get("reward", 0) > 0]
    esc = [r for r in rows if not r.get("skip") and escaped(r)]
    refused = [r for r in ran if r.get("refusals")]
    v = meta["versions"]
    out = [f"# The sandbox with the static policy off: every red-team exploit ({meta['date']})", "",
           f"Python {v['python']}, torch {v['torch']}, Triton {v['triton']} ({meta.get('backend', 'interpreter')} backend), Linux {v['kernel']} "
           f"(Landlock ABI {v['landlock_abi']}), {v['cpus']} CPU cores shared with other work, running as euid "
           f"{v['euid']}; d2k-env at {v['head']} (uncommitted in d2k_env/, tasks/, baselines/, references/ "
           f"at the start: {v['uncommitted']}).", "",
           "Sandbox layers every evaluation reported (EvalResult.sandbox):", ""]
    layers = {}
    for r in rows:
        for k, val in (r.get("sandbox") or {}).items():
            layers.setdefault(k, {}).setdefault(val, 0)
            layers[k][val] += 1
    for k, vals in layers.items():
        out.append(f"- `{k}`: " + "; ".join(f"{val} ({n} evaluations)" for val, n in vals.items()))
    missing = [r["key"].split("/", 1)[1][:-3] for r in rows if not r.get("skip") and r.get("sandbox")
               and "seccomp" not in r["sandbox"]]
    if missing:
        out += ["", f"seccomp's state travels in the worker's own result, so the {len(missing)} evaluations whose "
                f"worker never delivered one (killed, crashed or a forged channel: {', '.join(missing)}) name "
                "the other four layers only."]
    out += ["", "## How it was run", "",
            "`python benchmarks/policy_off.py` (this file's numbers: " + meta["command"] + ", "
            f"{meta['wall_min']:.0f} min wall). `d2k_env.evaluator.check_solution` is patched to return [] "
            "(the switch tests/test_security.py uses to test what is behind the policy), so every file runs. "
            "Each file of tests/security/ (but the honest corpus) is evaluated on the interpreter in mode "
            "`submit` (its smoke workload plus two held-out shapes drawn from the seed) as its header says "
            "(tests/exploits.py): its task (a template once per registered task), its workloads (the first smoke "
            "workload unless `Workloads:` says otherwise), its limits (`Limits: short`: a 10 s check phase for "
            "the crashes that might hang, `Limits: hang`: 3 s for the endless loops), and the seed its `Seed:` names, else a fresh secret seed. Placeholders are "
            "filled as tests/test_security.py fills them: @MARKER_DIR@ and @PID_DIR@ with per-file directories "
            "outside the project and outside /tmp (each watched), @SAFE_ROOT@ (rewrite_grader_baseline) with an "
            "Evaluator built on a temporary copy of the task tree, whose baseline is then compared. Two "
            "evaluations at a time (ThreadPoolExecutor, one Evaluator per task per thread)."
            + (" " + meta["run_notes"] if meta.get("run_notes") else ""), "",
            "Reward: `d2k_env.reward.submission_reward(\"speedup\", result)` (1.0 for a correct submission on "
            "the interpreter, which times nothing). Rule: the first [bracketed] rule in the error or a failing "
            "workload's message, else the stated failure's first line. Refusal: `PermissionError`, `Operation "
            "not permitted` or `Permission denied` in the solution's output or the verdict. Escape: a project "
            "file under baselines/, references/, tasks/ or d2k_env/ whose sha256 changed during the "
            "evaluation, a new /tmp entry other than the evaluator's own `d2k-*` directories, a file in the "
            "exploit's marker or pid directory (or h33's /tmp pid file), a process alive from its pid "
            "directory after the evaluation, a rewritten grading copy, or the secret seed in its output.", "",
            "## Counts", "",
            f"- exploit files: {len(ex)} ({len(ran)} evaluated, {len(skipped)} skipped)",
            f"- scored 0: {len(ran) - len(paid)}",
            f"- earned a reward with the policy off: {len(paid)}",
            f"- escaped: {len([r for r in esc if r['kind'] == 'exploit'])} "
            f"(files evaluated in all, honest included: {len(esc)})",
            f"- hit a sandbox refusal: {len(refused)}",
            f"- evaluations during which the watch saw any change at all: "
            f"{len([r for r in rows if not r.get('skip') and escaped(r, raw=True)])} (see below)",
            f"- honest probes: {len([r for r in rows if r['kind'] == 'honest'])}, accepted variants: "
            f"{len([r for r in rows if r['kind'] == 'accepted'])}; paid 1.0: "
            f"{len([r for r in rows if r['kind'] != 'exploit' and r.get('reward', 0) == 1.0])} (table at the end)", ""]
    seen: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        e = r.get("escape") or {}
        for p in e.get("project_changed", []):
            seen.setdefault(("changed file", p), []).append(r["key"])
        for n in e.get("new_tmp", []):
            seen.setdefault(("new /tmp entry", n), []).append(r["key"])
        for what in ("planted", "survivors"):
            for x in e.get(what, []):
                seen.setdefault((what, str(x)), []).append(r["key"])
        for what in ("grading_copy_rewritten", "seed_leaked"):
            if e.get(what):
                seen.setdefault((what, ""), []).append(r["key"])
    out += ["## What the escape watch saw", ""]
    if meta.get("escape_notes"):
        out += [meta["escape_notes"], ""]
    if seen:
        out += ["| what | path or name | evaluations it fell in (first 4) | traced to other work |", "|---|---|---|---|"]
        for (what, x), keys in sorted(seen.items()):
            other = x in NOT_ESCAPES["paths"] if what == "changed file" else \
                x in NOT_ESCAPES["tmp"] if what == "new /tmp entry" else False
            names = ", ".join(k.split("/", 1)[1][:-3] for k in keys[:4]) + (f" (+{len(keys) - 4})" if len(keys) > 4 else "")
            out.append(f"| {what} | `{x}` | {len(keys)}: {names} | {'yes' if other else 'NO'} |")
        out.append("")
    else:
        out += ["Nothing changed.", ""]
    out += ["## Exploits that still earn a reward with the policy off", ""]
    if not paid:
        out.append("None.")
    by_group: dict[str, list[dict]] = {}
    for r in paid:
        by_group.setdefault(WHY.get(r["key"], ("other", ""))[0], []).append(r)
    for group, members in sorted(by_group.items(), key=lambda kv: list(GROUPS).index(kv[0])
                                 if kv[0] in GROUPS else len(GROUPS)):
        out += [f"**{GROUPS.get(group, 'Not yet read')}** ({len(members)}):", ""]
        for r in members:
            why = WHY[r["key"]][1] if r["key"] in WHY else docstring_why(r["path"])
            out.append(f"- `{r['key']}` ({r['task']}): {why}")
        out.append("")
    out += ["", "## Sandbox refusals, by layer", "",
            "The layer is read from the refusal: EACCES (`Permission denied`) is Landlock's answer to a path "
            "or TCP port outside its domain; EPERM (`Operation not permitted`) next to a process, session or "
            "namespace call is seccomp's. An exploit counts once per layer it hit.", ""]
    tally: dict[str, list[str]] = {}
    for r in refused:
        for layer in sorted({f["layer"] for f in r["refusals"]}):
            tally.setdefault(layer, []).append(r["key"])
    if not tally:
        out.append("No exploit hit a refusal.")
    for layer, keys in sorted(tally.items()):
        out.append(f"- {layer}: {len(keys)} ({', '.join(k.split('/', 1)[1][:-3] for k in keys)})")
    if meta.get("refusal_notes"):
        out += ["", meta["refusal_notes"]]
    if skipped:
        out += ["", "## Skipped", ""] + [f"- `{r['key']}`: {r['skip']}" for r in skipped]
    out += ["", "## Every exploit", "",
            "| file | task | reward | rule or stated failure | refused | escaped | s |", "|---|---|---|---|---|---|---|"]
    for r in ex:
        if r.get("skip"):
            out.append(f"| {r['key']} | - | - | skipped: {cell(r['skip'])} | - | - | - |")
            continue
        ref = "; ".join(sorted({f["layer"] for f in r["refusals"]})) or "no"
        out.append(f"| {r['key']} | {r['task']} | {r['reward']:g} | {cell(r['rule'])} | {ref} | "
                   f"{'YES' if escaped(r) else 'no'} | {r['seconds']:.0f} |")
    out += ["", "## Honest probes and accepted variants (policy off too)", "",
            "| file | kind | task | reward | rule or stated failure | refused | escaped |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["kind"] == "exploit":
            continue
        ref = "; ".join(sorted({f["layer"] for f in r.get("refusals", [])})) or "no"
        out.append(f"| {r['key']} | {r['kind']} | {r['task']} | {r.get('reward', 0):g} | {cell(r.get('rule', ''))} | "
                   f"{ref} | {'YES' if escaped(r) else 'no'} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="only files whose suite/name contains one of these")
    ap.add_argument("--json", help="write the raw rows here")
    ap.add_argument("--from-json", help="rewrite the report from raw rows; nothing is evaluated")
    ap.add_argument("--notes", help="a JSON file of hand-written notes: escape_notes, refusal_notes, why")
    ap.add_argument("--watch", nargs="*", default=[], help="other checkouts whose trees are hashed too")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--backend", default="interpreter", choices=("interpreter", "cuda"),
                    help="cuda: every file gets all of its task's GPU workloads, timed")
    args = ap.parse_args()
    WATCHED_ROOTS.extend(Path(w).resolve() for w in args.watch)

    if args.notes:
        notes = json.loads(Path(args.notes).read_text())
        WHY.update({k: tuple(v) for k, v in notes.get("why", {}).items()})
        for k in ("paths", "tmp"):
            NOT_ESCAPES[k].update(notes.get("not_escapes", {}).get(k, []))
    else:
        notes = {}
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        meta, rows = data["meta"], data["rows"]
    else:
        import d2k_env.evaluator

        d2k_env.evaluator.check_solution = lambda *a, **k: []  # the static policy off, for this process
        items = plan()
        if args.only:
            items = [i for i in items if any(s in i["key"] for s in args.only)]
        meta = {"date": datetime.date.today().isoformat(), "versions": versions(), "backend": args.backend,
                "command": f"--backend {args.backend} --jobs {args.jobs}" + (f" --only {' '.join(args.only)}" if args.only else ""),
                "watched": [str(r) for r in WATCHED_ROOTS], "started": datetime.datetime.now().isoformat()}
        work = Path(tempfile.mkdtemp(prefix="policy-off-", dir="/var/tmp"))
        runner = Runner(work, args.backend)
        # One honest evaluation first: a check that evaluations work here, and the supervisor (run
        # with -I, so PYTHONDONTWRITEBYTECODE does not reach it) writes confine.py's bytecode into
        # d2k_env/evaluator/__pycache__ on its first run, which is not an exploit's doing.
        from d2k_env.evaluator import Evaluator
        from d2k_env.task import load_task
        warm = Evaluator(load_task("fused_add_rmsnorm"), args.backend)
        try:
            ref = warm.evaluate(warm.task.reference_path, "submit", workloads=[warm.workloads[0].name])
            assert ref.correct, ref.error
        finally:
            warm.close()
        started = time.monotonic()
        rows: list[dict] = []
        try:
            with ThreadPoolExecutor(max_workers=args.jobs, thread_name_prefix="policy-off") as pool:
                futures = [(i, pool.submit(runner.run, i)) for i in items]
                for n, (item, fut) in enumerate(futures, 1):
                    row = fut.result()
                    rows.append(row)
                    print(f"[{n}/{len(items)}] {row['key']:<58} {row.get('reward', '-')!s:>4} "
                          f"{str(row.get('rule', row.get('skip', '')))[:60]}"
                          f"{'  REFUSED' if row.get('refusals') else ''}{'  ESCAPE' if escaped(row) else ''}",
                          flush=True)
                    if args.json:  # as it goes, so that an interrupted run keeps what it has
                        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        finally:
            runner.close()
            shutil.rmtree(work, ignore_errors=True)
        meta["wall_min"] = (time.monotonic() - started) / 60
        if args.json:
            Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    meta.update({k: v for k, v in notes.items() if k in ("escape_notes", "refusal_notes", "run_notes", "date")})
    suffix = "" if meta.get("backend", "interpreter") == "interpreter" else f"-{meta['backend']}"
    out = Path(args.out) / f"policy-off-{meta['date']}{suffix}.md"
    if not args.only:
        out.write_text(report(meta, rows))
        print(f"wrote {out}")
    else:
        print(report(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
