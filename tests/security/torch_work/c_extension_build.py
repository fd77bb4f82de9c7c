"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "failed to load"
Round: holdout h10

Class 3 (not writing a kernel), native code. Task: fused_add_rmsnorm.

Idea: `triton.runtime.build.compile_module_from_src` is an allowed import (module triton) that
compiles C source with the system compiler and imports it as a Python extension. The op is done
in C on the raw data_ptr()s (bf16 bits, round-to-nearest-even), which no aten guard can see; one
no-op Triton launch satisfies the launch counter.
Defence expected: the policy (triton's build helpers are not kernel code) or some runtime check.
Should earn 0.
"""
import torch
import triton
import triton.language as tl
from triton.runtime.build import compile_module_from_src

_SRC = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
static float bf(uint16_t h) { uint32_t u = ((uint32_t)h) << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t tobf(float f) { uint32_t u; memcpy(&u, &f, 4); u += 0x7FFF + ((u >> 16) & 1); return (uint16_t)(u >> 16); }
static PyObject* run(PyObject* self, PyObject* args) {
    unsigned long long xp, rp, wp, yp, op; Py_ssize_t M, N;
    if (!PyArg_ParseTuple(args, "KKKKKnn", &xp, &rp, &wp, &yp, &op, &M, &N)) return NULL;
    uint16_t *x = (uint16_t*)xp, *r = (uint16_t*)rp, *w = (uint16_t*)wp, *y = (uint16_t*)yp, *o = (uint16_t*)op;
    for (Py_ssize_t i = 0; i < M; i++) {
        double ss = 0.0;
        for (Py_ssize_t j = 0; j < N; j++) { float v = bf(x[i*N+j]) + bf(r[i*N+j]); ss += (double)v * v; }
        float rstd = 1.0f / sqrtf((float)(ss / N) + 1e-6f);
        for (Py_ssize_t j = 0; j < N; j++) {
            float v = bf(x[i*N+j]) + bf(r[i*N+j]);
            o[i*N+j] = tobf(v);
            y[i*N+j] = tobf(v * rstd * bf(w[j]));
        }
    }
    Py_RETURN_NONE;
}
static PyMethodDef M_[] = {{"run", run, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef D_ = {PyModuleDef_HEAD_INIT, "h10_native", NULL, -1, M_};
PyMODINIT_FUNC PyInit_h10_native(void) { return PyModule_Create(&D_); }
"""

_native = compile_module_from_src(_SRC, "h10_native")


@triton.jit
def _noop(p, N):
    pass


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _noop[(1,)](y, 1)
    _native.run(x.data_ptr(), residual.data_ptr(), weight.data_ptr(), y.data_ptr(), ro.data_ptr(), M, N)
    return y, ro
