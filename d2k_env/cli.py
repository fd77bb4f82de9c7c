"""The ``d2k`` command: list tasks, show prompts, evaluate solution files, run a demo episode, run
experiments (a policy on tasks x guidance conditions x seeds) and report on them."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console(highlight=False)


def cmd_list(args) -> int:
    from d2k_env.prompt import describe_inputs
    from d2k_env.task import load_task, task_ids

    table = Table(title="d2k-env tasks")
    table.add_column("task", no_wrap=True)
    for col in ("family", "GPU workloads", "smoke workloads"):
        table.add_column(col)
    for tid in task_ids():
        task = load_task(tid)
        gpu = "\n".join(f"{w.name}: {describe_inputs(task, w)}" for w in task.workloads)
        table.add_row(tid, task.family, gpu, ", ".join(w.name for w in task.smoke_workloads))
    console.print(table)
    return 0


def cmd_show(args) -> int:
    import gymnasium as gym

    import d2k_env
    from d2k_env.task import load_task

    load_task(args.task)  # a clear error for an unknown task
    env = gym.make(d2k_env.env_id(args.task), backend=args.backend, guidance=args.guidance)
    obs, _ = env.reset(seed=0)
    print(obs)
    env.close()
    return 0


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
    from d2k_env.task import load_task, task_ids
    from d2k_env.verdict import format_result

    if args.task not in task_ids():
        load_task(args.task)  # its clear error for an unknown task
    path = Path(args.file).resolve()
    if not path.is_file():
        _error(f"no such file: {args.file}")
        return 2
    # One evaluation for every workload. Its workers start first, and the policy's child beside them,
    # while this process loads the task (torch's import, seconds): so the backend is first resolved
    # without torch, then confirmed by torch once imported.
    backend = quick_backend(args.backend)
    pool = _one_shot_pool(backend, args.mode == "submit")
    try:
        start_policy()
        task = load_task(args.task)
        if (confirmed := resolve_backend(args.backend)) != backend:
            pool.close()
            backend = confirmed
            pool = _one_shot_pool(backend, args.mode == "submit")
        mode = args.mode or ("benchmark" if backend == "cuda" else "test")
        evaluator = Evaluator(task, backend, pool=pool)
        pool.spares = False  # the one evaluation: no spare is started to replace one it takes
        try:
            names = args.workloads or [w.name for w in evaluator.workloads]
            columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
            with Progress(*columns, console=console, transient=True) as progress:
                progress.add_task(f"{task.id} on {backend}: {mode} of {len(names)} workload(s)", total=None)
                merged = evaluator.evaluate(path, mode, names, seed=args.seed)
        finally:
            evaluator.close()
    finally:
        pool.close()
    print(format_result(merged, f"{task.id}: {path.name} ({mode}, {backend} backend)"))
    if merged.timed:
        print(f"device: {merged.device_name}; torch {merged.versions.get('torch')}, triton "
              f"{merged.versions.get('triton')}; ceilings: {merged.ceilings}")
    if args.json:
        Path(args.json).write_text(json.dumps(merged.to_dict(), indent=2))
    return 0 if merged.correct else 1


def cmd_new_task(args) -> int:
    from d2k_env.tasks.scaffold import scaffold

    written = scaffold(args.id, Path(args.dir))
    for path in written:
        print(path)
    console.print(f"Wrote task {args.id!r}: a worked example to replace with your operator (each field is "
                  f"explained where it is set). Then: D2K_TASKS_PATH={Path(args.dir).resolve()} d2k eval "
                  f"{args.id} {written[2]} --mode submit")
    return 0


def cmd_demo(args) -> int:
    import gymnasium as gym

    import d2k_env
    from d2k_env.agents import reference_policy
    from d2k_env.task import load_task

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
        console.print(f"\n[bold cyan]step {info['steps'] + 1}[/bold cyan] action: {shown}")
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
                          timeout_s=args.request_timeout)

    return model, make


def cmd_run(args) -> int:
    from d2k_env.agents.base import PolicyError
    from d2k_env.runner import RunDirectoryError

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
    """One error line: never read as markup, never broken inside a path (the terminal wraps it)."""
    console.print(f"[red]error:[/red] {escape(str(message))}", soft_wrap=True)


def _missing_extra(exc: ImportError) -> int:
    _error(f'{exc}: install the agents extra, pip install "d2k-env[agents]"')
    return 2


def _run(args) -> int:
    from d2k_env.agents import reference_policy
    from d2k_env.progress import progress_reporter
    from d2k_env.runner import RunSettings, plan, run_experiment
    from d2k_env.task import load_task, task_ids
    from d2k_env.wording import plural

    settings = RunSettings(backend=args.backend, reward=args.reward, max_steps=args.max_steps,
                           observation_chars=args.observation_chars)
    if args.policy == "reference":
        name, make_policy = "reference", (lambda key: reference_policy(load_task(key.task)))
    else:
        name, make_policy = _chat_policy_factory(args)
    keys = plan(name, task_ids() if args.tasks == ["all"] else args.tasks, args.guidance, args.seeds)
    run_dir = Path(args.run_dir)
    console.print(f"[bold]d2k run[/bold] {escape(str(run_dir))}: policy {escape(name)}, "
                  f"{plural(len(keys), 'episode')} ({plural(len({k.task for k in keys}), 'task')} x "
                  f"{plural(len({k.condition for k in keys}), 'guidance condition')} x "
                  f"{plural(len({k.seed for k in keys}), 'seed')}), backend {settings.backend}, {args.jobs} at a time")
    tracker = _wandb_tracker(args, run_dir, keys, settings, make_policy) if args.wandb_project else None
    # Progress goes to standard output, with everything else this command prints.
    progress = "quiet" if args.quiet else progress_reporter("auto", sys.stdout)
    try:
        result = run_experiment(run_dir, keys, make_policy, settings, jobs=args.jobs,
                                callbacks=[tracker] if tracker else [], progress=progress)
    except KeyboardInterrupt:  # the second Ctrl-C
        console.print("[red]aborted[/red]: unfinished episodes left only .tmp files, removed by the next run")
        os._exit(130)  # episode threads may still be inside an evaluation: do not wait for them
    if tracker is not None:
        _finish_tracker(tracker, run_dir)
    console.print(f"{plural(len(result.finished), 'episode')} finished, {len(result.failed)} failed, "
                  f"{result.skipped} skipped (already finished). Trajectories: {escape(str(run_dir / 'episodes'))}. "
                  f"Next: d2k report {escape(str(run_dir))}")
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
            if p.reward_version != REWARD_VERSION:  # episodes kept from before a scoring change
                continue
            for s in p.conditions:
                summary[f"{p.policy}/{s.condition}/correctness_rate"] = s.correctness_rate
                if s.performance_score is not None:
                    summary[f"{p.policy}/{s.condition}/performance_score"] = s.performance_score
    tracker.finish(summary)


def cmd_report(args) -> int:
    from d2k_env.report import mixed_versions_warning, to_markdown, write_report

    try:
        report, paths = write_report(args.run_dir, args.out)
    except ImportError as exc:
        return _missing_extra(exc)
    print(to_markdown(report))
    console.print("wrote " + ", ".join(escape(str(p)) for p in paths))
    if warning := mixed_versions_warning(report):  # again after the tables, where it cannot scroll away
        console.print(f"[bold red]{escape(warning)}[/bold red]")
    return 0


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="d2k", description="Expert-guided Triton kernel tasks as Gymnasium envs.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="tasks, families and workloads").set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="the prompt an agent sees at reset")
    p.add_argument("task")
    p.add_argument("--guidance", default="L1+L2+L3", help="none, L1, L1+L2, L1+L2+L3 (any subset)")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-chars", type=int, default=1500, help="clip each observation printed")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("run", help="a policy on tasks x guidance conditions x seeds; resumable; one trajectory "
                                   "per episode", description="Runs every episode not yet finished in RUN_DIR. "
                                   "The chat policy reads OPENAI_BASE_URL, OPENAI_API_KEY and D2K_MODEL.")
    p.add_argument("run_dir", help="where trajectories go; run the same command again to resume")
    p.add_argument("--tasks", nargs="+", default=["all"], help="task ids, or all (default)")
    p.add_argument("--guidance", nargs="+", default=["none", "L1+L2+L3"],
                   help="guidance conditions (default: none L1+L2+L3; the layer study: none L1 L1+L2 L1+L2+L3)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="env seeds, one episode each (default: 0)")
    p.add_argument("--jobs", type=int, default=1, help="episodes run at once (default 1)")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    p.add_argument("--reward", default="speedup", choices=("speedup", "log_speedup", "binary"))
    p.add_argument("--max-steps", type=int, default=350, help="turn budget per episode (default 350, as D2K-Bench)")
    p.add_argument("--observation-chars", type=int, default=50_000,
                   help="clip observations stored in trajectories to this many characters (0: keep whole)")
    p.add_argument("--policy", default="chat", choices=("chat", "reference"),
                   help="chat: an OpenAI-compatible server (default); reference: writes the expert reference")
    p.add_argument("--model", help="model name (default: $D2K_MODEL, else the server's only model)")
    p.add_argument("--base-url", help="server URL, e.g. http://localhost:8000/v1 (default: $OPENAI_BASE_URL)")
    p.add_argument("--tool-mode", default="function", choices=("function", "text"),
                   help="function: tools as function schemas (default); text: JSON calls in the reply")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=int, help="completion tokens per reply")
    p.add_argument("--keep-recent", type=int, default=8,
                   help="turns whose tool outputs are sent in full; older ones are shortened (0: never shorten)")
    p.add_argument("--clip-chars", type=int, default=2000, help="length old tool outputs are shortened to")
    p.add_argument("--max-retries", type=int, default=8, help="retries on rate limits and server errors")
    p.add_argument("--request-timeout", type=float, default=600.0, help="seconds per model request")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress: no bar and no line per episode, only the summary at the end")
    p.add_argument("--wandb-project", help="also log to this wandb project (WANDB_MODE=offline works)")
    p.add_argument("--wandb-entity")
    p.add_argument("--wandb-name", help="wandb run name (default: the run directory's name)")
    p.add_argument("--wandb-group", help="wandb run group (default: the run directory's name)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="tables and plots of a run directory: correctness, Performance Score, "
                                      "uplift from guidance")
    p.add_argument("run_dir")
    p.add_argument("--out", help="write report.md, report.json and the plots here (default: the run directory)")
    p.set_defaults(func=cmd_report)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (KeyError, ValueError, OSError, ImportError, RuntimeError) as exc:
        # Bad arguments, missing files, an extra not installed, a server that cannot be reached:
        # one line, not a traceback. Anything else is a bug in d2k and keeps its traceback.
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        _error(message)
        return 2


if __name__ == "__main__":
    sys.exit(main())
