"""The CPU backend does not pay for kernel code Triton's GPU compiler refuses: construct by construct.

Triton's interpreter runs a kernel body as Python. Triton 3.6's code generator
(triton/compiler/code_generator.py) refuses much of what Python runs; with the stock interpreter g01-g04
each earned the full reward on the CPU for a kernel that never compiles on the GPU: an ``if`` on a
block of booleans (g01, g03: a block's truth value was True), a ``while`` on an int32 count (g02), a
``break`` (g04). g05 compiles on the GPU but means something else there: ``and`` on block tensors is
an elementwise logical and for Triton, Python's ``and`` (the last operand) for the stock interpreter.
Those exploits, and a probe that branches on a scalar honestly, are tests/security/gpu_validity/,
evaluated by tests/test_security.py.

What the code generator refuses whatever the values, the policy refuses ([kernel-language], exact on the
syntax tree, kernel_language.py, which the replay runs too); what depends on the values, the patched interpreter refuses at run time with the GPU
compiler's own message ([gpu-compile], interpreter_patch.py), and so are ``bool`` and ``abs``, which the
code generator does not know at all: the policy lets them through (on a constexpr in a branch the
compiler never visits they are harmless), and the interpreter refuses them where they run, ``bool(F)`` of
a constexpr included, which is no honest idiom. ``test_cpu_refuses_what_the_gpu_refuses``
checks every construct below against Triton's own GPU front end, run on the CPU (the TTIR stage of a
compile for sm_90 needs no GPU): refused on the GPU if and only if refused on the CPU. The GPU list
(Triton 3.6), from code_generator.py and those compiles:

- an ``if`` or a conditional expression on a block tensor (``if`` accepts a block of one element, a
  conditional expression no block at all) or on a constant that is not a bool, an int or None;
- a ``while`` whose condition is not a scalar int1 tensor: a block, a float or int value (``while n:``),
  a constant (``while True``); ``while ... else``; ``for ... else`` (but for tl.static_range);
- loops over anything but ``range``, ``tl.range``, ``tl.static_range``; a loop target that is not one
  name; float or block loop bounds;
- ``break``, ``continue``, ``return`` inside a loop (tl.static_range's aside) or a ``with`` block;
- ``bool(...)`` and ``abs(...)`` (not among the builtins a kernel may name: len, list, range, float,
  int, isinstance, getattr, hasattr, print, min, max); ``int(...)``/``float(...)`` of a tensor (of a
  run-time scalar argument too); ``len`` of a tensor;
- chained comparisons (``0 < x < 1``), ``in``/``not in``, ``@``, ``**`` on tensors, ``not`` on a float
  tensor;
- lambda, ``:=``, ``del``, ``raise``, ``global``, nested ``def``, several or starred assignment
  targets, f-strings formatting a tensor, dict/set displays and comprehensions other than over a
  tl.tuple.

Later releases accept a little more (3.8 ``:=``, 3.9 chained comparisons and a ``while`` on a scalar
value): ACCEPTED_FROM below lists them, and the CPU keeps refusing them under every Triton.

Accepted by the GPU, so run by the interpreter: ``if`` on a scalar (a loaded value, an argument, a
reduction): a dynamic branch; ``and``/``or``/``not`` on tensors (elementwise; deprecated on blocks);
``assert`` (tl.device_assert); ``min``/``max``/``print``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from d2k_env.evaluator.policy import check_solution
from d2k_env.evaluator.triton_compat import TRITON

ROOT = Path(__file__).resolve().parents[1]

# Kernel bodies with x_ptr (*fp32, 256 ones), n (i32, 4) and N (constexpr, 16).
CONSTRUCTS = {
    "if_block": "v = tl.load(x_ptr + tl.arange(0, N))\nif v > 0:\n    tl.store(x_ptr, 1.0)",
    "if_block_value": "v = tl.load(x_ptr + tl.arange(0, N))\nif v:\n    tl.store(x_ptr, 1.0)",
    "if_scalar_cmp": "v = tl.load(x_ptr)\nif v > 0:\n    tl.store(x_ptr, 1.0)",
    "if_scalar_value": "v = tl.load(x_ptr)\nif v:\n    tl.store(x_ptr, 1.0)",
    "if_size1_block": "v = tl.load(x_ptr + tl.arange(0, 1))\nif v > 0:\n    tl.store(x_ptr, 1.0)",
    "if_arg": "if n > 2:\n    tl.store(x_ptr, 1.0)",
    "if_reduced": "v = tl.load(x_ptr + tl.arange(0, N))\nif tl.sum(v, axis=0) > 0:\n    tl.store(x_ptr, 1.0)",
    "if_none": "if None:\n    tl.store(x_ptr, 1.0)",
    "if_float_const": "if 1.5:\n    tl.store(x_ptr, 1.0)",
    "if_str_const": "if 'a':\n    tl.store(x_ptr, 1.0)",
    "return_in_if": "v = tl.load(x_ptr)\nif v > 0:\n    return\ntl.store(x_ptr, 1.0)",
    "ifexp_block": "v = tl.load(x_ptr + tl.arange(0, N))\nw = 1.0 if v > 0 else 2.0\ntl.store(x_ptr + tl.arange(0, N), w)",
    "ifexp_size1": "v = tl.load(x_ptr + tl.arange(0, 1))\nw = 1.0 if v > 0 else 2.0\ntl.store(x_ptr, w)",
    "ifexp_scalar": "v = tl.load(x_ptr)\nw = 1.0 if v > 0 else 2.0\ntl.store(x_ptr, w)",
    "ifexp_float_value": "v = tl.load(x_ptr)\nw = 1.0 if v else 2.0\ntl.store(x_ptr, w)",
    "ifexp_float_const": "w = 1.0 if 1.5 else 2.0\ntl.store(x_ptr, w)",
    "while_block": "v = tl.load(x_ptr + tl.arange(0, N))\nwhile v > 100:\n    v = v - 1.0\ntl.store(x_ptr + tl.arange(0, N), v)",
    "while_size1": "v = tl.load(x_ptr + tl.arange(0, 1))\nwhile v > 100:\n    v = v - 1.0\ntl.store(x_ptr + tl.arange(0, 1), v)",
    "while_scalar_cmp": "v = tl.load(x_ptr)\nwhile v > 100:\n    v = v - 1.0\ntl.store(x_ptr, v)",
    "while_scalar_value": "v = tl.load(x_ptr)\nwhile v:\n    v = v * 0.0\ntl.store(x_ptr, v)",
    "while_int_value": "i = n\nwhile i:\n    i = i - 1\ntl.store(x_ptr, i.to(tl.float32))",
    "while_bool_loaded": "b = tl.load(x_ptr) > 0\nwhile b:\n    b = b & False\ntl.store(x_ptr, 1.0)",
    "while_arg_cmp": "i = 0\nwhile i < n:\n    i += 1\ntl.store(x_ptr, i.to(tl.float32))",
    "while_true": "i = 0\nwhile True:\n    i += 1\ntl.store(x_ptr, i.to(tl.float32))",
    "while_else": "i = 0\nwhile i < n:\n    i += 1\nelse:\n    i = 5\ntl.store(x_ptr, i.to(tl.float32))",
    "for_else": "i = 0\nfor j in range(0, n):\n    i += 1\nelse:\n    i = i + 5\ntl.store(x_ptr, i.to(tl.float32))",
    "for_static_else": "for j in tl.static_range(2):\n    tl.store(x_ptr + j, 1.0)\nelse:\n    tl.store(x_ptr, 1.0)",
    "for_over_tuple": "for j in (1, 2):\n    tl.store(x_ptr + j, 1.0)",
    "for_tuple_target": "for j, k in range(0, n):\n    pass",
    "range_loaded": "v = tl.load(x_ptr).to(tl.int32)\ni = 0\nfor j in range(0, v):\n    i += 1\ntl.store(x_ptr, i.to(tl.float32))",
    "range_block": "v = tl.load(x_ptr + tl.arange(0, N)).to(tl.int32)\ni = 0\nfor j in range(0, v):\n    i += 1\ntl.store(x_ptr, i.to(tl.float32))",
    "range_float": "v = tl.load(x_ptr)\ni = 0\nfor j in range(0, v):\n    i += 1\ntl.store(x_ptr, i.to(tl.float32))",
    "tl_range_float": "v = tl.load(x_ptr)\nfor j in tl.range(0, v):\n    tl.store(x_ptr, 1.0)",
    "range_float_const": "for j in range(0, 4.0):\n    tl.store(x_ptr + j, 1.0)",
    "break_loop": "i = 0\nfor j in range(0, n):\n    i += 1\n    if j == 2:\n        break\ntl.store(x_ptr, i.to(tl.float32))",
    "continue_loop": "i = 0\nfor j in range(0, n):\n    if j == 2:\n        continue\n    i += 1\ntl.store(x_ptr, i.to(tl.float32))",
    "break_static": "i = 0\nfor j in tl.static_range(4):\n    i += 1\n    if j == 2:\n        break\ntl.store(x_ptr, i * 1.0)",
    "return_in_loop": "for j in range(0, n):\n    tl.store(x_ptr + j, 1.0)\n    return",
    "return_in_loop_if": "for j in range(0, n):\n    v = tl.load(x_ptr + j)\n    if v > 0:\n        return\ntl.store(x_ptr, 1.0)",
    "return_in_static_loop": "for j in tl.static_range(4):\n    v = tl.load(x_ptr + j)\n    if v > 0:\n        return",
    "and_block": "v = tl.load(x_ptr + tl.arange(0, N))\nm = (v > 0) and (v < 1)\ntl.store(x_ptr + tl.arange(0, N), v, mask=m)",
    "or_block": "v = tl.load(x_ptr + tl.arange(0, N))\nm = (v > 0) or (v < 1)\ntl.store(x_ptr + tl.arange(0, N), v, mask=m)",
    "not_block": "v = tl.load(x_ptr + tl.arange(0, N))\nm = not (v > 0)\ntl.store(x_ptr + tl.arange(0, N), v, mask=m)",
    "and_scalar": "v = tl.load(x_ptr)\nif (v > 0) and (v < 1):\n    tl.store(x_ptr, 1.0)",
    "and_scalar_values": "v = tl.load(x_ptr)\nw = v and 2.0\ntl.store(x_ptr, w)",
    "not_float": "v = tl.load(x_ptr)\nm = not v\ntl.store(x_ptr, 1.0, mask=m)",
    "bool_of_tensor": "v = tl.load(x_ptr)\nb = bool(v > 0)\ntl.store(x_ptr, v, mask=b)",
    "bool_of_const": "b = bool(N)\ntl.store(x_ptr, 1.0, mask=b)",
    "int_of_tensor": "v = tl.load(x_ptr)\ni = int(v)\ntl.store(x_ptr, i * 1.0)",
    "int_of_arg": "i = int(n)\ntl.store(x_ptr, i * 1.0)",
    "int_of_const": "i = int(N)\ntl.store(x_ptr, i * 1.0)",
    "float_of_tensor": "v = tl.load(x_ptr)\nf = float(v)\ntl.store(x_ptr, f)",
    "float_of_const": "f = float(N)\ntl.store(x_ptr, f)",
    "abs_of_tensor": "v = tl.load(x_ptr)\ntl.store(x_ptr, abs(v))",
    "len_of_tensor": "v = tl.load(x_ptr + tl.arange(0, N))\ntl.store(x_ptr, len(v) * 1.0)",
    "chained_cmp": "v = tl.load(x_ptr + tl.arange(0, N))\nm = 0 < v < 1\ntl.store(x_ptr + tl.arange(0, N), v, mask=m)",
    "in_op": "v = tl.load(x_ptr)\nm = v in (1.0, 2.0)\ntl.store(x_ptr, v, mask=m)",
    "matmul_op": "o = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]\na = tl.load(x_ptr + o)\ntl.store(x_ptr + o, a @ a)",
    "pow_tensor": "v = tl.load(x_ptr)\ntl.store(x_ptr, v ** 2)",
    "assert_block": "v = tl.load(x_ptr + tl.arange(0, N))\nassert v == v\ntl.store(x_ptr, 1.0)",
    "raise_stmt": "v = tl.load(x_ptr)\nif v > 1000.0:\n    raise ValueError('x')\ntl.store(x_ptr, 1.0)",
    "lambda_expr": "f = lambda a: a + 1\ntl.store(x_ptr, f(tl.load(x_ptr)))",
    "walrus": "if (v := tl.load(x_ptr)) > 0:\n    tl.store(x_ptr, v)",
    "del_stmt": "v = tl.load(x_ptr)\ndel v\ntl.store(x_ptr, 1.0)",
    "fstring_tensor": "v = tl.load(x_ptr)\ns = f'{v}'\ntl.store(x_ptr, 1.0)",
    "multi_target": "a = b = tl.load(x_ptr)\ntl.store(x_ptr, a + b)",
    "starred_target": "a, *b = (1, 2, 3)\ntl.store(x_ptr, 1.0)",
    "nested_def": "def f(a):\n    return a\ntl.store(x_ptr, 1.0)",
    "ifexp_in_while": "i = 0\nwhile (i < n) if n > 0 else False:\n    i += 1\ntl.store(x_ptr, i.to(tl.float32))",
    "min_tensors": "v = tl.load(x_ptr + tl.arange(0, N))\ntl.store(x_ptr + tl.arange(0, N), min(v, 1.0))",
    "is_none": "v = tl.load(x_ptr)\nif v is not None:\n    tl.store(x_ptr, 1.0)",
    "return_value": "v = tl.load(x_ptr)\nreturn v",
}


# What the front end accepts and the backend then refuses, seen launching it on a GPU (the gpu-marked
# test below launches every construct, so a new such case fails there first).
AFTER_THE_FRONT_END = {
    "return_value": "RuntimeError: PassManager::run failed (a launched kernel returning a value; H200, 2026-12-02)",
}


def _kernel(name: str) -> str:
    return f"@triton.jit\ndef {name}(x_ptr, n, N: tl.constexpr):\n{textwrap.indent(CONSTRUCTS[name], '    ')}\n"


MODULE = "import torch\nimport triton\nimport triton.language as tl\n\n\n" + "\n\n".join(map(_kernel, CONSTRUCTS))

INTERPRET = """
import json, sys, warnings
import torch
from d2k_env.evaluator import interpreter_patch
interpreter_patch.apply()
sys.path.insert(0, sys.argv[1])
import constructs
out = {}
for name in sys.argv[2:]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(constructs, name)[(1,)](torch.ones(256), 4, N=16)
        out[name] = None
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def constructs_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("constructs")
    (d / "constructs.py").write_text(MODULE)
    return d


