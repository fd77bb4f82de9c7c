"""Make Triton's CPU interpreter (``TRITON_INTERPRET=1``) treat bf16 and fp8 like a GPU does.

Triton's interpreter (checked on 3.6) keeps bf16 values as their raw ``uint16`` bits and fp8 values
as raw ``uint8`` bits in numpy arrays, and gets them wrong in four ways:

1. ``_convert_float`` (used for fp32 <-> bf16 and every cast to or from fp8) rounds wrongly: a
   round-up that overflows the mantissa is not carried into the exponent (fp32 126.88 ->
   float8_e4m3fn gives 64 instead of 128), its "RTNE" only looks at the cut-off bit (no ties to
   even), and out-of-range values come out as NaN, inf or garbage instead of saturating.
2. ``InterpreterBuilder.cast_impl`` truncates fp32 -> bf16, and does every other cast involving
   bf16 (int <-> bf16, bf16 -> int, ...) with numpy ``astype`` on the raw bits.
3. Arithmetic (+, -, *, fma), comparisons, ``tl.sum`` and other reductions and scans, and
   ``tl.dot`` run numpy on the raw bits, which gives garbage. (The frontend already promotes bf16
   to fp32 for division, min/max, clamp, argmax and cumsum, and math functions such as ``tl.exp``
   reject bf16, on the GPU too.)
4. bf16 constants (``x * 1.5``, ``tl.full(..., tl.bfloat16)``) fail for want of ``get_bf16``, and
   any kernel touching fp8e4b8/fp8e5b16 fails because the interpreter's ``dtype.to_ir`` lacks them.
5. With NumPy >= 2.4, a runtime integer used as a Python index (``tl.range(0, N, BLOCK)``) fails,
   since scalars are 1-element arrays and NumPy no longer converts those with ``int()``.

``apply()`` wraps the few interpreter functions through which these values flow: casts go through
torch's own dtype conversions (round to nearest even), and the other operations decode bf16/fp8
operands to fp32, run the stock fp32 code, and round the result back to the storage dtype. That is
what the GPU does for bf16 elementwise ops: fp32 math, then a round (fp32 is wide enough that this
equals a correctly rounded bf16 op for + - *). fp8e4b15 has no torch dtype and is left alone; it
is deprecated in Triton anyway.

Two more fixes are for safety, not numerics. The interpreter re-reads a kernel's source and starts
it at the *last* line that begins with ``def ``, so a ``def`` line inside the kernel's docstring
became the code that ran (code the static policy only saw as a string): ``apply()`` makes it find
the real ``def`` through the syntax tree. And under the interpreter a pointer is a host address,
so pointer arithmetic reached the whole process (the harness's request, its pristine copies of the
inputs): every load, store and atomic must now fall inside the storage of a tensor passed to the
launch, as on a GPU a stray address faults.

The patch changes the interpreter for the whole process, so only call ``apply()`` in processes
that run kernels with ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import triton.language as tl
from triton._C.libtriton import ir
from triton.runtime import interpreter

TensorHandle = interpreter.TensorHandle
Builder = interpreter.InterpreterBuilder

# Triton dtype name -> torch dtype with the same bit layout.
_TORCH_DTYPES = {
    "bf16": torch.bfloat16,
    "fp8e4nv": torch.float8_e4m3fn,
    "fp8e5": torch.float8_e5m2,
    # AMD's fnuz fp8 types; older torch builds lack them.
    "fp8e4b8": getattr(torch, "float8_e4m3fnuz", None),
    "fp8e5b16": getattr(torch, "float8_e5m2fnuz", None),
}
_TORCH_DTYPES = {name: dtype for name, dtype in _TORCH_DTYPES.items() if dtype is not None}
_STORAGE = {1: torch.uint8, 2: torch.uint16}  # torch views matching the interpreter's numpy storage


def _torch_dtype(ty) -> torch.dtype | None:
    """The torch dtype of a bf16/fp8 Triton type; None for every other type."""
    return _TORCH_DTYPES.get(ty.scalar.name)


def _decode(bits: np.ndarray, ty) -> np.ndarray:
    """bf16/fp8 storage bits -> their exact fp32 values."""
    # np.array copies: the bits may be a read-only or broadcast view, which torch cannot wrap.
    return torch.from_numpy(np.array(bits)).view(_torch_dtype(ty)).float().numpy()


def _encode(values: np.ndarray, ty) -> np.ndarray:
    """Numbers (float or int) -> bf16/fp8 storage bits, rounded to nearest even."""
    dtype = _torch_dtype(ty)
    x = torch.from_numpy(np.array(values))
    if dtype.itemsize == 1:
        # Triton on NVIDIA (Hopper) lowers fp32/fp16/bf16 -> fp8e4nv and fp8e5 to
        # `cvt.rn.satfinite`: nearest even, every value (inf included) beyond the largest finite
        # fp8 becomes +-448 (e4m3) or +-57344 (e5m2), NaN stays NaN. (sm_89 first truncates fp32
        # to fp16, which can change the last bit.) AMD's fp8 conversions saturate too. torch
        # gives inf (e5m2) or NaN (fnuz) instead, so clamp first; clamping keeps NaN.
        fmax = torch.finfo(dtype).max
        x = x.clamp(-fmax, fmax)
    return x.to(dtype).view(_STORAGE[dtype.itemsize]).numpy()


def _widen(handle):
    """Non-handle arguments pass through; bf16/fp8 handles become fp32 handles."""
    if isinstance(handle, TensorHandle) and _torch_dtype(handle.dtype):
        return TensorHandle(_decode(handle.data, handle.dtype), tl.float32)
    return handle


def _in_fp32(op):
    """Run a builder op on fp32 copies of its bf16/fp8 operands and round the result back.

    These stock ops give their result the type of their last operand (binary_op: lhs and rhs
    agree, create_fma: the addend, create_dot: the accumulator), so that operand's type is the
    result type. Boolean results (comparisons) and fp32 accumulators are returned as they are.
    """

    @functools.wraps(op)
    def wrapper(self, *args):
        handles = [a for a in args if isinstance(a, TensorHandle)]
        if not any(_torch_dtype(h.dtype) for h in handles):
            return op(self, *args)
        out = op(self, *map(_widen, args))
        out_ty = handles[-1].dtype.scalar
        if _torch_dtype(out_ty) and out.data.dtype.kind == "f":
            return TensorHandle(_encode(out.data, out_ty), out_ty)
        return out

    return wrapper


def _cast(src, dst_type):
    """A cast with bf16/fp8 on either side, done with torch's conversions."""
    dst_ty = dst_type.scalar
    values = _widen(src).data
    if _torch_dtype(dst_ty):
        return TensorHandle(_encode(values, dst_ty), dst_ty)
    # bf16/fp8 -> a standard type: the exact fp32 value converts like any stock fp32 cast.
    return TensorHandle(values.astype(interpreter._get_np_dtype(dst_ty)), dst_ty)


