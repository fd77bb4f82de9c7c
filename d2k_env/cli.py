"""The ``d2k`` command: list tasks, show prompts, evaluate solution files, run a demo episode, run
experiments (a policy on tasks x guidance conditions x seeds) and report on them."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import stat
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from d2k_env.spec_outline import Outline, read_outline
from d2k_env.task import builtin_root, load_task, task_ids, task_roots

console = Console(highlight=False)
errors = Console(stderr=True, highlight=False)  # every error line goes to standard error

DISTRIBUTION = "d2k-env"


class UsageError(Exception):
    """A mistake in the command line, found before anything runs: one line on stderr, exit 2."""


def cmd_list(args) -> int:
    # Read from the specs' source, not by loading them: no torch, so it answers at once. Cells wrap
    # (a long word folds) rather than being cut: every name and size stays whole on a narrow terminal.
    roots = task_roots()
    table = Table(title="d2k-env tasks", caption="* launch-bound: also timed in a CUDA graph. "
                                                 "A task's inputs and prompt: d2k show TASK")
    table.add_column("task (family)", no_wrap=True)  # ids stay whole; the workloads wrap beside them
    table.add_column("GPU workloads; smoke workloads", overflow="fold")
    for tid in sorted(roots):
        outline = _outline(tid, roots[tid])
        gpu = "\n".join(f"{w.name}{' *' if w.launch_bound else ''} "
                        f"({', '.join(f'{k}={v}' for k, v in w.params.items())})" for w in outline.workloads)
        smoke = ", ".join(w.name for w in outline.smoke_workloads)
        table.add_row(f"{tid}\n[dim]{escape(outline.family)}[/dim]", escape(f"{gpu}\nsmoke: {smoke}"))
    console.print(table)
    return 0


def _known_task(task_id: str) -> Path:
    """The task directory of ``task_id``; an unknown id is a usage error naming the close ones."""
    roots = task_roots()
    if task_id not in roots:
        close = difflib.get_close_matches(task_id, roots, n=3, cutoff=0.6)
        hint = (f"did you mean {' or '.join(close)}? (d2k list shows every task)" if close
                else f"the tasks: {', '.join(sorted(roots)) or 'none'}")
        raise UsageError(f"unknown task {task_id!r}; {hint}")
    return roots[task_id]


def _outline(task_id: str, root: Path):
    """The task's title, family and workloads: read from its spec's source where that can be done
    safely, else from the loaded task (which imports torch)."""
    return read_outline(root / "tasks" / f"{task_id}.py") or Outline.of_task(load_task(task_id))


def _check_guidance(guidance: str) -> None:
    from d2k_env.env import parse_guidance

    try:
        parse_guidance(guidance)
    except ValueError as exc:
        raise UsageError(f"--guidance {guidance}: {exc}") from None


def _require_gpu(backend: str) -> None:
    """``--backend cuda`` on a machine without a usable GPU is a usage error, found without torch."""
    from d2k_env.evaluator import no_gpu_reason

    if backend == "cuda" and (reason := no_gpu_reason()):
        raise UsageError(f"--backend cuda needs a GPU: {reason}; --backend interpreter checks correctness on the CPU")


def _check_workloads(task_id: str, names: list[str] | None, outline, backend: str, guessed: bool = False) -> None:
    """Every name in ``names`` is a workload the backend evaluates (the GPU ones on cuda, the smoke
    ones otherwise); else a usage error listing them. A ``guessed`` backend (``auto`` before torch
    confirms it) refuses only names of neither kind."""
    cuda = backend == "cuda"
    valid = [w.name for w in (outline.workloads if cuda else outline.smoke_workloads)]
    other = {w.name for w in (outline.smoke_workloads if cuda else outline.workloads)}
    for name in names or []:
        if name not in valid and not (guessed and name in other):
            note = ""
            if name in other:
                note = (" (a smoke workload: the interpreter backend runs it)" if cuda
                        else " (a GPU workload: it needs --backend cuda)")
            raise UsageError(f"task {task_id!r} has no workload {name!r} on the {backend} backend{note}; "
                             f"its workloads: {', '.join(valid)}")


def _check_solution_file(name: str) -> Path:
    """The solution file's resolved path; a missing file, a directory, something that is no
    regular file, an unreadable one or one that is not UTF-8 text is a usage error."""
    path = Path(name)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UsageError(f"no such file: {name}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{name} is a directory: give the solution file (a .py file defining forward)")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{name} is not a regular file: give the solution file (a .py file defining forward)")
    try:
        path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{name} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}): "
                         f"save it as UTF-8") from None
    return path.resolve()


def _check_output_file(option: str, name: str | None) -> None:
    """A file the command writes at its end can be written: found now, not after the work."""
    if name is None:
        return
    path = Path(name)
    if path.is_dir():
        raise UsageError(f"{option} {name} is a directory: give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"{option} {name}: no such directory {path.parent}")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {name}: not writable")


@contextmanager
def _working(label: str, out: Console):
    """Progress on ``out`` while something slow runs: on a terminal a spinner with the elapsed time
    (gone once it is done); elsewhere (a log, a pipe) a line as it starts and one as it ends."""
    if out.is_terminal:
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Progress(*columns, console=out, transient=True) as progress:
            progress.add_task(label, total=None)
            yield
        return
    began = time.monotonic()
    out.print(f"{label} ...", markup=False)
    out.file.flush()
    yield
    out.print(f"{label}: done in {time.monotonic() - began:.1f} s", markup=False)


def cmd_show(args) -> int:
    _known_task(args.task)
    if args.properties:
        print(describe_properties(load_task(args.task)))
        return 0
    _check_guidance(args.guidance)
    import gymnasium as gym

    import d2k_env

    env = gym.make(d2k_env.env_id(args.task), backend=args.backend, guidance=args.guidance, mode=args.mode)
    obs, _ = env.reset(seed=0)
    print(obs)
    env.close()
    return 0


def describe_properties(task) -> str:
    """A task's design properties, one per line: id, layer, text, and how it is checked."""
    properties = task.spec.design_properties
    if not properties:
        return f"{task.id} has no design properties yet."
    return "\n".join(f"{p.id} ({p.layer}): {p.text} [check: {p.check.describe() if p.check else 'judge'}]"
                     for p in properties)


