"""Packaging and task discovery: a wheel carries the shipped tasks and plays them, D2K_TASKS_PATH
adds a user's task directory (registered like a shipped task; a malformed one is a warning naming
its path), and ``import d2k_env`` registers every id without importing torch or Triton."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from importlib.metadata import version
from pathlib import Path

import gymnasium as gym
import numpy
import pytest
import rich
import torch
import triton

from d2k_env.registration import env_id, register_all
from d2k_env.task import GUIDANCE_LAYERS, TASK_FOLDERS, TASKS_PATH_VAR, builtin_root, discover, task_ids

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = "fused_add_rmsnorm"
# What a wheel install needs beside the package: where torch, Triton, Gymnasium, NumPy and rich live, in
# this interpreter's sys.path order (a virtual environment's Triton shadows the machine's, as here).
_SEARCH_ORDER = [os.path.realpath(entry or ".") for entry in sys.path]
DEPENDENCY_PATHS = sorted({str(Path(m.__file__).resolve().parent.parent) for m in (torch, triton, gym, numpy, rich)},
                          key=lambda p: _SEARCH_ORDER.index(p) if p in _SEARCH_ORDER else len(_SEARCH_ORDER))


def copy_task(task_id: str, into: Path, new_id: str) -> None:
    """Task ``task_id``'s four pieces copied into task directory ``into`` under the id ``new_id``."""
    src = builtin_root()
    for folder in ("tasks", "baselines", "references"):
        (into / folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / folder / f"{task_id}.py", into / folder / f"{new_id}.py")
    shutil.copytree(src / "guidance" / task_id, into / "guidance" / new_id)


def python(code: str, cwd: Path, pythonpath: list[str], timeout: float, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter without its site-packages: it imports only from ``pythonpath``."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", TASKS_PATH_VAR)}
    environ.update(env, PYTHONPATH=os.pathsep.join(pythonpath))
    return subprocess.run([sys.executable, "-S", "-c", textwrap.dedent(code)], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built from a copy of what the build reads (the build writes
    build/ and egg-info next to its sources, and others share this tree)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("d2k_env", *TASK_FOLDERS):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "-w", str(work / "dist"), str(src)], check=True, timeout=300)
    (built,) = (work / "dist").glob("d2k_env-*.whl")
    return built


def test_the_wheel_holds_the_package_and_every_shipped_task(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "d2k_env").rglob("*.py")}
    assert package - names == set(), "a module of d2k_env/ is missing from the wheel (pyproject's packages)"
    for task_id in task_ids(ROOT):
        for path in (f"tasks/{task_id}.py", f"baselines/{task_id}.py", f"references/{task_id}.py",
                     *(f"guidance/{task_id}/{layer}.md" for layer in GUIDANCE_LAYERS)):
            assert f"d2k_env/builtin/{path}" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/")) or "__pycache__" in n]


