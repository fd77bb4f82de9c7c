"""Guard bands around the inputs the harness hands a solution: out-of-bounds writes are seen.

Each input tensor is copied into the middle of a larger buffer whose first and last
``BAND_BYTES`` hold a random byte pattern drawn from the evaluation's inputs key. After ``forward``
the harness compares both bands with the pattern: a kernel that stored past either end of an
input (a missing mask, a wrong row count) changed them, and the evaluation fails with
``[out-of-bounds]`` naming the input and the side. Random bytes rather than a constant: a stray
store of zeros, NaN or a copy of the input itself changes them just the same, and a solution
cannot know the pattern without reading the band (which changes nothing).

This works on both backends. On the GPU it is the only bounds check outside ``submit``'s
memory-checked held-out shapes; on the CPU interpreter every load and store must already fall
inside a launch argument's tensor, and :func:`usable_span` tells it where a guarded input really
ends, so a band is reached only through a view that the solution itself stretched into it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch

# Per side. A multiple of 512 keeps each input as aligned as the allocator left the buffer (Triton
# specialises on 16-byte alignment), and covers the overshoot of an unmasked tile of 1024 fp32.
BAND_BYTES = 4096

_usable: dict[int, tuple[int, int]] = {}  # buffer address -> [start, end) of the guarded input inside it


def usable_span(storage_ptr: int) -> tuple[int, int] | None:
    """[start, end) of the guarded input inside the buffer at ``storage_ptr``; None if it is none of ours."""
    return _usable.get(storage_ptr)


@dataclass
class GuardBand:
    name: str  # the input's name, for the verdict
    buffer: torch.Tensor  # uint8: band, the input's bytes, band
    pattern: torch.Tensor  # uint8, 2 * BAND_BYTES: what the bands must still hold

    def problem(self) -> str | None:
        """``[out-of-bounds] ...`` naming the input and the side whose band changed, else None."""
        sides = []
        for side, band, expected in (("before", self.buffer[:BAND_BYTES], self.pattern[:BAND_BYTES]),
                                     ("after", self.buffer[-BAND_BYTES:], self.pattern[BAND_BYTES:])):
            changed = int((band != expected).sum())
            if changed:
                sides.append(f"{changed} of the {BAND_BYTES} guard-band bytes {side} it")
        if not sides:
            return None
        return (f"[out-of-bounds] a kernel wrote outside input {self.name!r}: {' and '.join(sides)} changed "
                f"(every store must stay inside the tensors it was given)")


def guard(t: torch.Tensor, name: str, gen: torch.Generator) -> tuple[torch.Tensor, GuardBand]:
    """A copy of ``t`` (same dtype, shape, strides, values) inside a buffer with guard bands, and the band."""
    item = t.element_size()
    # Elements the view spans from its first: what a kernel may touch through its strides.
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    buffer = torch.empty(2 * BAND_BYTES + span * item, dtype=torch.uint8, device=t.device)
    pattern = torch.randint(0, 256, (2 * BAND_BYTES,), dtype=torch.uint8, generator=gen, device=t.device)
    buffer[:BAND_BYTES] = pattern[:BAND_BYTES]
    buffer[buffer.numel() - BAND_BYTES:] = pattern[BAND_BYTES:]
    inner = buffer[BAND_BYTES:buffer.numel() - BAND_BYTES].view(t.dtype)
    copy = inner.as_strided(t.shape, t.stride())
    copy.copy_(t)
    start = buffer.data_ptr() + BAND_BYTES
    _usable[buffer.data_ptr()] = (start, start + span * item)
    # The views keep the buffer alive (their _base); once it is freed its address may serve anything.
    weakref.finalize(buffer, _usable.pop, buffer.data_ptr(), None)
    return copy, GuardBand(name, buffer, pattern)


def guard_inputs(inputs: tuple, names: list[str], gen: torch.Generator) -> tuple[tuple, list[GuardBand]]:
    """Every tensor of ``inputs`` guarded (other values unchanged), and their bands."""
    guarded, bands = [], []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.layout == torch.strided and all(s >= 0 for s in x.stride()):
            x, band = guard(x, names[i] if i < len(names) else f"#{i}", gen)
            bands.append(band)
        guarded.append(x)
    return tuple(guarded), bands


def band_problem(bands: list[GuardBand]) -> str | None:
    """The first changed band's verdict, or None when every band is intact."""
    for band in bands:
        if problem := band.problem():
            return problem
    return None