def _one_shot_pool(backend: str, submit: bool):
    """The started workers of one ``d2k eval``: a solution and a check worker, by exec and side by
    side (a one-shot command gains nothing from a fork server, which would import torch before
    forking them), and for a submission on the GPU the memory-checked one too."""
    from d2k_env.evaluator.memcheck import find_memcheck
    from d2k_env.evaluator.pool import WorkerPool

    pool = WorkerPool(interpret=backend == "interpreter", spares=True, fork=False)
    pool.replenish()
    if submit and backend == "cuda" and (tool := find_memcheck()):
        pool.keep_memcheck(tool)
        pool.replenish()
    return pool


def cmd_eval(args) -> int:
    from d2k_env.evaluator import Evaluator, quick_backend, resolve_backend
    from d2k_env.evaluator.policy_service import start as start_policy
    from d2k_env.verdict import format_properties, format_result

    # Every mistake in the command line is found before a worker starts.
    root = _known_task(args.task)
    path = _check_solution_file(args.file)
    _check_output_file("--json", args.json)
    _require_gpu(args.backend)
    backend = quick_backend(args.backend)
    _check_workloads(args.task, args.workloads, _outline(args.task, root), backend, guessed=args.backend == "auto")
    # One evaluation for every workload. Its workers start first, and the policy's child beside them,
    # while this process loads the task (torch's import, seconds): so the backend is first resolved
    # without torch, then confirmed by torch once imported.
    pool = _one_shot_pool(backend, args.mode == "submit")
    try:
        start_policy()
        task = load_task(args.task)
        if (confirmed := resolve_backend(args.backend)) != backend:
            pool.close()
            backend = confirmed
            pool = _one_shot_pool(backend, args.mode == "submit")
        if backend == "cuda":
            import torch
            if not torch.cuda.is_available():
                raise UsageError("--backend cuda needs a GPU: the CUDA driver counts one, but torch cannot use it "
                                 "(torch.cuda.is_available() is False)")
        # Again on the loaded task: the backend may have changed, or its outline been read otherwise.
        _check_workloads(args.task, args.workloads, Outline.of_task(task), backend)
        mode = args.mode or ("benchmark" if backend == "cuda" else "test")
        evaluator = Evaluator(task, backend, pool=pool)
        pool.spares = False  # the one evaluation: no spare is started to replace one it takes
        try:
            names = args.workloads or [w.name for w in evaluator.workloads]
            # Progress on stderr: stdout holds the result alone.
            with _working(f"{task.id} on {backend}: {mode} of {len(names)} workload(s)", errors):
                merged = evaluator.evaluate(path, mode, names, seed=args.seed)
        finally:
            evaluator.close()
    finally:
        pool.close()
    print(format_result(merged, f"{task.id}: {path.name} ({mode}, {backend} backend)"))
    if found := format_properties(task.spec.design_properties, merged):
        print(found)
    if merged.timed:
        print(f"device: {merged.device_name}; torch {merged.versions.get('torch')}, triton "
              f"{merged.versions.get('triton')}; ceilings: {merged.ceilings}")
    if args.json:
        Path(args.json).write_text(json.dumps(merged.to_dict(), indent=2))
    return 0 if merged.correct else 1