def test_installed_wheel_lists_evaluates_and_plays_a_user_task_directory(wheel, tmp_path):
    """From ``pip install --target`` of the wheel alone (no checkout on the path): the CLI lists the
    shipped tasks, a shipped reference is correct on the interpreter, and a task directory named in
    D2K_TASKS_PATH registers and plays through gym.make."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                    str(target), str(wheel)], check=True, timeout=300)
    user = tmp_path / "my_tasks"
    copy_task(SHIPPED, user, "scratch_rmsnorm")
    run = python(f"""
        import json, sys
        import gymnasium as gym
        import d2k_env
        from d2k_env.cli import main
        from d2k_env.evaluator import Evaluator
        from d2k_env.task import load_task, task_ids

        assert d2k_env.__file__.startswith({str(target)!r}), d2k_env.__file__
        print("ids", json.dumps(task_ids()))
        assert main(["list"]) == 0
        from d2k_env.cli import version_line
        print("version", version_line())
        task = load_task({SHIPPED!r})
        result = Evaluator(task, "interpreter").evaluate(task.reference_path, "test", ["5x200"])
        print("shipped", result.error, [w.correct for w in result.workloads])
        env = gym.make("D2K/scratch_rmsnorm-v0", backend="interpreter")
        env.reset(seed=0)
        reference = env.unwrapped.task.reference_path
        env.step({{"tool": "write_file", "args": {{"path": "solution.py", "content": reference.read_text()}}}})
        _, _, _, _, info = env.step({{"tool": "benchmark", "args": {{"workloads": ["5x200"]}}}})
        print("user", str(reference.parent.parent), [w["correct"] for w in info["evaluation"]["workloads"]])
        env.close()
        """, tmp_path, [str(target), *DEPENDENCY_PATHS], timeout=400, **{TASKS_PATH_VAR: str(user)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in run.stdout.splitlines()
             if line.startswith(("ids ", "version ", "shipped ", "user "))}
    assert lines["ids"] == str(sorted([*task_ids(ROOT), "scratch_rmsnorm"])).replace("'", '"')
    assert all(t in run.stdout for t in task_ids(ROOT))  # d2k list
    assert lines["version"] == f"d2k-env {version('d2k-env')} ({target / 'd2k_env'})"  # d2k --version
    assert lines["shipped"] == "None [True]"
    assert lines["user"] == f"{user} [True]"


@pytest.fixture
def user_tasks(monkeypatch, tmp_path):
    """Names task directories in D2K_TASKS_PATH; unregisters the ids they added afterwards."""
    before = set(gym.registry)

    def name(*dirs: Path) -> None:
        monkeypatch.setenv(TASKS_PATH_VAR, os.pathsep.join(map(str, dirs)))

    yield name
    for gid in set(gym.registry) - before:
        del gym.registry[gid]


def test_malformed_task_directories_and_clashes_are_warnings_naming_the_path(user_tasks, tmp_path):
    good, clash, broken, no_tasks = (tmp_path / n for n in ("good", "clash", "broken", "no_tasks"))
    copy_task(SHIPPED, good, "user_rmsnorm")
    copy_task(SHIPPED, clash, SHIPPED)  # a shipped id: the shipped task stays
    copy_task(SHIPPED, clash, "user_rmsnorm")  # an id an earlier directory defines
    copy_task(SHIPPED, broken, "no_guidance")
    shutil.rmtree(broken / "guidance" / "no_guidance")
    shutil.copyfile(broken / "tasks" / "no_guidance.py", broken / "tasks" / "not-an-id.py")
    no_tasks.mkdir()
    missing = tmp_path / "missing"
    user_tasks(good, clash, broken, no_tasks, missing)

    roots, problems = discover()
    assert roots[SHIPPED] == builtin_root() and roots["user_rmsnorm"] == good
    assert "no_guidance" not in roots and "not-an-id" not in roots
    expected = [f"task '{SHIPPED}' in {clash} is already defined in {builtin_root()}",
                f"task 'user_rmsnorm' in {clash} is already defined in {good}",
                f"task 'no_guidance' in {broken} lacks guidance/no_guidance/L1.md",
                f"{broken / 'tasks' / 'not-an-id.py'}: a task id must be a Python identifier",
                f"{no_tasks} has no tasks/ folder", f"{missing} is not a directory"]
    for text in expected:
        assert any(text in p for p in problems), (text, problems)
    assert all(p.startswith(f"{TASKS_PATH_VAR}: ") for p in problems)

    with pytest.warns(RuntimeWarning) as caught:
        ids = register_all()
    assert env_id("user_rmsnorm") in ids and env_id(SHIPPED) in ids
    assert gym.spec(env_id("user_rmsnorm")).kwargs == {"task_id": "user_rmsnorm"}
    assert len(caught) == len(problems)


def test_import_with_a_malformed_tasks_path_warns_and_registers_the_rest(tmp_path):
    missing = tmp_path / "missing"
    run = python("import d2k_env, gymnasium as gym; print(sorted(k for k in gym.registry if k.startswith('D2K/')))",
                 tmp_path, [str(ROOT), *DEPENDENCY_PATHS], timeout=60, **{TASKS_PATH_VAR: str(missing)})
    assert run.returncode == 0, run.stderr
    assert f"{missing} is not a directory" in run.stderr
    assert run.stdout.strip() == str([env_id(t) for t in task_ids(ROOT)])


def test_import_registers_every_id_without_torch_or_triton(tmp_path):
    """Registering is cheap for a trainer's every process: no torch, no Triton until gym.make."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", textwrap.dedent("""
        import sys
        import d2k_env
        import gymnasium as gym
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "triton")))
        print(sorted(k for k in gym.registry if k.startswith("D2K/")))
        """)], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k != TASKS_PATH_VAR})  # the shipped tasks only
    assert run.returncode == 0, run.stderr
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in run.stderr.splitlines()
                if line.startswith("import time:")}
    assert "d2k_env" in imported and not imported & {"torch", "triton"}
    assert run.stdout.splitlines() == ["[]", str([env_id(t) for t in task_ids(ROOT)])]


def test_gym_make_with_the_module_prefix_imports_the_package_itself(tmp_path):
    """Gymnasium 1.x has no plugin entry points; ``gym.make("d2k_env:<id>")`` imports the package
    (registering every id) and makes the env, which loads torch and the task."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        import gymnasium as gym
        env = gym.make("d2k_env:{env_id(SHIPPED)}", backend="interpreter")
        print(env.unwrapped.task.id, "torch" in sys.modules)
        env.close()
        """)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [SHIPPED, "True"]


def test_ci_runs_exactly_the_readmes_test_commands():
    """.ci/run runs the README's test commands (the block that starts with the test install), line for
    line, then the Triton-compat run and the resolution on PyPI alone."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(python3 -m pip install -e \"\.\[test\]\"\n.*?)```", readme, re.S)
    assert block, "the README shows no test command block"
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.search(r"\n# README test commands\n(.*?)# end of README test commands\n(.*)", ci, re.S)
    assert commands, ".ci/run marks no README test commands"
    assert commands[1] == block[1]
    assert commands[2].split() == [".ci/triton-compat", ".ci/resolve-on-pypi"]


