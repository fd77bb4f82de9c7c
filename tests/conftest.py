import contextlib
import json
import threading
import time

import pytest
import torch

import d2k_env  # noqa: F401 - registers the environments
from d2k_env.task import load_task, task_ids

TASK_IDS = task_ids()
HAS_GPU = torch.cuda.is_available()


# Run first, longest first, so that under pytest-xdist (``--dist loadfile``: a module's tests stay in
# one worker) the long modules never start last while the other worker idles.
LONG_MODULES = ("test_security.py", "test_task_authoring.py", "test_every_task.py", "test_experiment.py",
                "test_forkserver.py", "test_service.py", "test_ray_service.py", "test_warm_workers.py",
                "test_evaluator.py", "test_fuzz.py", "test_sandbox.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_MODULES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_MODULES)))  # stable: order within kept
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@contextlib.contextmanager
def serialised_ast_parse():
    """``ast.parse`` one thread at a time while the block runs, for the modules that evaluate on several
    threads. On CPython 3.11 a parse on one thread can make another's raise SystemError ("AST
    constructor recursion depth mismatch": the counter is the interpreter's, not the thread's; seen
    here on 3.11.7 with two threads parsing, python/cpython#106905), and the static policy fails
    closed on any error, so a solution would be refused for it. The policy, the header parser and
    the wrong-solution generator all call ``ast.parse`` by its module attribute."""
    import ast
    parse, lock = ast.parse, threading.RLock()

    def serialised(*args, **kwargs):
        with lock:
            return parse(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ast, "parse", serialised)
        yield


def wait_until(condition, timeout: float = 30) -> bool:
    """Whether ``condition()`` came true within ``timeout`` seconds (polled every 50 ms)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def evaluated_on_a_thread_that_ended(ev):
    """The reference evaluated by ``ev`` on a thread that has ended when this returns (what a
    supervisor's or fork server's parent-death signal follows)."""
    import threading
    results = []
    thread = threading.Thread(target=lambda: results.append(ev.evaluate(ev.task.reference_path)))
    thread.start()
    thread.join()
    return results[0]


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def call(tool, **args):
    """An action as JSON text, the way an agent sends it."""
    return json.dumps({"tool": tool, "args": args})


@pytest.fixture
def rmsnorm_task():
    return load_task("fused_add_rmsnorm")


@pytest.fixture(scope="session")
def interpreted():
    """Scripts under Triton's CPU interpreter, each in a fresh forked process (tests/interpreted.py)."""
    from interpreted import InterpretedScripts
    scripts = InterpretedScripts()
    yield scripts
    scripts.close()


def installed(*modules: str) -> bool:
    """Whether every module can be imported (found, not imported: collecting stays cheap; finding a
    submodule imports its parent package, and a missing parent means not installed)."""
    import importlib.util

    def found(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            return False
    return all(found(m) for m in modules)


class Lazy:
    """A module imported on its first attribute, for the heavy optional extras (OpenEnv imports
    gradio: 6 s): importing a test module, which every pytest-xdist worker does to collect, costs
    nothing for the worker that does not run it."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        if attribute.startswith("__"):  # a collector's introspection (pytest plugins look): no import
            raise AttributeError(attribute)
        import importlib
        return getattr(importlib.import_module(self._name), attribute)