def cmd_new_task(args) -> int:
    from d2k_env.tasks.scaffold import scaffold

    if args.id.isidentifier() and args.id.startswith("_"):
        raise UsageError(f"task id {args.id!r} starts with '_': task discovery skips such files, so d2k would "
                         f"never find it")
    if Path(args.dir).exists() and not Path(args.dir).is_dir():
        raise UsageError(f"--dir {args.dir} is not a directory")
    if (root := task_roots().get(args.id)) is not None:
        owner = "d2k-env ships a task of that id" if root == builtin_root() else f"a task of that id is in {root}"
        raise UsageError(f"task id {args.id!r} is taken: {owner}; choose another id")
    written = scaffold(args.id, Path(args.dir))
    for path in written:
        print(path)
    console.print(f"Wrote task {args.id!r}: a worked example to replace with your operator (each field is "
                  f"explained where it is set). Then: D2K_TASKS_PATH={Path(args.dir).resolve()} d2k eval "
                  f"{args.id} {written[2]} --mode submit")
    return 0


# The tools that evaluate the solution (seconds each), as progress names them.
EVALUATING_TOOLS = {"run_tests": "running the tests", "benchmark": "benchmarking", "profile": "profiling",
                    "submit": "evaluating the submission"}


def cmd_demo(args) -> int:
    _known_task(args.task)
    _check_guidance(args.guidance)
    _require_gpu(args.backend)
    import gymnasium as gym

    import d2k_env
    from d2k_env.agents import reference_policy
    from d2k_env.tools import ActionError, parse_action

    task = load_task(args.task)
    env = gym.make(d2k_env.env_id(args.task), backend=args.backend, guidance=args.guidance)
    obs, info = env.reset(seed=args.seed)
    console.print(f"[bold]d2k demo[/bold]: {env.spec.id}, backend {info['backend']}, guidance "
                  f"{'+'.join(info['guidance']) or 'none'}; a scripted policy writes the expert reference.")
    console.print(f"[dim]reset observation: the prompt, {len(obs)} characters (see `d2k show {args.task}`)[/dim]")
    policy = reference_policy(task)
    total, terminated, truncated = 0.0, False, False
    while not (terminated or truncated):
        action = policy(obs)
        shown = action if len(action) <= 160 else action[:150] + f"... ({len(action)} chars)"
        console.print(f"\n[bold cyan]step {info['steps'] + 1}[/bold cyan] action: {escape(shown)}")
        try:
            tool = parse_action(action).tool
        except ActionError:
            tool = None
        if tool in EVALUATING_TOOLS:  # seconds each: say that it is under way
            with _working(f"  {EVALUATING_TOOLS[tool]} on the {info['backend']} backend", console):
                obs, reward, terminated, truncated, info = env.step(action)
        else:
            obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        console.print(textwrap.indent(_clip(obs, args.max_chars), "  "), markup=False)
    console.print(f"\n[bold]episode over[/bold] after {info['steps']} steps: reward {total:.4f}")
    env.close()
    return 0 if total > 0 else 1