# -- install layouts: the wheel evaluates wherever pip put it, and no worker reads a reference ---------

# Run by the layout's Python, from a directory with no checkout in reach: an episode made by gym.make,
# then an escaped solution (the static policy off, as a solution past it) that tries to read the
# installed package's own reference of the task.
LAYOUT_EPISODE = """
    import json, sys
    import gymnasium as gym
    import d2k_env
    import d2k_env.evaluator as evaluator
    from d2k_env.evaluator import Evaluator
    from d2k_env.task import load_task

    assert d2k_env.__file__.startswith(sys.argv[1]), d2k_env.__file__
    env = gym.make("D2K/@TASK@-v0", backend="interpreter")
    env.reset(seed=0)
    reference = env.unwrapped.task.reference_path
    assert str(reference).startswith(sys.argv[1]), reference
    env.step({"tool": "write_file", "args": {"path": "solution.py", "content": reference.read_text()}})
    _, reward, _, _, info = env.step({"tool": "benchmark", "args": {"workloads": ["5x200"]}})
    print("episode", json.dumps([w["correct"] for w in info["evaluation"]["workloads"]]))
    env.close()

    evaluator.check_solution = lambda source, allowed: []  # past the policy
    escaped = sys.argv[2]
    with open(escaped, "w") as f:
        f.write("import triton\\n"
                f"try:\\n    print('READ', len(open({str(reference)!r}).read()))\\n"
                "except OSError as exc:\\n    print('REFUSED', type(exc).__name__)\\n"
                "def forward(*args):\\n    raise RuntimeError('probed')\\n")
    result = Evaluator(load_task("@TASK@"), "interpreter").evaluate(escaped, "test", ["5x200"])
    print("probe", json.dumps([line for line in result.output.splitlines() if line.startswith(("READ", "REFUSED"))]))
    print("layers", json.dumps(result.sandbox))
"""


