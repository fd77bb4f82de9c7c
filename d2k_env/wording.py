"""Counted nouns for messages people read: ``plural(1, "seed")`` is ``1 seed``, not ``1 seeds``."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, the noun in its plural form (``many``, else noun + "s") unless count is 1."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"
