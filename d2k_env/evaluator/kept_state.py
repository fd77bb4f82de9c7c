"""State a solution keeps between calls, found at run time: tensors, and state that changes with calls.

A replay needs memory: an output cached by pointer, shape or content, a counter, a tensor from the
last call. The static policy refuses the syntax of most such state, but honest code holds plain
state too (a dict of block sizes keyed by shape, an ``lru_cache`` on a config picker), and no
syntax rule can tell the two apart. So after ``forward`` returns, :func:`kept_tensors` walks
everything the solution's module can still reach (its globals, the containers in them, its
functions' defaults, closures and attributes, ``lru_cache`` caches, ``functools.partial``
arguments, instances of its own classes, suspended generators) and names every path that ends
in a tensor or a storage. Objects of other modules (torch, Triton, the harness) are not entered:
the solution cannot store into them (the policy refuses attribute assignment).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import types
from collections.abc import Iterator

import torch

MAX_OBJECTS = 100_000  # a walk this long is itself suspicious; it stops and reports what it found


def kept_tensors(module: types.ModuleType) -> list[str]:
    """Paths (``name[key].attr``) from the module's globals to tensors or storages, at most 5."""
    found: list[str] = []
    seen: set[int] = set()
    stack: list[tuple[object, str]] = [(v, k) for k, v in vars(module).items() if not k.startswith("__")]
    own = module.__name__
    while stack and len(seen) < MAX_OBJECTS and len(found) < 5:
        obj, path = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
            found.append(path)
            continue
        stack.extend(_inside(obj, path, own))
    return found


def _inside(obj: object, path: str, own: str) -> Iterator[tuple[object, str]]:
    """What ``obj`` holds that a later call could read, each with its path."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key, f"{path} key {key!r:.40}"
            yield value, f"{path}[{key!r:.40}]"
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for i, item in enumerate(obj):
            yield item, f"{path}[{i}]"
        if type(obj).__module__ == own and hasattr(obj, "__dict__"):  # a NamedTuple of its own
            yield vars(obj), path
    elif isinstance(obj, types.FunctionType):
        if obj.__module__ == own:
            yield obj.__defaults__ or (), f"{path}.__defaults__"
            yield obj.__kwdefaults__ or {}, f"{path}.__kwdefaults__"
            for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
                try:
                    yield cell.cell_contents, f"{path} closure {name}"
                except ValueError:  # an empty cell
                    pass
            yield vars(obj), f"{path}.__dict__"
    elif isinstance(obj, functools.partial):
        yield obj.func, f"{path}.func"
        yield obj.args, f"{path}.args"
        yield obj.keywords, f"{path}.keywords"
    elif isinstance(obj, functools._lru_cache_wrapper):
        # Its cache is a C-level dict reachable only through the garbage collector's view.
        for i, held in enumerate(gc.get_referents(obj)):
            yield held, f"{path} cache {i}"
    elif isinstance(obj, types.MethodType):
        yield obj.__self__, f"{path}.__self__"
        yield obj.__func__, f"{path}.__func__"
    elif isinstance(obj, types.GeneratorType) and obj.gi_frame is not None:
        yield dict(obj.gi_frame.f_locals), f"{path} (suspended)"
    elif isinstance(obj, type) and obj.__module__ == own:
        yield {k: v for k, v in vars(obj).items() if not k.startswith("__")}, f"{path}.__dict__"
    elif type(obj).__module__ == own:
        if hasattr(obj, "__dict__"):
            yield vars(obj), path
        for slot in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, slot):
                yield getattr(obj, slot), f"{path}.{slot}"


def state_fingerprint(module: types.ModuleType) -> str:
    """A digest of the plain values the module can reach (the same walk as :func:`kept_tensors`).

    A cache keyed by shape or device grows on the first call with a new shape and never changes
    after; a counter or a "which call is this" flag changes on every call. The worker compares the
    digest after a workload's first call with the one after its last: any change is state that
    depends on the calls, not on the inputs' shapes. Numbers, strings, dtypes and devices enter by
    value, containers by their items (sets and dict keys in sorted order), ``lru_cache`` caches by
    their keys and results, objects of other modules by their type alone.
    """
    digest = hashlib.sha256()
    seen: set[int] = set()
    stack: list[tuple[object, str]] = [(v, k) for k, v in sorted(vars(module).items()) if not k.startswith("__")]
    own = module.__name__
    while stack and len(seen) < MAX_OBJECTS:
        obj, path = stack.pop()
        if isinstance(obj, _PLAIN):
            digest.update(f"{path}={type(obj).__name__}:{obj!r}\n".encode())
            continue
        if id(obj) in seen:
            digest.update(f"{path}=seen\n".encode())
            continue
        seen.add(id(obj))
        digest.update(f"{path}:{type(obj).__qualname__}\n".encode())
        if isinstance(obj, (set, frozenset)):
            stack.extend((item, f"{path}{{{i}}}") for i, item in enumerate(sorted(obj, key=repr)))
        elif isinstance(obj, dict):
            for i, key in enumerate(sorted(obj, key=repr)):
                stack.append((key, f"{path} key {i}"))
                stack.append((obj[key], f"{path}[{i}]"))
        else:
            stack.extend(_inside(obj, path, own))
    return digest.hexdigest()


_PLAIN = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device)
