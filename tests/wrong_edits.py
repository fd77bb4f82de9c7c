"""Wrong solutions written as edits of their task's reference, and where any wrong fixture lies.

A wrong fixture that is the reference with one fault is kept here as that fault: its task, a
sentence saying why it is wrong, and literal ``(old, new)`` edits made in the task's current
reference. :func:`wrong_solution` writes it out (the sentence as its docstring, in place of the
reference's), so the fixture follows every later change of its reference instead of going stale
as a copy would. Each ``old`` must occur exactly once in the reference below its docstring: an
edit that no longer applies fails, naming the fixture and the text it misses.

Kernels written independently of the reference (GPU MODE style) stay files in
``tests/solutions/wrong``; :func:`wrong_solution` gives their path as it is. Either way a fixture is
named after its task: ``<task id>_<fault>``.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

from d2k_env.task import load_task

FILES = Path(__file__).parent / "solutions" / "wrong"


@dataclass(frozen=True)
class WrongEdit:
    """One fault made in ``task``'s reference by ``edits``; ``fault`` says why the result is wrong."""

    task: str
    fault: str
    edits: tuple[tuple[str, str], ...]


_SCORES = "tl.dot(q, tl.trans(k)) * qk_scale"  # flash_attn, gqa_paged_decode and unified_paged_prefill alike
_BF16_SCORES = (f"s = {_SCORES}", f"s = ({_SCORES}).to(tl.bfloat16).to(tl.float32)")
_UNIFIED_BLOCK_N = ("BLOCK_N = 64", "BLOCK_N = 16")  # key tiles of one page: smoke contexts span several