def _chat_policy_factory(args):
    from d2k_env.agents.openai_chat import ChatPolicy, make_client, resolve_model
    from d2k_env.chat_format import ContextPolicy

    client = make_client(args.base_url, timeout_s=args.request_timeout)
    try:
        model = resolve_model(client, args.model)
    finally:
        client.close()
    context = ContextPolicy(args.keep_recent or None, args.clip_chars)

    def make(key):
        return ChatPolicy(model=model, base_url=args.base_url, tool_mode=args.tool_mode, temperature=args.temperature,
                          max_tokens=args.max_tokens, context=context, max_retries=args.max_retries,
                          timeout_s=args.request_timeout, mode=args.mode)

    return model, make


def cmd_run(args) -> int:
    from d2k_env.agents.base import PolicyError
    from d2k_env.runner import RunDirectoryError

    _check_run(args)
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        return _run(args)
    except (PolicyError, RunDirectoryError) as exc:
        _error(exc)
        return 2
    except ImportError as exc:
        return _missing_extra(exc)
    except KeyboardInterrupt:  # before any episode started
        console.print("[yellow]interrupted[/yellow] before any episode started")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _error(message) -> None:
    """One error line on stderr: never read as markup, never broken inside a path (the terminal
    wraps it)."""
    errors.print(f"[red]error:[/red] {escape(str(message))}", soft_wrap=True)


def _missing_extra(exc: ImportError) -> int:
    _error(f'{exc}: install the agents extra, pip install "d2k-env[agents]"')
    return 2


def _check_run(args) -> None:
    """``d2k run``'s arguments, checked before the run directory is touched or a model is asked."""
    if args.tasks != ["all"]:
        for task in args.tasks:
            _known_task(task)
    for guidance in args.guidance:
        _check_guidance(guidance)
    if args.mode == "design" and args.wandb_project:
        raise UsageError("--wandb-project logs solution runs (correctness, speedups, kernels); a design run has none "
                         "of them: report it with d2k report")
    _require_gpu(args.backend)


def _run_judge(args):
    """The judge ``d2k run`` grades submissions with (``--judge-model``), else None."""
    if args.judge_model is None:
        return None
    from d2k_env.judge import Budget, Judge

    return Judge(model=args.judge_model, base_url=args.judge_base_url or args.base_url, cache_dir=args.judge_cache,
                 budget=Budget(args.judge_max_requests, args.judge_max_total_tokens), confirm=args.judge_confirm,
                 max_retries=args.max_retries, timeout_s=args.request_timeout)


def _run(args) -> int:
    judge = _run_judge(args)
    try:
        return _run_with(args, judge)
    finally:
        if judge is not None:
            judge.close()