def _play_layout(python_exe: str, where: Path, cwd: Path, env: dict[str, str]) -> dict[str, str]:
    """``d2k eval --mode submit`` of the shipped reference, then LAYOUT_EPISODE, by ``python_exe``
    whose ``d2k_env`` lies in ``where``; returns the lines each printed, by their first word."""
    reference = where / "d2k_env" / "builtin" / "references" / f"{SHIPPED}.py"
    out = cwd / "submit.json"
    done = subprocess.run([python_exe, "-m", "d2k_env.cli", "eval", SHIPPED, str(reference), "--mode", "submit",
                           "--backend", "interpreter", "--seed", "5", "--json", str(out)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    submitted = __import__("json").loads(out.read_text())
    run = subprocess.run([python_exe, "-c", textwrap.dedent(LAYOUT_EPISODE).replace("@TASK@", SHIPPED),
                          str(where), str(cwd / "escaped.py")],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in run.stdout.splitlines()
             if line.startswith(("episode ", "probe ", "layers "))}
    return {"submit": submitted, **lines}


def _clean_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", TASKS_PATH_VAR)}


def _check_layout(played: dict) -> None:
    submitted = played["submit"]
    assert submitted["error"] is None and submitted["workloads"], submitted
    assert all(w["correct"] for w in submitted["workloads"]), submitted["workloads"]
    assert any(w["heldout"] for w in submitted["workloads"]), submitted["workloads"]  # submit's held-out shapes ran
    assert played["episode"] == "[true]", played
    # Under an empty mount the file is not there; stepped around by Landlock, it may not be opened.
    assert played["probe"] in ('["REFUSED FileNotFoundError"]', '["REFUSED PermissionError"]'), played


def test_a_wheel_in_a_venv_with_3000_site_packages_entries_submits_plays_and_hides_the_references(wheel, tmp_path):
    """The wheel installed (``--no-deps``; the dependencies are the machine's, through
    ``--system-site-packages``) into a virtual environment whose site-packages holds 3000 more
    entries: ``d2k eval --mode submit`` of a shipped reference passes, a gym.make episode plays,
    and a worker past the policy cannot read the installed reference (before, the sandbox's rules
    for such a site-packages overflowed argv: E2BIG at every evaluation)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
                   check=True, timeout=300, env=_clean_environ())
    site_dir = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    for i in range(3000):
        (site_dir / f"filler_{i:04d}").mkdir()
    assert len(os.listdir(site_dir)) >= 3000
    home = tmp_path / "home"  # no checkout in reach
    home.mkdir()
    played = _play_layout(py, site_dir, home, _clean_environ())
    _check_layout(played)


def test_pip_install_target_with_pythonpath_submits_plays_and_hides_the_references(wheel, tmp_path):
    """``pip install --target DIR`` with ``PYTHONPATH=DIR``, DIR holding the dependencies too (here
    links to the machine's, in a virtual environment that has none of its own): before, the
    sandbox left DIR out of the workers' read roots (it holds the package) and every worker died
    with ``No module named 'gymnasium'``."""
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                    str(target), str(wheel)], check=True, timeout=300, env=_clean_environ())
    machine_site = Path(gym.__file__).resolve().parents[1]
    for entry in machine_site.iterdir():  # every dependency, as pip --target would have put it there
        if not entry.name.startswith(("d2k_env", "__editable__", "_sandboxing")) and entry.suffix != ".pth" \
                and not (target / entry.name).exists():
            (target / entry.name).symlink_to(entry)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    home = tmp_path / "home"
    home.mkdir()
    env = {**_clean_environ(), "PYTHONPATH": str(target)}
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import gymnasium, sys; print(gymnasium.__file__)"],
                           cwd=home, env={**env, "PYTHONPATH": ""}, capture_output=True, text=True)
    assert check.returncode != 0, "the venv should hold no dependency of its own"
    played = _play_layout(str(venv / "bin" / "python"), target, home, env)
    _check_layout(played)
