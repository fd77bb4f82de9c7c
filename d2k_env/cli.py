"""The ``d2k`` command: list tasks, show prompts, evaluate solution files, run a demo episode."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
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


def cmd_eval(args) -> int:
    from d2k_env.evaluator import Evaluator, EvalResult
    from d2k_env.task import load_task
    from d2k_env.verdict import format_result

    task = load_task(args.task)
    path = Path(args.file).resolve()
    if not path.is_file():
        console.print(f"[red]no such file: {args.file}[/red]")
        return 2
    evaluator = Evaluator(task, args.backend)
    mode = args.mode or ("benchmark" if evaluator.can_time else "test")
    names = args.workloads or [w.name for w in evaluator.workloads]
    merged: EvalResult | None = None
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task(f"{task.id} on {evaluator.backend}", total=len(names))
        for name in names:  # one child per workload, so progress is real; the Triton cache is shared
            progress.update(bar, description=f"{task.id} on {evaluator.backend}: {mode} {name}")
            result = evaluator.evaluate(path, mode, [name], seed=args.seed)
            if merged is None:
                merged = result
            else:
                merged.workloads += result.workloads
                merged.error = merged.error or result.error
                merged.output = (merged.output + "\n" + result.output).strip()
            progress.advance(bar)
    evaluator.close()
    print(format_result(merged, f"{task.id}: {path.name} ({mode}, {evaluator.backend} backend)"))
    if merged.timed:
        print(f"device: {merged.device_name}; torch {merged.versions.get('torch')}, triton "
              f"{merged.versions.get('triton')}; ceilings: {merged.ceilings}")
    if args.json:
        Path(args.json).write_text(json.dumps(merged.to_dict(), indent=2))
    return 0 if merged.correct else 1


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
    p.add_argument("--mode", choices=("test", "benchmark"), help="default: benchmark on cuda, test otherwise")
    p.add_argument("--workloads", nargs="+", help="only these workloads")
    p.add_argument("--seed", type=int, help="input seed (default: a fresh secret one)")
    p.add_argument("--json", help="also write the full result as JSON here")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("demo", help="one whole episode by a scripted policy that submits the reference")
    p.add_argument("task", nargs="?", default="fused_add_rmsnorm")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    p.add_argument("--guidance", default="L1+L2+L3")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-chars", type=int, default=1500, help="clip each observation printed")
    p.set_defaults(func=cmd_demo)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc.args[0] if exc.args else exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