def _run_with(args, judge) -> int:
    from d2k_env.agents import reference_design_policy, reference_policy
    from d2k_env.progress import progress_reporter
    from d2k_env.runner import RunSettings, plan, run_experiment
    from d2k_env.wording import plural

    settings = RunSettings(backend=args.backend, reward=args.reward, max_steps=args.max_steps,
                           observation_chars=args.observation_chars, mode=args.mode)
    if args.policy == "reference":
        scripted = reference_design_policy if args.mode == "design" else reference_policy
        name = "reference-design" if args.mode == "design" else "reference"
        make_policy = lambda key: scripted(load_task(key.task))  # noqa: E731
    else:
        name, make_policy = _chat_policy_factory(args)
    keys = plan(name, task_ids() if args.tasks == ["all"] else args.tasks, args.guidance, args.seeds)
    run_dir = Path(args.run_dir)
    console.print(f"[bold]d2k run[/bold] {escape(str(run_dir))}: policy {escape(name)}, "
                  f"{plural(len(keys), 'episode')} ({plural(len({k.task for k in keys}), 'task')} x "
                  f"{plural(len({k.condition for k in keys}), 'guidance condition')} x "
                  f"{plural(len({k.seed for k in keys}), 'seed')}), backend {settings.backend}, {args.jobs} at a time"
                  + (", design-only episodes" if args.mode == "design" else "")
                  + (f"; judge {escape(judge.model)}" if judge is not None else
                     "; no judge (--judge-model): designs are recorded, not graded" if args.mode == "design" else ""))
    tracker = _wandb_tracker(args, run_dir, keys, settings, make_policy) if args.wandb_project else None
    # Progress goes to standard output, with everything else this command prints.
    progress = "quiet" if args.quiet else progress_reporter("auto", sys.stdout)
    try:
        result = run_experiment(run_dir, keys, make_policy, settings, jobs=args.jobs,
                                callbacks=[tracker] if tracker else [], progress=progress, judge=judge)
    except KeyboardInterrupt:  # the second Ctrl-C
        console.print("[red]aborted[/red]: unfinished episodes left only .tmp files, removed by the next run")
        os._exit(130)  # episode threads may still be inside an evaluation: do not wait for them
    if tracker is not None:
        _finish_tracker(tracker, run_dir)
    console.print(f"{plural(len(result.finished), 'episode')} finished, {len(result.failed)} failed, "
                  f"{result.skipped} skipped (already finished"
                  + (f"; {len(result.judged)} of them judged now" if result.judged else "")
                  + f"). Trajectories: {escape(str(run_dir / 'episodes'))}. Next: d2k report {escape(str(run_dir))}")
    if result.interrupted:
        console.print("[yellow]interrupted[/yellow]: run the same command again to resume")
        return 130
    return 1 if result.failed else 0


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def _wandb_tracker(args, run_dir, keys, settings, make_policy):
    from d2k_env.runner import RunDirectory
    from d2k_env.tracking import WandbTracker, experiment_config
    from d2k_env.trajectory import load_run

    with RunDirectory(run_dir, settings) as directory:  # the wandb run id lives in run.json
        meta = directory.read_meta()
        policy = make_policy(keys[0])
        config = experiment_config(keys, settings, policy.describe())
        policy.close()
        run_id = meta.get("wandb", {}).get(args.wandb_project)
        # One group per experiment (the run directory), one tag per guidance condition run.
        tracker = WandbTracker(args.wandb_project, config, run_dir, run_id=run_id, name=args.wandb_name or run_dir.name,
                               entity=args.wandb_entity, earlier=load_run(run_dir),
                               group=args.wandb_group or run_dir.name,
                               tags=[f"guidance:{c}" for c in sorted({k.condition for k in keys})])
        meta.setdefault("wandb", {})[args.wandb_project] = tracker.run_id
        directory.write_meta(meta)
    return tracker


def _finish_tracker(tracker, run_dir) -> None:
    from d2k_env.report import build_report, write_plots
    from d2k_env.reward import REWARD_VERSION
    from d2k_env.tracking import kernel_rows
    from d2k_env.trajectory import load_run

    trajectories = load_run(run_dir)
    tracker.log_kernels(kernel_rows(trajectories))
    summary = {}
    if trajectories:
        report = build_report(run_dir)
        plots = run_dir / "wandb" / "plots"
        plots.mkdir(parents=True, exist_ok=True)
        tracker.log_plots(write_plots(report, plots))
        for p in report.policies:
            if p.reward_version != REWARD_VERSION or p.mode != "solution":  # older scoring; designs (no scores)
                continue
            for s in p.conditions:
                summary[f"{p.policy}/{s.condition}/correctness_rate"] = s.correctness_rate
                if s.performance_score is not None:
                    summary[f"{p.policy}/{s.condition}/performance_score"] = s.performance_score
    tracker.finish(summary)


