"""Which Triton is installed, and the facts about Triton's internals that this package relies on.

The interpreter patch (interpreter_patch.py) and the static policy (policy.py) reach into Triton's
private code: the interpreter's builder and memory functions, the autotuner, the GPU code generator.
Those internals change between releases, so every such touch is gated here by release (``TRITON``
compared with a tuple), and what the policy reads off Triton's compiler is written out below as
fixed tables rather than read off whatever Triton is installed: a solution gets the same verdict
under every supported release. tests/test_triton_compat.py compares the tables with the installed
Triton's own, where it still has them.

Supported and tested: Triton 3.6 to 3.9 (docs/install.md lists the torch/Triton pairs that ran).
"""

from __future__ import annotations

import ast
import re

import triton

# The oldest and the newest minor release this package is tested with (pyproject.toml's range).
OLDEST_SUPPORTED = (3, 6)
NEWEST_SUPPORTED = (3, 9)


def parse_version(text: str) -> tuple[int, int, int]:
    """``"3.9.0"``, ``"3.6.0+git1234"``, ``"3.8.0rc1"`` -> (3, 9, 0): the numeric release, anything after
    it ignored."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        raise ValueError(f"cannot read a Triton release from {text!r}")
    return int(match[1]), int(match[2]), int(match[3] or 0)


TRITON = parse_version(triton.__version__)


def supported(version: tuple[int, ...] = TRITON) -> bool:
    """Whether a release (by default the installed one) lies in the tested range."""
    return OLDEST_SUPPORTED <= tuple(version[:2]) <= NEWEST_SUPPORTED


# --- The GPU code generator's language (triton.compiler.code_generator.CodeGenerator) -------------------
# Fixed at Triton 3.6's, the release on the GPU machine the tasks are timed on; 3.7 accepts the same.
# Later releases accept more (3.8 a named expression `x := v`, 3.9 chained comparisons `a < b < c`), and
# these tables deliberately do not follow them: a kernel the policy passes compiles on every supported
# release.

# Node types CodeGenerator has a visit_<Name> method for (3.6 and 3.7 alike); statements and expressions
# of any other type fail with "unsupported AST node type".
GPU_VISITED_NODES = frozenset({
    "AnnAssign", "Assert", "Assign", "Attribute", "AugAssign", "BinOp", "BoolOp", "Call", "Compare", "Constant",
    "Expr", "ExtSlice", "For", "FunctionDef", "If", "IfExp", "Index", "JoinedStr", "List", "ListComp", "Name",
    "Pass", "Return", "Slice", "Subscript", "Tuple", "UnaryOp", "While", "With",
})
# CodeGenerator._method_name_for_bin_op's keys up to 3.8 (3.9 merged it into _operators, same operators):
# every binary operator but `@`.
GPU_BINOPS = frozenset({ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
                        ast.BitAnd, ast.BitOr, ast.BitXor})
# CodeGenerator._method_name_for_comp_op's keys up to 3.8 (3.9: in _operators), and `is`/`is not`, which
# visit_Compare answers itself as a constexpr. Not `in`/`not in`.
GPU_COMPARES = frozenset({ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot})
# CodeGenerator.builtin_namespace's keys (3.6 to 3.9 alike): the only Python builtins a kernel may name.
GPU_BUILTINS = frozenset({"float", "getattr", "hasattr", "int", "isinstance", "len", "list", "max", "min", "print",
                          "range"})


def gpu_unsupported_nodes() -> frozenset:
    """The statement and expression types of this Python's ``ast`` that the code generator has no visitor
    for (break, continue, lambda, :=, del, raise, ...)."""
    return frozenset(c for c in vars(ast).values() if isinstance(c, type) and issubclass(c, (ast.stmt, ast.expr))
                     and c not in (ast.stmt, ast.expr) and c.__name__ not in GPU_VISITED_NODES)


# Block pointers (tl.make_block_ptr, tl.advance): deprecated in Triton 3.8 (a warning), removed in 3.9
# (NotImplementedError, in favour of tensor descriptors), on the GPU and the interpreter alike. A kernel
# using them runs only up to 3.8.
BLOCK_POINTERS_REMOVED = (3, 9)


# --- Triton's kernel objects and values, as the policy names them ---------------------------------------
# Public methods and attributes of Triton's tensors, dtypes, pointer/block types, constexprs, tuples and
# tensor descriptors (tl.tensor, tl.dtype, tl.pointer_type, tl.block_type, tl.constexpr, tl.tuple,
# tl.tensor_descriptor, tl.core.tensor_descriptor_base): the methods a kernel body may call on a value.
# Triton 3.6's (3.7 and 3.8 have the same); 3.9 adds atomic_load, atomic_poll and atomic_store, which the
# GPU the tasks are timed on (3.6) lacks, so they stay out.
TRITON_METHODS = frozenset({
    "FP_TYPES", "KIND", "OTHER_TYPES", "SIGNEDNESS", "SINT_TYPES", "STANDARD_FP_TYPES", "T", "UINT_TYPES",
    "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and", "atomic_cas",
    "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor", "block_shape", "block_type",
    "broadcast_to", "cache_key_part", "cast", "cdiv", "ceil", "codegen_name", "cos", "cumprod", "cumsum",
    "dtype", "erf", "exp", "exp2", "expand_dims", "flip", "floor", "gather", "get_block_shapes",
    "get_int_max_value", "get_int_min_value", "histogram", "is_bf16", "is_block", "is_bool", "is_const",
    "is_dtype", "is_floating", "is_fp16", "is_fp32", "is_fp64", "is_fp8", "is_fp8e4b15", "is_fp8e4b8",
    "is_fp8e4nv", "is_fp8e5", "is_fp8e5b16", "is_int", "is_int1", "is_int16", "is_int32", "is_int64", "is_int8",
    "is_int_signed", "is_int_unsigned", "is_ptr", "is_standard_floating", "is_uint16", "is_uint32", "is_uint64",
    "is_uint8", "is_void", "item", "kind", "load", "log", "log2", "logical_and", "logical_or", "mangle", "max",
    "min", "nbytes", "permute", "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "scalar", "scatter",
    "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn", "store", "sum", "to", "to_ir", "trans",
    "view", "with_element_ty", "xor_sum",
})
# Triton 3.9's additions to those classes, left out of TRITON_METHODS on purpose (see above).
TRITON_METHODS_LEFT_OUT = {(3, 9): frozenset({"atomic_load", "atomic_poll", "atomic_store"})}

# The API of a kernel object (triton.runtime's JITFunction, Autotuner and Heuristics), dunders aside:
# hooks, warm-ups, caches, compilation. Host code launches a kernel (kernel[grid](...)) and never calls
# these on one. The union over Triton 3.6 to 3.9 (3.7 added _flatten_ir; private names are refused anyway).
KERNEL_OBJECT_API = frozenset({
    "_bench", "_call_hook", "_do_compile", "_flatten_ir", "_get_src", "_is_protocol", "_pack_args", "_set_src",
    "_unsafe_update_src", "add_pre_run_hook", "cache_key", "check_disk_cache", "create_binder", "do_bench",
    "get_capture_scope", "is_gluon", "parse", "preload", "prune_configs", "repr", "run", "src", "type", "warmup",
})


# --- Triton internals this package touches -------------------------------------------------------------
# Every name of Triton's that is not its documented kernel-author API (triton.jit, autotune, heuristics,
# Config, cdiv, triton.language) and that the evaluator reads, wraps or replaces, with the releases that
# have it: (first, last) minor releases, last None for "still there in the newest supported". Written
# "module:Class.attr" (looked up on the class or module) or "module:Class#attr" (an attribute each
# instance sets in __init__). tests/test_triton_compat.py checks that under the installed Triton each
# name exists exactly when its range says so, and that the evaluator's modules touch no private Triton
# name (one starting with "_") missing here. A name whose range ends, or starts after 3.6, is used
# behind a `TRITON >= (x, y)` gate at its one use.
ALL_SUPPORTED = (OLDEST_SUPPORTED, None)
TRITON_INTERNALS: dict[str, tuple[tuple[int, int], tuple[int, int] | None]] = {
    # interpreter_patch.py: the interpreter's builder, memory, kernel rewriter and argument handling.
    "triton.runtime.interpreter:TensorHandle": ALL_SUPPORTED,
    "triton.runtime.interpreter:InterpreterBuilder.binary_op": ALL_SUPPORTED,
    "triton.runtime.interpreter:InterpreterBuilder.create_fma": ALL_SUPPORTED,
    "triton.runtime.interpreter:InterpreterBuilder.create_dot": ALL_SUPPORTED,
    "triton.runtime.interpreter:InterpreterBuilder.cast_impl": ALL_SUPPORTED,
    "triton.runtime.interpreter:InterpreterBuilder.create_fp_to_fp": ALL_SUPPORTED,
    "triton.runtime.interpreter:InterpreterBuilder.create_extern_elementwise": ALL_SUPPORTED,
    # Float negation: 3.8 lowers -x to create_fneg (a numpy op on the raw bits); before, to 0 - x.
    "triton.runtime.interpreter:InterpreterBuilder.create_fneg": ((3, 8), None),
    # bf16 constants: the interpreter's own get_bf16 from 3.9; the patch supplies one before.
    "triton.runtime.interpreter:InterpreterBuilder.get_bf16": ((3, 9), None),
    "triton.runtime.interpreter:_get_np_dtype": ALL_SUPPORTED,
    "triton.runtime.interpreter:ReduceScanOpInterface.apply": ALL_SUPPORTED,
    "triton.runtime.interpreter:_patch_lang_core": ALL_SUPPORTED,
    "triton.runtime.interpreter:_patch_lang_tensor": ALL_SUPPORTED,
    "triton.runtime.interpreter:_interpreter": ALL_SUPPORTED,
    "triton.runtime.interpreter:_implicit_cvt": ALL_SUPPORTED,
    "triton.runtime.interpreter:interpreter_semantic": ALL_SUPPORTED,
    "triton.runtime.interpreter:ASTTransformer": ALL_SUPPORTED,
    "triton.runtime.interpreter:FunctionRewriter.ast_transformer": ALL_SUPPORTED,
    "triton.runtime.interpreter:FunctionRewriter._find_def": ALL_SUPPORTED,
    "triton.runtime.interpreter:GridExecutor._init_args_hst": ALL_SUPPORTED,
    "triton.runtime.interpreter:InterpretedFunction.run": ALL_SUPPORTED,  # guards.py
    "triton._C.libtriton:ir.ROUNDING_MODE": ALL_SUPPORTED,
    "triton.language.core:is_builtin": ALL_SUPPORTED,
    # The autotuner (interpreter_patch.py runs one config; guards.py checks the solution's hooks).
    "triton.runtime.autotuner:Autotuner.prune_configs": ALL_SUPPORTED,
    "triton.runtime.autotuner:Autotuner._bench": ALL_SUPPORTED,
    "triton.runtime.autotuner:Autotuner#_do_bench": ALL_SUPPORTED,
    "triton.runtime.autotuner:Autotuner#user_defined_pre_hook": ALL_SUPPORTED,
    "triton.runtime.autotuner:Autotuner#user_defined_post_hook": ALL_SUPPORTED,
    "triton.runtime.autotuner:Autotuner#fn": ALL_SUPPORTED,
    "triton.runtime.autotuner:Heuristics.run": ALL_SUPPORTED,
    "triton.runtime.autotuner:Heuristics#values": ALL_SUPPORTED,
    "triton.runtime.jit:JITFunction.run": ALL_SUPPORTED,
    # Warm workers (worker.py's warm-up computes Triton's key; cache_copy.py rewrites the group files that
    # put_group writes, "__grp__<name>" JSON with "child_paths"). Both only save time if they change.
    "triton.runtime.cache:triton_key": ALL_SUPPORTED,
    "triton.runtime.cache:FileCacheManager.put_group": ALL_SUPPORTED,
}


def in_range(version: tuple[int, ...], span: tuple[tuple[int, int], tuple[int, int] | None]) -> bool:
    """Whether a release lies in a (first, last) span of TRITON_INTERNALS."""
    first, last = span
    return first <= tuple(version[:2]) and (last is None or tuple(version[:2]) <= last)