@pytest.fixture(scope="module")
def gpu_verdicts(constructs_dir) -> dict[str, str | None]:
    """Each construct through Triton's GPU front end (AST to TTIR for sm_90), which runs without a GPU."""
    pytest.importorskip("triton.backends.nvidia")
    import importlib.util

    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    spec = importlib.util.spec_from_file_location("constructs_gpu", constructs_dir / "constructs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    options = backend.parse_options({})
    verdicts = {}
    for name in CONSTRUCTS:
        fn = getattr(module, name)
        if not hasattr(fn, "src"):
            pytest.skip("TRITON_INTERPRET is set in this process: triton.jit made no JITFunction")
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ASTSource(fn, {"x_ptr": "*fp32", "n": "i32", "N": "constexpr"}, {"N": 16}).make_ir(
                    target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context)
            verdicts[name] = None
        except Exception as exc:  # noqa: BLE001 - any failure is the GPU refusing it
            verdicts[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    return {**verdicts, **{name: why for name, why in AFTER_THE_FRONT_END.items() if verdicts.get(name) is None}}


@pytest.fixture(scope="module")
def interpreter_verdicts(constructs_dir) -> dict[str, str | None]:
    """Each construct the policy lets through, run by the patched interpreter in a child process."""
    names = [n for n in CONSTRUCTS if not _policy_rules(n)]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", INTERPRET, str(constructs_dir), *names], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _policy_rules(name: str) -> list[str]:
    body = f"\n\ndef forward(x):\n    {name}[(1,)](x, 4, N=16)\n    return x\n"
    source = "import torch\nimport triton\nimport triton.language as tl\n\n\n" + _kernel(name) + body
    return sorted({v.rule for v in check_solution(source, frozenset({"empty"}))})


# Constructs that Triton 3.6's front end refuses and a later release's accepts, by the release that first
# does. The CPU keeps refusing them under every Triton (the tasks are timed on 3.6, and a verdict must not
# depend on the Triton installed): under these releases the test checks that the GPU accepts and the CPU
# refuses, so a release that changes the list again fails here.
ACCEPTED_FROM = {
    "walrus": (3, 8),              # visit_NamedExpr
    "chained_cmp": (3, 9),         # visit_Compare folds `a < b < c` into an and
    "while_scalar_value": (3, 9),  # a while condition converted to a bool as an if condition is
    "while_int_value": (3, 9),
}


@pytest.mark.parametrize("name", list(CONSTRUCTS))
def test_cpu_refuses_what_the_gpu_refuses(name, gpu_verdicts, interpreter_verdicts):
    gpu = gpu_verdicts[name]
    policy = _policy_rules(name)
    interpreted = interpreter_verdicts.get(name)
    cpu = policy or interpreted
    later = name in ACCEPTED_FROM and TRITON >= ACCEPTED_FROM[name]
    gpu_refuses = gpu is not None or later
    assert bool(cpu) == gpu_refuses, f"GPU: {gpu!r}; policy: {policy}; interpreter: {interpreted!r}"
    if later:
        assert gpu is None, f"Triton {'.'.join(map(str, TRITON))} refuses {name} after all: {gpu}"


@pytest.mark.parametrize("name", ["if_block", "if_block_value", "ifexp_block", "ifexp_size1", "while_block",
                                  "while_size1", "while_scalar_value", "while_int_value", "range_block",
                                  "range_float", "tl_range_float", "range_float_const",
                                  "fstring_tensor", "bool_of_const", "abs_of_tensor"])
def test_value_dependent_refusals_carry_the_rule(name, interpreter_verdicts):
    assert "[gpu-compile]" in (interpreter_verdicts.get(name) or ""), interpreter_verdicts.get(name)


@pytest.mark.parametrize("name", ["while_true", "while_else", "for_else", "for_over_tuple", "break_loop",
                                  "continue_loop", "break_static", "return_in_loop", "return_in_loop_if",
                                  "chained_cmp", "in_op", "matmul_op",
                                  "raise_stmt", "lambda_expr", "walrus", "del_stmt", "multi_target",
                                  "starred_target", "nested_def", "if_float_const", "if_str_const", "ifexp_float_const",
                                  "return_value"])
def test_static_refusals_carry_the_rule(name):
    assert "kernel-language" in _policy_rules(name)


SEMANTICS = """
import sys, torch
import triton, triton.language as tl
from d2k_env.evaluator import interpreter_patch
interpreter_patch.apply()

@triton.jit
def logic(x_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    v = tl.load(x_ptr + offs)
    tl.store(o_ptr + offs, ((v > 0.25) and (v < 0.75)).to(tl.float32))
    tl.store(o_ptr + N + offs, ((v > 0.75) or (v < 0.25)).to(tl.float32))
    tl.store(o_ptr + 2 * N + offs, (not (v > 0.5)).to(tl.float32))
    tl.store(o_ptr + 3 * N + offs, ((N > 4) and (v > 0.5)).to(tl.float32))

x = torch.linspace(0, 1, 16)
o = torch.zeros(64)
logic[(1,)](x, o, N=16)
expected = torch.cat([((x > 0.25) & (x < 0.75)), ((x > 0.75) | (x < 0.25)), ~(x > 0.5), (x > 0.5)]).float()
print("ok" if torch.equal(o, expected) else f"differs: {o.tolist()} vs {expected.tolist()}")
"""


def test_and_or_not_on_tensors_mean_what_they_mean_on_the_gpu(tmp_path):
    script = tmp_path / "semantics.py"  # a file: the interpreter rewrites only kernels whose source it can read
    script.write_text(SEMANTICS)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(script)], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "ok", done.stdout


@pytest.mark.gpu
def test_the_gpu_compiles_what_its_front_end_accepts(constructs_dir, gpu_verdicts):
    """On a GPU: launching each construct refuses exactly what the CPU-side front-end run refused."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("constructs_cuda", constructs_dir / "constructs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    differ = {}
    for name in CONSTRUCTS:
        x = torch.ones(256, device="cuda")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                getattr(module, name)[(1,)](x, 4, N=16)
            torch.cuda.synchronize()
            launched = None
        except Exception as exc:  # noqa: BLE001
            launched = f"{type(exc).__name__}: {exc}"[:200]
        if (launched is None) != (gpu_verdicts[name] is None):
            differ[name] = (launched, gpu_verdicts[name])
    assert not differ, differ
