"""The optional extras of ``pyproject.toml`` and a check, before any work, that one is installed.

A program that needs an extra (the examples, say) calls :func:`require` first, so that a missing
package stops it at once with the command that installs it, not minutes later at its first import.
The check looks modules up without importing them (``importlib.util.find_spec``).
"""

from __future__ import annotations

import importlib.util
import sys

# extra -> the modules it provides, by import name (tests/test_extras.py checks the extras exist).
EXTRAS: dict[str, tuple[str, ...]] = {
    "agents": ("openai", "wandb", "matplotlib"),
    "ray": ("ray",),
    "trl": ("trl", "transformers", "datasets"),
    "openenv": ("openenv",),
    "verifiers": ("verifiers",),
}


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import; a module left as None in sys.modules
        return False


def missing(extra: str, modules: tuple[str, ...] | list[str] | None = None) -> list[str]:
    """The modules of ``extra`` (all of them, or those of ``modules``) that cannot be imported."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}: expected one of {', '.join(EXTRAS)}")
    wanted = EXTRAS[extra] if modules is None else tuple(modules)
    unknown = [m for m in wanted if m not in EXTRAS[extra]]
    if unknown:
        raise ValueError(f"the {extra} extra provides no {', '.join(unknown)}")
    return [m for m in wanted if not _found(m)]


def require(extra: str, modules: tuple[str, ...] | list[str] | None = None, *, what: str | None = None) -> None:
    """Exit with status 2 and a one-line message on stderr unless ``extra``'s modules (or those of
    ``modules``) can be imported. ``what`` names the program in the message (default: the script)."""
    absent = missing(extra, modules)
    if absent:
        who = what or (sys.argv[0] or "this program")
        print(f"{who} needs the {extra} extra ({', '.join(absent)} not installed): "
              f'pip install "d2k-env[{extra}]", or pip install -e ".[{extra}]" in a checkout', file=sys.stderr)
        raise SystemExit(2)