def _patch_casts(stock_cast_impl, stock_fp_to_fp):
    def cast_impl(self, src, dst_type):
        if _torch_dtype(src.dtype) or _torch_dtype(dst_type):
            return _cast(src, dst_type)
        return stock_cast_impl(self, src, dst_type)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        # Reached for casts to/from fp8 and for fp_downcast_rounding="rtz". torch only rounds to
        # nearest even, so RTZ (and fp8e4b15) keep the stock bit-level conversion.
        lowp = _torch_dtype(src.dtype) or _torch_dtype(dst_type)
        if lowp and rounding_mode != ir.ROUNDING_MODE.RTZ:
            return _cast(src, dst_type)
        return stock_fp_to_fp(self, src, dst_type, rounding_mode)

    return cast_impl, create_fp_to_fp


def _retyped(t, data, ty):
    """A tl.tensor like `t` holding `data` of scalar type `ty`."""
    shape_ty = t.type.with_element_ty(ty) if t.type.is_block() else ty
    return tl.core.tensor(TensorHandle(data, ty), shape_ty)


def _patch_reduce_scan(stock_apply):
    # Reductions and scans (np.sum / np.nanmax / np.cumsum on the raw bits, or a combine_fn on
    # them) run on fp32 copies, and each result is rounded back once. The GPU rounds every bf16
    # combine step, in a tree order, so long bf16 sums on the GPU can differ in the last bits.
    def apply(self, input):
        if not isinstance(input, tuple):
            return stock_apply(self, input)  # re-enters apply with a 1-tuple
        lowp = [_torch_dtype(t.dtype) is not None for t in input]
        out = stock_apply(self, tuple(_retyped(t, _decode(t.handle.data, t.dtype), tl.float32) if low else t
                                      for t, low in zip(input, lowp)))
        return tuple(_retyped(o, _encode(o.handle.data, t.dtype), t.dtype) if low and o.dtype == tl.float32 else o
                     for o, t, low in zip(out, input, lowp))

    return apply


def _patch_to_ir(stock_patch_lang_core):
    # Each launch installs an interpreter dtype.to_ir that knows neither fnuz fp8 type, so any
    # kernel touching one fails with "fail to convert fp8e4b8 to ir type". Teach it both.
    def patch_lang_core(lang, scope):
        stock_patch_lang_core(lang, scope)
        to_ir = lang.dtype.to_ir

        def fnuz_to_ir(self, builder):
            if self.name in ("fp8e4b8", "fp8e5b16"):
                return getattr(builder, f"get_{self.name}_ty")()
            return to_ir(self, builder)

        scope.set_attr(lang.dtype, "to_ir", fnuz_to_ir)

    return patch_lang_core