def cmd_judge(args) -> int:
    """Scores a solution file against its task's design properties with a chat model (d2k_env.judge):
    one line per property, then the realised fraction per layer; exit 2 when the task has none."""
    _known_task(args.task)
    path = _check_solution_file(args.file)
    _check_output_file("--json", args.json)
    task = load_task(args.task)
    if not task.spec.design_properties:
        raise UsageError(f"task {args.task} has no design properties yet: nothing to judge")
    from d2k_env.judge import Budget, Judge
    from d2k_env.judge_prompt import read_findings

    if args.design and args.findings:
        raise UsageError("--findings with --design: a design has no automatic findings (nothing of it ran)")
    findings = {}
    if args.findings:
        try:
            findings = read_findings(json.loads(Path(args.findings).read_text()), list(task.spec.design_properties))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--findings {args.findings}: {exc}") from None
    try:  # the client needs the agents extra
        judge = Judge(model=args.model, base_url=args.base_url, cache_dir=args.cache,
                      budget=Budget(args.max_requests, args.max_total_tokens), confirm=args.confirm,
                      max_retries=args.max_retries, timeout_s=args.request_timeout)
    except ImportError as exc:
        return _missing_extra(exc)
    try:
        verdict = judge.judge(task, path.read_text(), findings, kind="design" if args.design else "solution")
    finally:
        judge.close()
    for p in verdict.properties:
        print(f"{p.id}\t{p.layer}\t{p.score}\t{p.reason}")
    for layer, s in verdict.summary().items():
        fraction = "n/a" if s["realised_fraction"] is None else f"{s['realised_fraction']:.2f}"
        print(f"{layer}: realised {fraction} ({s['realised']} realised, {s['partly']} partly, {s['not']} not, "
              f"{s['unjudged']} unjudged of {s['properties']})")
    if verdict.agreement["checked"]:
        print(f"agreement with the automatic checks: {verdict.agreement['agree']} of {verdict.agreement['checked']}")
    print(f"judge {verdict.model}, rubric {verdict.rubric_version}, prompt {verdict.prompt_version}: "
          + ("from the cache" if verdict.cached else f"{verdict.usage['requests']} request(s), "
                                                    f"{verdict.usage['total_tokens']} tokens"))
    if args.json:
        Path(args.json).write_text(json.dumps(verdict.to_dict(), indent=1) + "\n")
    return 0


def cmd_report(args) -> int:
    from d2k_env.report import mixed_versions_warning, to_markdown, write_plots, write_report

    skipped = None
    out = Path(args.out or args.run_dir)
    report, paths = write_report(args.run_dir, out, plots=False)  # the tables need no matplotlib
    try:
        paths += write_plots(report, out)
    except ImportError as exc:
        skipped = f'plots not drawn ({exc}): install the agents extra, pip install "d2k-env[agents]"'
    print(to_markdown(report))
    console.print("wrote " + ", ".join(escape(str(p)) for p in paths))
    if skipped:
        errors.print(f"[yellow]note:[/yellow] {escape(skipped)}", soft_wrap=True)
    if warning := mixed_versions_warning(report):  # again after the tables, where it cannot scroll away
        console.print(f"[bold red]{escape(warning)}[/bold red]")
    return 0


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