EDITS: dict[str, WrongEdit] = {
    "causal_conv1d_varlen_ignores_has_initial_state": WrongEdit(
        "causal_conv1d_varlen",
        "the cached state is read for every sequence, has_initial_state ignored, so a new sequence starts "
        "from a stale history (the slot's previous occupant) instead of zeros.",
        (("init = tl.load(init_ptr + seq) != 0", "init = (tl.load(init_ptr + seq) != 0) | True"),)),
    "flash_attn_causal_fwd_bf16_scores": WrongEdit(
        "flash_attn_causal_fwd",
        "the reference with its scores rounded to bf16 before the softmax (what a softmax of bf16 scores "
        "computes): every probability is off by 2^-8 times its score, not 2^-8.",
        (_BF16_SCORES,)),
    "flash_attn_causal_fwd_dropped_tile": WrongEdit(
        "flash_attn_causal_fwd",
        "the reference with its unmasked loop stopping one key tile short of the diagonal: the keys just "
        "before each query block are never seen (a dropped causal tile).",
        (("rows, 0,\n                                  first_row, N,",
          "rows, 0,\n                                  first_row - BLOCK_N, N,"),)),
    "flash_attn_causal_fwd_no_rescale": WrongEdit(
        "flash_attn_causal_fwd",
        "the reference without the online-softmax rescale of its running output when the maximum grows "
        "(the running sum is still rescaled): tiles seen before a larger score weigh too much.",
        (("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)", "acc = acc + tl.dot(p.to(v.dtype), v)"),)),
    "fused_linear_cross_entropy_full_logits": WrongEdit(
        "fused_linear_cross_entropy",
        "right values, unbounded memory. The reference's chunked kernels with one chunk of every token: the "
        "full [BT, V] bf16 logits are allocated, what the task's allocation limit exists to refuse "
        "(2 * BT * V bytes against a workspace of 4 * max(BT * H, V)).",
        (("    # As many bf16 logit rows as 4 * max(BT*H, V) bytes hold, in whole GEMM row tiles where that is one.\n"
          "    rows = 2 * max(BT * H, V) // V\n"
          "    chunk = min(BT, rows // tile[\"BM\"] * tile[\"BM\"] if rows >= tile[\"BM\"] else rows)\n",
          "    chunk = BT  # every token's logits at once: 2 * BT * V bytes\n"),)),
    "gdn_chunk_fwd_no_state_decay": WrongEdit(
        "gdn_chunk_fwd",
        "the state is carried to the next chunk without its decay over the chunk.",
        (("S = S * tl.exp(g_last) + tl.dot(", "S = S + tl.dot("),)),
    "gdn_chunk_fwd_strict_causal": WrongEdit(
        "gdn_chunk_fwd",
        "the intra-chunk mask is strictly causal, so a token never sees its own update (the diagonal of "
        "the score block is dropped).",
        (("causal = offs_c[:, None] >= offs_c[None, :]", "causal = offs_c[:, None] > offs_c[None, :]"),)),
    "gdn_recurrent_decode_decay_after_update": WrongEdit(
        "gdn_recurrent_decode",
        "decays the state after the delta update instead of before it (the prediction then reads an "
        "undecayed state, and the new token's write is decayed too).",
        (("        S = S * tl.exp(g)\n", ""),
         ("S = S + k[:, None] * delta[None, :]", "S = (S + k[:, None] * delta[None, :]) * tl.exp(g)"))),
    "gqa_paged_decode_bf16_scores": WrongEdit(
        "gqa_paged_decode",
        "the reference with its scores rounded to bf16 before the softmax (what a softmax of bf16 scores "
        "computes): every probability is off by 2^-8 times its score, not 2^-8.",
        (_BF16_SCORES,)),
    "gqa_paged_decode_no_rescale": WrongEdit(
        "gqa_paged_decode",
        "the reference without the online-softmax rescale of its running output when the maximum grows "
        "(the denominator is still rescaled): tiles seen before a larger score weigh too much.",
        (("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)", "acc = acc + tl.dot(p.to(v.dtype), v)"),)),
    "mla_decode_absorbed_bf16_scores": WrongEdit(
        "mla_decode_absorbed",
        "the reference with its scores rounded to bf16 before the softmax (what a softmax of bf16 scores "
        "computes): every probability is off by 2^-8 times its score, not 2^-8.",
        (("* qk_scale  # log2 units\n", "* qk_scale  # log2 units\n        s = s.to(tl.bfloat16).to(tl.float32)\n"),)),
    "mla_decode_absorbed_no_rescale": WrongEdit(
        "mla_decode_absorbed",
        "the reference without the online-softmax rescale of its running output when the maximum grows "
        "(the running sum is still rescaled): tiles seen before a larger score weigh too much.",
        (("acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c)", "acc = acc + tl.dot(p.to(c.dtype), c)"),)),
    "mla_decode_absorbed_no_rope": WrongEdit(
        "mla_decode_absorbed",
        "the reference scoring with the latent columns only: the 64 rotary columns of the key (and the "
        "query's rotary part) never enter the scores.",
        (("s = (tl.dot(q_lat, tl.trans(c)) + tl.dot(q_rot, tl.trans(k_rot))) * qk_scale",
          "s = tl.dot(q_lat, tl.trans(c)) * qk_scale"),)),
    "rope_qk_inplace_interleaved_pairs": WrongEdit(
        "rope_qk_inplace",
        "GPT-J style pairing (element 2i with 2i+1) instead of neox halves (i with i + d/2).",
        (("offs_d[None, :] * stride_d\n        hi = lo + half * stride_d",
          "(2 * offs_d[None, :]) * stride_d\n        hi = lo + stride_d"),)),
    "rope_qk_inplace_k_unwritten": WrongEdit(
        "rope_qk_inplace",
        "rotates the query heads only; k is left as it came (half the launch's stores skipped: an "
        "in-place result the checker must see unwritten).",
        (("    _rotate_heads(k_ptr, stride_kt, stride_kh, stride_kd, t, Hkv, half, cos, sin, BLOCK_HK, BLOCK_HALF)\n",
          ""),)),
    "rope_qk_inplace_sin_sign_flipped": WrongEdit(
        "rope_qk_inplace",
        "rotates by -theta (x1*c + x2*s, x2*c - x1*s): the inverse rotation, as a kernel written for the "
        "backward pass applies it.",
        (("(x1 * cos - x2 * sin)", "(x1 * cos + x2 * sin)"), ("(x2 * cos + x1 * sin)", "(x2 * cos - x1 * sin)"))),
    "spec_rejection_sample_resample_from_target": WrongEdit(
        "spec_rejection_sample",
        "a rejected position is resampled from the target distribution (the race over p_target / q) "
        "instead of the residual max(p_target - p_draft, 0): the output is then biased towards the draft.",
        (("tl.maximum(p_t - p_d, 0.0) / q", "p_t / q"),)),
    "topk_topp_mask_strict_kth": WrongEdit(
        "topk_topp_mask",
        "top-k keeps the logits strictly above the k-th largest, dropping the k-th itself and every logit "
        "tied with it (a strict comparison where the cut is inclusive).",
        (("neg_inf_key, shift, False, BLOCK, NUM_PIVOTS)", "neg_inf_key, shift, False, BLOCK, NUM_PIVOTS) + 1"),)),
    "unified_paged_prefill_bf16_softmax": WrongEdit(
        "unified_paged_prefill",
        "the scores are rounded to bf16 before the softmax (a bf16 softmax).",
        (_BF16_SCORES,)),
    "unified_paged_prefill_dropped_causal_tile": WrongEdit(
        "unified_paged_prefill",
        "the key loop stops one tile short of the block's causal frontier, dropping the diagonal tile "
        "(key tiles of one page, so the smoke contexts span several tiles).",
        (_UNIFIED_BLOCK_N, ("range(0, kv_end, BLOCK_N)", "range(0, tl.maximum(kv_end - BLOCK_N, 1), BLOCK_N)"))),
    "unified_paged_prefill_skipped_rescale": WrongEdit(
        "unified_paged_prefill",
        "the online softmax never rescales the accumulator when the running max grows (key tiles of one "
        "page, so the smoke contexts span several tiles).",
        (_UNIFIED_BLOCK_N,
         ("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)", "acc = acc + tl.dot(p.to(v.dtype), v)"))),
    "wy_tril_inverse_gate_swapped": WrongEdit(
        "wy_tril_inverse",
        "the gate enters as exp(g_j - g_i) instead of exp(g_i - g_j), so the decay between two tokens of a "
        "chunk grows instead of shrinking (an index swap in the gate).",
        (("g_i[:, None] - g_j[None, :]", "g_j[None, :] - g_i[:, None]"),)),
}