def _patch_index(stock_patch_lang_tensor):
    # Scalars are 1-element arrays in the interpreter, and NumPy >= 2.4 refuses int() on those, so
    # any runtime integer used as a Python index (`tl.range(0, N, BLOCK)`) fails. Read the element.
    def patch_lang_tensor(tensor, scope):
        stock_patch_lang_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    return patch_lang_tensor


def _find_real_def(rewriter, lines: list[str]) -> int:
    """Line (1-based, within ``lines``) of the function's own ``def``, read off the syntax tree."""
    import ast
    import textwrap

    tree = ast.parse(textwrap.dedent("".join(lines)))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == rewriter.fn.__name__:
            return node.lineno
    raise SyntaxError(f"no definition of {rewriter.fn.__name__} in its own source")


class _BoundsCheckedMemory:
    """The interpreter's memory primitives, refusing addresses outside the launch's tensors."""

    def __init__(self, stock):
        self.stock = stock
        self.ranges: list[tuple[int, int]] = []  # [start, end) of each argument tensor's storage

    def __getattr__(self, name):
        return getattr(self.stock, name)

    def _check(self, ptrs: np.ndarray, mask, itemsize: int) -> None:
        addr = ptrs.astype(np.uint64)
        if mask is not None:
            addr = addr[np.broadcast_to(np.asarray(mask, dtype=bool), addr.shape)]
        addr = addr.ravel()
        inside = np.zeros(addr.shape, dtype=bool)
        for start, end in self.ranges:
            inside |= (addr >= start) & (addr + itemsize <= end)
        if not inside.all():
            raise IndexError(f"[out-of-bounds] a kernel accessed address {int(addr[~inside][0]):#x}, outside "
                             "every tensor passed to the launch (on a GPU: an illegal memory access)")

    def load(self, ptrs, mask, other, dtype):
        self._check(ptrs, mask, np.dtype(dtype).itemsize)
        return self.stock.load(ptrs, mask, other, dtype)

    def store(self, ptrs, value, mask):
        self._check(ptrs, mask, value.dtype.itemsize)
        return self.stock.store(ptrs, value, mask)

    def atomic_rmw(self, op, ptrs, value, mask, sem):
        self._check(ptrs, mask, value.dtype.itemsize)
        return self.stock.atomic_rmw(op, ptrs, value, mask, sem)

    def atomic_cas(self, ptrs, cmp, value, sem):
        self._check(ptrs, None, value.dtype.itemsize)
        return self.stock.atomic_cas(ptrs, cmp, value, sem)


def _storage_ranges(args) -> list[tuple[int, int]]:
    ranges = []
    for arg in args:
        if isinstance(arg, (tuple, list)):
            ranges += _storage_ranges(arg)
        elif isinstance(getattr(arg, "base", None), torch.Tensor):  # a tensor descriptor
            ranges += _storage_ranges([arg.base])
        elif isinstance(arg, torch.Tensor):
            storage = arg.untyped_storage()
            ranges.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    return ranges


def _patch_host_args(stock_init_args_hst, memory: _BoundsCheckedMemory):
    @functools.wraps(stock_init_args_hst)
    def init_args_hst(executor, args_dev, kwargs):
        args_hst, kwargs_hst = stock_init_args_hst(executor, args_dev, kwargs)
        memory.ranges = _storage_ranges([*args_hst, *kwargs_hst.values()])
        return args_hst, kwargs_hst

    return init_args_hst


def apply() -> None:
    """Patch triton.runtime.interpreter in place (idempotent)."""
    if getattr(Builder, "_d2k_bf16_fp8_patched", False):
        return
    for name in ("binary_op", "create_fma", "create_dot"):
        setattr(Builder, name, _in_fp32(getattr(Builder, name)))
    Builder.cast_impl, Builder.create_fp_to_fp = _patch_casts(Builder.cast_impl, Builder.create_fp_to_fp)
    # bf16 constants (`x * 1.5` with x bf16, tl.full(..., tl.bfloat16)) are built with get_bf16,
    # which the GPU builder has and the interpreter lacks. Like the GPU, go through fp32.
    Builder.get_bf16 = lambda self, value: TensorHandle(_encode(np.float32([value]), tl.bfloat16), tl.bfloat16)
    interpreter.ReduceScanOpInterface.apply = _patch_reduce_scan(interpreter.ReduceScanOpInterface.apply)
    interpreter._patch_lang_core = _patch_to_ir(interpreter._patch_lang_core)
    interpreter._patch_lang_tensor = _patch_index(interpreter._patch_lang_tensor)
    interpreter.FunctionRewriter._find_def = _find_real_def
    memory = _BoundsCheckedMemory(interpreter._interpreter)
    interpreter._interpreter = memory
    interpreter.GridExecutor._init_args_hst = _patch_host_args(interpreter.GridExecutor._init_args_hst, memory)
    Builder._d2k_bf16_fp8_patched = True