def version_line() -> str:
    """``d2k-env <version> (<where the package is>)``: the installed distribution's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version(DISTRIBUTION)
    except PackageNotFoundError:
        number = "(not installed, so no version)"
    return f"{DISTRIBUTION} {number} ({Path(__file__).resolve().parent})"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose mistakes are one line on stderr as d2k's own are (not the usage too)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Version(argparse.Action):
    """``--version``: read only when asked (importlib.metadata is not free)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def _at_least(minimum: int):
    """An argparse type: an integer no smaller than ``minimum``."""
    def integer(text: str) -> int:
        value = int(text)  # a ValueError: argparse says "invalid integer value"
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value
    return integer


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="d2k", description="Expert-guided Triton kernel tasks as Gymnasium envs.")
    parser.add_argument("--version", action=_Version, help="the installed d2k-env's version, and where it is")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="tasks, families and workloads").set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="the prompt an agent sees at reset")
    p.add_argument("task")
    p.add_argument("--guidance", default="L1+L2+L3", help="none, L1, L1+L2, L1+L2+L3 (any subset)")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    p.add_argument("--mode", default="solution", choices=("solution", "design"),
                   help="the prompt of a solution episode (default) or of a design-only one")
    p.add_argument("--properties", action="store_true",
                   help="list the task's design properties (id, layer, text, automatic check or judge) instead")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("eval", help="evaluate a solution file")
    p.add_argument("task")
    p.add_argument("file")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    p.add_argument("--mode", choices=("test", "benchmark", "submit"),
                   help="default: benchmark on cuda, test otherwise; submit also checks held-out shapes drawn "
                        "from the seed, as the env's submit does")
    p.add_argument("--workloads", nargs="+", help="only these workloads")
    p.add_argument("--seed", type=int, help="input seed (default: a fresh secret one)")
    p.add_argument("--json", help="also write the full result as JSON here")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("new-task", help="scaffold a task's six files in a task directory")
    p.add_argument("id", help="the task id, a Python identifier")
    p.add_argument("--dir", default=".", help="the task directory (holding tasks/, baselines/, references/, "
                                              "guidance/); default: the current directory")
    p.set_defaults(func=cmd_new_task)

    p = sub.add_parser("demo", help="one whole episode by a scripted policy that submits the reference")
    p.add_argument("task", nargs="?", default="fused_add_rmsnorm")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    p.add_argument("--guidance", default="L1+L2+L3")
    p.add_argument("--seed", type=_at_least(0), default=0)
    p.add_argument("--max-chars", type=_at_least(0), default=1500, help="clip each observation printed")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("run", help="a policy on tasks x guidance conditions x seeds; resumable; one trajectory "
                                   "per episode", description="Runs every episode not yet finished in RUN_DIR. "
                                   "The chat policy reads OPENAI_BASE_URL, OPENAI_API_KEY and D2K_MODEL.")
    p.add_argument("run_dir", help="where trajectories go; run the same command again to resume")
    p.add_argument("--tasks", nargs="+", default=["all"], help="task ids, or all (default)")
    p.add_argument("--guidance", nargs="+", default=["none", "L1+L2+L3"],
                   help="guidance conditions (default: none L1+L2+L3; the layer study: none L1 L1+L2 L1+L2+L3)")
    p.add_argument("--seeds", nargs="+", type=_at_least(0), default=[0],
                   help="env seeds, one episode each (default: 0)")
    p.add_argument("--jobs", type=_at_least(1), default=1, help="episodes run at once (default 1)")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    p.add_argument("--reward", default="speedup", choices=("speedup", "log_speedup", "binary"))
    p.add_argument("--max-steps", type=_at_least(1), default=350,
                   help="turn budget per episode (default 350, as D2K-Bench)")
    p.add_argument("--observation-chars", type=_at_least(0), default=50_000,
                   help="clip observations stored in trajectories to this many characters (0: keep whole)")
    p.add_argument("--policy", default="chat", choices=("chat", "reference"),
                   help="chat: an OpenAI-compatible server (default); reference: writes the expert reference (in "
                        "design mode: submits the task's own guidance as its design)")
    p.add_argument("--mode", default="solution", choices=("solution", "design"),
                   help="solution: write and submit a kernel (default); design: design-only episodes, the policy "
                        "submits a written design (submit_design) and nothing is run")
    p.add_argument("--model", help="model name (default: $D2K_MODEL, else the server's only model)")
    p.add_argument("--base-url", help="server URL, e.g. http://localhost:8000/v1 (default: $OPENAI_BASE_URL)")
    p.add_argument("--tool-mode", default="function", choices=("function", "text"),
                   help="function: tools as function schemas (default); text: JSON calls in the reply")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=_at_least(1), help="completion tokens per reply")
    p.add_argument("--keep-recent", type=_at_least(0), default=8,
                   help="turns whose tool outputs are sent in full; older ones are shortened (0: never shorten)")
    p.add_argument("--clip-chars", type=_at_least(0), default=2000, help="length old tool outputs are shortened to")
    p.add_argument("--max-retries", type=_at_least(0), default=8, help="retries on rate limits and server errors")
    p.add_argument("--request-timeout", type=float, default=600.0, help="seconds per model request")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress: no bar and no line per episode, only the summary at the end")
    p.add_argument("--judge-model", help="grade each submitted solution (or design) against the task's design "
                                         "properties with this model; the grade goes into the trajectory, never "
                                         "into the reward")
    p.add_argument("--judge-base-url", help="the judge's server (default: --base-url, else $OPENAI_BASE_URL)")
    p.add_argument("--judge-cache", help="a folder of cached verdicts, as d2k judge --cache")
    p.add_argument("--judge-confirm", type=_at_least(0), default=0,
                   help="also ask the judge, blind, about this many automatically settled properties (agreement)")
    p.add_argument("--judge-max-requests", type=_at_least(1), help="the judge's request budget for the whole run")
    p.add_argument("--judge-max-total-tokens", type=_at_least(1),
                   help="the judge's token budget (prompt + completion) for the whole run")
    p.add_argument("--wandb-project", help="also log to this wandb project (WANDB_MODE=offline works)")
    p.add_argument("--wandb-entity")
    p.add_argument("--wandb-name", help="wandb run name (default: the run directory's name)")
    p.add_argument("--wandb-group", help="wandb run group (default: the run directory's name)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="tables and plots of a run directory: correctness, Performance Score, "
                                      "uplift from guidance, design properties realised per layer")
    p.add_argument("run_dir")
    p.add_argument("--out", help="write report.md, report.json and the plots here (default: the run directory)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("judge", help="score a solution file against its task's design properties with a chat model",
                       description="Asks an OpenAI-compatible server (OPENAI_BASE_URL, OPENAI_API_KEY, D2K_MODEL) "
                                   "whether the solution realises each of the task's design properties. The judge "
                                   "never sees a reward, and its scores never change one.")
    p.add_argument("task")
    p.add_argument("file", help="the solution file (with --design: a design's text)")
    p.add_argument("--design", action="store_true",
                   help="FILE is a design written before any code (as submit_design takes): judged under the "
                        "design rubric, every property asked")
    p.add_argument("--base-url", help="server URL, e.g. http://localhost:8000/v1 (default: $OPENAI_BASE_URL)")
    p.add_argument("--model", help="model name (default: $D2K_MODEL, else the server's only model)")
    p.add_argument("--cache", help="a folder of cached verdicts: the same solution, properties, model and "
                                   "rubric again make no request")
    p.add_argument("--json", help="also write the verdict as JSON here")
    p.add_argument("--findings", help='automatic findings as JSON, {"<property id>": {"status": "realised" | '
                                      '"not realised" | "unchecked", "detail": "..."}}: they settle their properties')
    p.add_argument("--confirm", type=_at_least(0), default=0,
                   help="also ask the model, blind, about this many automatically settled properties (agreement)")
    p.add_argument("--max-requests", type=_at_least(1), help="the judge's request budget")
    p.add_argument("--max-total-tokens", type=_at_least(1), help="the judge's token budget (prompt + completion)")
    p.add_argument("--max-retries", type=_at_least(0), default=8, help="retries on rate limits and server errors")
    p.add_argument("--request-timeout", type=float, default=600.0, help="seconds per model request")
    p.set_defaults(func=cmd_judge)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        _error(exc)
        return 2
    except (KeyError, ValueError, OSError, ImportError, RuntimeError) as exc:
        # Bad arguments, missing files, an extra not installed, a server that cannot be reached:
        # one line, not a traceback. Anything else is a bug in d2k and keeps its traceback.
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        _error(message)
        return 2


if __name__ == "__main__":
    sys.exit(main())