def names() -> list[str]:
    """Every wrong fixture, sorted: the files and the edits."""
    return sorted([p.stem for p in FILES.glob("*.py")] + list(EDITS))


def edited_source(name: str, reference: str) -> str:
    """``reference`` with fixture ``name``'s edits made below its module docstring, and its fault as
    the docstring. Raises ValueError, naming the fixture and the text, for an ``old`` that does not
    occur exactly once."""
    wrong = EDITS[name]
    first = ast.parse(reference).body[0]
    if not (isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str)):
        raise ValueError(f"wrong fixture {name!r}: the {wrong.task} reference has no module docstring to replace")
    lines = reference.splitlines(keepends=True)
    body = "".join(lines[first.end_lineno:])
    for old, new in wrong.edits:
        count = body.count(old)
        if count != 1:
            raise ValueError(f"wrong fixture {name!r}: edit text {old!r} occurs {count} times in the {wrong.task} "
                             "reference, not once (the reference changed: update tests/wrong_edits.py)")
        body = body.replace(old, new)
    doc = textwrap.fill(f"Wrong: {wrong.fault}", width=100, initial_indent='"""', break_long_words=False)
    return f'{doc}"""\n{body}'


def wrong_solution(name: str, directory: Path) -> Path:
    """The path of wrong fixture ``name``: its file in tests/solutions/wrong, or its edits of the task's
    current reference written to ``directory``/``name``.py."""
    if name not in EDITS:
        path = FILES / f"{name}.py"
        if not path.is_file():
            raise KeyError(f"no wrong fixture {name!r}: neither tests/solutions/wrong/{name}.py nor an entry of "
                           "tests/wrong_edits.EDITS")
        return path
    reference = load_task(EDITS[name].task).reference_path.read_text()
    path = Path(directory) / f"{name}.py"
    path.write_text(edited_source(name, reference))
    return path
