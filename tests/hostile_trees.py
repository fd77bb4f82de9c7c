"""Hostile trees, as a solution past the policy would leave them where it can write (tests/test_hostile_trees.py).

Standard library only, and self-contained: the escaped solution of those tests carries this file's
source. Every tree is built through directory descriptors (a 10,000-level path is far longer than
``PATH_MAX``), fast enough for CI: about a second for the largest on a disk.
"""

import os


def _open(path, name=None, parent=None):
    return os.open(path if name is None else name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=parent)


def chain(root, depth, name="d"):
    """A chain of ``depth`` directories named ``name`` under ``root``, a file at its bottom."""
    fd = _open(root)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            below = _open(None, name, fd)
            os.close(fd)
            fd = below
        os.close(os.open("bottom", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def many(root, count, directories=True, prefix="e"):
    """``count`` empty directories (or empty files) directly in ``root``."""
    fd = _open(root)
    try:
        for i in range(count):
            if directories:
                os.mkdir(f"{prefix}{i}", dir_fd=fd)
            else:
                os.close(os.open(f"{prefix}{i}", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def locked(root, name="locked"):
    """Nested directories with files, whose permissions keep their owner out (no read, no write,
    search only, read-only), the outermost last."""
    top = os.path.join(root, name)
    path = top
    for level in range(4):
        os.mkdir(path)
        with open(os.path.join(path, "f"), "w") as f:
            f.write("x")
        path = os.path.join(path, f"l{level}")
    modes = [0o000, 0o100, 0o500, 0o300]
    for level in reversed(range(4)):  # innermost first: a locked parent would bar its child's chmod
        os.chmod(os.path.join(top, *[f"l{i}" for i in range(level)]), modes[level])


def links(root, outside):
    """Links to ``outside`` (a directory holding a file ``keep``) and its file, a dangling one and a
    loop: a remover that follows a link removes what is outside."""
    os.symlink(outside, os.path.join(root, "to-outside"))
    os.symlink(os.path.join(outside, "keep"), os.path.join(root, "to-outside-file"))
    os.symlink("/nonexistent/d2k", os.path.join(root, "dangling"))
    os.symlink("loop", os.path.join(root, "loop"))


def plant(root, outside, depths=(1500, 10_000), empties=0):
    """Every kind above in ``root``; ``empties`` empty directories too."""
    for depth in depths:
        chain(root, depth, name=f"c{depth}")
    if empties:
        many(root, empties)
    locked(root)
    links(root, outside)
