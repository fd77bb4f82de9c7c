"""The run-time rule behind [hidden-state]: after forward, nothing the solution's module can reach
holds a tensor. Each case is a way to keep one (found), or plain state honest code keeps (not)."""

import textwrap

import pytest

from d2k_env.evaluator.kept_state import kept_tensors
from d2k_env.evaluator.worker import load_module

KEEPS = {
    "a dict value": "CACHE = {}\ndef forward(x):\n    CACHE[x.shape] = x\n",
    "a dict key": "SEEN = {}\ndef forward(x):\n    SEEN[x] = 1\n",
    "a list in a tuple": "STATE = ([],)\ndef forward(x):\n    STATE[0].append(x)\n",
    "an lru_cache": "import functools\n@functools.lru_cache\ndef same(x):\n    return x\n"
                    "def forward(x):\n    same(x)\n",
    "a default argument": "def forward(x, memo=[]):\n    memo.append(x)\n",
    "a closure": "def make():\n    box = []\n    def forward(x):\n        box.append(x)\n    return forward\n"
                 "forward = make()\n",
    "a partial's keywords": "import functools\ndef f(x, out):\n    out.append(x)\n"
                            "g = functools.partial(f, out=[])\ndef forward(x):\n    g(x)\n",
    "a suspended generator": "def gen():\n    held = yield\n    yield held\nG = gen()\nnext(G)\n"
                             "def forward(x):\n    G.send(x)\n",
    "an instance of its own class": "class Box:\n    pass\nB = Box()\ndef forward(x):\n    B.__dict__['x'] = x\n",
    "a function attribute": "def forward(x):\n    forward.__dict__['last'] = x\n",
}

PLAIN = {
    "block sizes keyed by shape": "BLOCKS = {}\ndef forward(x):\n    BLOCKS[tuple(x.shape)] = 128\n",
    "an lru_cache of configs": "import functools\n@functools.lru_cache(maxsize=None)\ndef pick(n):\n"
                               "    return (n, 4)\ndef forward(x):\n    pick(x.shape[0])\n",
    "device properties and dtypes": "import torch\nINFO = {}\ndef forward(x):\n"
                                    "    INFO[x.device] = (torch.float32, x.dtype, 132)\n",
}


def _run(tmp_path, name: str, source: str):
    path = tmp_path / "solution.py"
    path.write_text(textwrap.dedent(source))
    import torch
    module = load_module(str(path), f"kept_probe_{abs(hash(name))}")
    module.forward(torch.ones(3))
    return kept_tensors(module)


@pytest.mark.parametrize("name", KEEPS)
def test_a_tensor_kept_between_calls_is_found(tmp_path, name):
    assert _run(tmp_path, name, KEEPS[name]), name


@pytest.mark.parametrize("name", PLAIN)
def test_plain_state_is_not_a_kept_tensor(tmp_path, name):
    assert _run(tmp_path, name, PLAIN[name]) == []


def test_past_the_policy_a_replay_cache_scores_zero_with_hidden_state(tmp_path, monkeypatch):
    """The reference, wrapped in an output cache keyed by shape: the policy would refuse it; with
    the policy off, the run-time rule does."""
    from d2k_env.evaluator import Evaluator
    from d2k_env.reward import submission_reward
    from d2k_env.task import load_task
    task = load_task("fused_add_rmsnorm")
    path = tmp_path / "solution.py"
    path.write_text(task.reference_path.read_text() + textwrap.dedent("""
        _REPLAY = {}
        _computed = forward

        def forward(*inputs):
            key = tuple(inputs[0].shape)
            if key not in _REPLAY:
                _REPLAY[key] = _computed(*inputs)
            return _REPLAY[key]
    """))
    monkeypatch.setattr("d2k_env.evaluator.check_solution", lambda source, allowed: [])
    ev = Evaluator(task, "interpreter")
    try:
        result = ev.evaluate(path, "submit", workloads=[ev.workloads[0].name])
    finally:
        ev.close()
    assert submission_reward("speedup", result) == 0
    assert "[hidden-state] after forward returned" in result.workloads[0].message, result.workloads[0].message


CHANGES = {
    "a counter in a dict": "STATE = {'calls': 0}\ndef forward(x):\n    STATE['calls'] += 1\n",
    "a list growing per call": "SEEN = []\ndef forward(x):\n    SEEN.append(1)\n",
    "a memo keyed by call count": "MEMO = {}\ndef forward(x):\n    MEMO[len(MEMO)] = 1\n",
    "a toggle in a default": "def forward(x, odd=[False]):\n    odd[0] = not odd[0]\n",
}


def _states(tmp_path, name: str, source: str, calls: int) -> list[str]:
    import torch
    from d2k_env.evaluator.kept_state import state_fingerprint
    path = tmp_path / "solution.py"
    path.write_text(source)
    module = load_module(str(path), f"state_probe_{abs(hash(name))}")
    states = []
    for _ in range(calls):
        module.forward(torch.ones(3))
        states.append(state_fingerprint(module))
    return states


@pytest.mark.parametrize("name", CHANGES)
def test_state_that_changes_with_calls_is_seen(tmp_path, name):
    """The worker compares the digest after every timed call with the one after the first call
    (a flag set on the first call alone changes nothing later: [late-corruption] judges that)."""
    first, second, *_ = _states(tmp_path, name, CHANGES[name], 3)
    assert second != first, name


@pytest.mark.parametrize("name", PLAIN)
def test_a_cache_keyed_by_shape_is_unchanged_on_later_calls(tmp_path, name):
    first, *later = _states(tmp_path, name, PLAIN[name], 3)
    assert all(s == first for s in later), name
