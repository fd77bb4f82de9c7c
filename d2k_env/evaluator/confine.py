"""The operating-system layers around an evaluation worker, applied in the worker before it execs.

The static policy decides what a solution *may* do; these layers decide what it *can* do, so that
code which gets past the policy gains nothing outside its own scratch directory. Each layer is
detected, applied if the machine offers it, and reported by name (``Confinement.apply`` returns
what took effect; the evaluator puts it in every result), so a run always says what protected it:

- ``landlock``: a Landlock domain (Linux 5.13+). Reads only beneath the system and Python trees,
  the package, the task's snapshot and the evaluation's own directories (never the project's
  references, the env's workspaces or other evaluations); writes only beneath the scratch,
  outputs and Triton-cache directories and to a few device files; no TCP bind or connect
  (ABI 4+); no signals to, or abstract sockets of, processes outside the domain (ABI 6+), so the
  worker cannot kill its supervisor or the env.
- ``uid``: when the env runs as root, the worker drops to an unprivileged user id of its own
  (no groups), so file permissions apply and process limits bind; where Python itself lies
  where other users cannot reach it (under ``/root``), it stays root but without capabilities.
- ``seccomp``: a filter (x86-64, installed by the worker itself once started, see :func:`seccomp`) that answers EPERM to ptrace and cross-process memory access,
  new sessions, namespaces and mounts, kernel keyrings, io_uring, BPF, perf events, module and
  clock changes, and stealing other processes' descriptors; where ``processes`` is False it also
  refuses process creation and exec (threads stay allowed), which the interpreter backend never
  needs (the GPU backend runs ``ptxas``).
- ``rlimits``: address space (where ``memory_bytes`` is set), processes, file size, CPU time,
  no core dumps.
- ``cgroup``: a memory cgroup of its own (made by the supervisor, v1 or v2, where writable),
  whose out-of-memory kills the supervisor reports.
- ``namespaces``: where the machine allows them (root, or an unprivileged user namespace), its own
  mount, PID and IPC namespaces (see :func:`_isolate`): a filesystem view built of its read and
  write roots alone (no host sockets, no ``/tmp``, a ``/dev`` of its device files and a private
  ``/dev/shm``), the hidden paths (the references, host secrets) covered by empty mounts, a
  ``/proc`` showing only its own processes, and SysV and POSIX IPC objects that die with it.
  Where they are refused, Landlock steps around the hidden paths instead (list-only rules on the
  directories above them, read rules on their other entries) and the layer says so.

The confinement travels to the supervisor and on to the worker in a memory file (:func:`to_memfd`),
never in argv or the environment, whose sizes the kernel bounds (a site-packages of a few hundred
entries, stepped around, was over the 128 KiB a single argument may hold).

Standard library only: the supervisor loads this file by path and never imports the package.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import resource
import signal
import sys

# -- Landlock ------------------------------------------------------------------------------------

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH, _LANDLOCK_RULE_NET_PORT = 1, 2
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_WRITE_TREE = (16 | 32 | 64 | 128 | 256 | 512 | 1024 | 2048 | 4096)  # remove/make dir, file, char, ...
_FS_REFER, _FS_TRUNCATE = 8192, 16384
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE  # the only rights a file rule takes


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    abi = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(abi), 0)


def _fs_rights(abi: int) -> int:
    rights = _READ | _FS_WRITE_FILE | _FS_WRITE_TREE
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    return rights


def _landlock(read: list[str], write: list[str], devices: list[str], abi: int, tcp_ports: list[int],
              hidden: list[str] = ()) -> str:
    """Landlock the calling process: ``read`` readable except ``hidden`` (stepped around, see
    :func:`step_around`), ``write`` writable, ``devices`` read-write. Returns the layer's state."""
    handled = _fs_rights(abi)
    read, listed = step_around(read, list(hidden)) if hidden else (read, [])
    attr = _RulesetAttr(handled, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        # Its own threads' files: naming a thread writes /proc/self/task/<tid>/comm, and the CUDA
        # driver will not start where that fails (error 304, seen on the H200).
        own_threads = ["/proc/self/task"]
        # Opening for writing may truncate (fopen's "w"): a handled right of its own from ABI 3.
        writes = _FS_WRITE_FILE | (_FS_TRUNCATE & handled)
        # ``listed``: directories whose entries may be listed (Python's import system lists each
        # directory on its path) but whose files are readable only where a read rule says so.
        for paths, rights in ((read, _READ), (listed, _FS_READ_DIR), (write, handled),
                              (devices, _FS_READ_FILE | writes), (own_threads, _READ | writes)):
            for path in paths:
                _allow(ruleset, path, rights)
        for port in tcp_ports if abi >= 4 else []:
            rule = _NetPortAttr(_NET_BIND_TCP | _NET_CONNECT_TCP, port)
            if _libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_NET_PORT),
                             ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for TCP port {port}")
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
        if _libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return _describe_landlock(abi, tcp_ports, hidden, len(listed))


def _describe_landlock(abi: int, tcp_ports: list[int], hidden=(), listed: int | None = None) -> str:
    tcp = f"TCP only on ports {tcp_ports[0]}-{tcp_ports[-1]}, the memory checker's" if tcp_ports else "no TCP"
    steps = f"{len(hidden)} hidden paths stepped around" + (f" ({listed} list-only rules)" if listed is not None else "")
    extras = [x for x, on in ((tcp, abi >= 4), ("scoped signals and abstract sockets", abi >= 6), (steps, bool(hidden)))
              if on]
    return f"ABI {abi}" + (f" ({', '.join(extras)})" if extras else "")


def _allow(ruleset: int, path: str, rights: int) -> None:
    """Add a path-beneath rule; a path that does not exist is skipped (not every machine has /lib32)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        if _libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                         ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)


# -- root -----------------------------------------------------------------------------------------

_PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 24, 28
# noroot, no-setuid-fixup, keep-caps off, no-cap-ambient-raise: each with its lock bit.
_SECUREBITS_LOCKED = 0x1 | 0x2 | 0x4 | 0x8 | 0x20 | 0x80
_CAP_LAST = 63
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """Root without capabilities: no file-permission override, no signals or ptrace across users,
    no raising limits; the bounding set and the securebits make sure no exec gives them back."""
    if _libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS_LOCKED, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_SECUREBITS failed")
    for cap in range(_CAP_LAST + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap} failed")
    data = (_CapData * 2)()
    if _libc.syscall(126, ctypes.byref(_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)), data) != 0:  # capset
        raise OSError(ctypes.get_errno(), "capset failed")


def reachable_by_others(path: str) -> bool:
    """Whether a user other than the owner can reach ``path`` (every directory above it searchable)."""
    path = os.path.realpath(path)
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return True
        if not os.stat(parent).st_mode & 0o001:
            return False
        path = parent


# -- seccomp ---------------------------------------------------------------------------------------

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_CLONE_THREAD = 0x00010000
# x86-64 numbers of the calls no evaluation needs (name: number).
DENIED_SYSCALLS = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312,
    "process_madvise": 440, "setsid": 112, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsmount": 432,
    "mount_setattr": 442, "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
    "perf_event_open": 298, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "userfaultfd": 323, "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
    "kexec_file_load": 320, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "fanotify_init": 300, "swapon": 167, "swapoff": 168,
    "reboot": 169, "acct": 163, "quotactl": 179, "vhangup": 153, "personality": 135,
}
# Process creation and exec, refused when the backend needs no helper programs.
PROCESS_SYSCALLS = {"fork": 57, "vfork": 58, "execve": 59, "execveat": 322}
_CLONE, _CLONE3 = 56, 435


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06


def seccomp_program(processes: bool) -> list[tuple[int, int, int, int]]:
    """The BPF program, as (code, jt, jf, k) rows: EPERM for the denied calls, ENOSYS for clone3
    (glibc then falls back to clone, whose flags a filter can read), everything else allowed."""
    eperm, enosys = _SECCOMP_RET_ERRNO | errno.EPERM, _SECCOMP_RET_ERRNO | errno.ENOSYS
    denied = sorted(DENIED_SYSCALLS.values()) + ([] if processes else sorted(PROCESS_SYSCALLS.values()))
    prog = [(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
            (_RET_K, 0, 0, eperm),  # another ABI (int 0x80): nothing
            (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
            (_JGE_K, 0, 1, _X32_SYSCALL_BIT),
            (_RET_K, 0, 0, eperm)]  # the x32 ABI: nothing
    for nr in denied:
        prog += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, eperm)]
    if not processes:
        prog += [(_JEQ_K, 0, 1, _CLONE3), (_RET_K, 0, 0, enosys),
                 (_JEQ_K, 0, 3, _CLONE),
                 (_LD_W_ABS, 0, 0, 16),  # the low half of clone's flags
                 (_JSET_K, 1, 0, _CLONE_THREAD),
                 (_RET_K, 0, 0, eperm)]  # a clone that is not a thread: a new process
    prog.append((_RET_K, 0, 0, _SECCOMP_RET_ALLOW))
    return prog


def seccomp(processes: bool) -> str:
    """Install the filter on the calling process (the worker, once started and before the solution
    loads: an exec needs to happen first); returns the layer's state for the report."""
    if platform.machine() != "x86_64":
        return f"absent: the filter is written for x86-64, not {platform.machine()}"
    rows = seccomp_program(processes)
    filters = (_SockFilter * len(rows))(*(_SockFilter(*row) for row in rows))
    prog = _SockFprog(len(rows), filters)
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")
    n = len(DENIED_SYSCALLS) + (0 if processes else len(PROCESS_SYSCALLS) + 2)
    return f"{n} calls refused" + ("" if processes else ", no new processes")


# -- hiding by Landlock alone ---------------------------------------------------------------------------

def _within(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def step_around(roots: list[str], hidden: list[str]) -> tuple[list[str], list[str]]:
    """Read roots that reach none of ``hidden``, and the directories above hidden paths that may
    only be listed: a root holding a hidden path becomes a list-only rule on it plus read rules on
    its other entries, down to the hidden path (which gets no rule at all). One rule per entry of
    every directory on the way: used only where no mount namespace can cover the hidden paths."""
    read, listed = [], []
    for root in roots:
        real = os.path.realpath(root)
        inside = [h for h in hidden if _within(h, real)]
        if not inside:
            read.append(root)
        elif real not in inside:
            listed.append(real)
            try:
                entries = [entry.path for entry in os.scandir(real)]
            except OSError:
                continue
            more_read, more_listed = step_around(entries, inside)
            read += more_read
            listed += more_listed
    return read, listed


# -- namespaces: the worker's own view of the filesystem, processes and IPC ----------------------------

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWPID, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x20000000, 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_SYS_PIVOT_ROOT = 155
_PR_SET_PDEATHSIG, _PR_SET_NAME = 1, 15
STAND_IN_NAME = "d2k-stand-in"  # its process name, by which the supervisor knows it (see reaper)
# Symlinks every /dev has, for programs that name the standard streams by path.
_DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
              "stderr": "/proc/self/fd/2"}
SHM_BYTES = 2**30  # the private /dev/shm's size (POSIX shared memory, multiprocessing's queues)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda x: None if x is None else x.encode())
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount of {source or fstype} on {target} failed: {os.strerror(err)}")


def _unshare(pid: bool) -> str:
    """Unshare mount, IPC and (``pid``) PID namespaces (in a new user namespace that maps this user
    to itself where the process is not root); the empty string where done, else why not."""
    flags = _CLONE_NEWNS | _CLONE_NEWIPC | (_CLONE_NEWPID if pid else 0)
    root = os.geteuid() == 0
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(flags | (0 if root else _CLONE_NEWUSER)) != 0:
        err = ctypes.get_errno()
        return f"unshare refused ({os.strerror(err)}): " + \
            ("no capability to make namespaces" if root else "no unprivileged user namespaces here")
    if not root:  # this user, mapped to itself: its own files stay its own
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    return ""


def _stand_in(worker: int) -> None:
    """The process left outside the worker's PID namespace (the worker is the first process inside,
    forked from here): it holds nothing, waits for the worker and ends as the worker ended, so that
    the supervisor reports the worker's own exit status or signal. Never returns."""
    code = 127
    try:
        _libc.prctl(_PR_SET_NAME, STAND_IN_NAME.encode(), 0, 0, 0)
        os.closerange(0, os.sysconf("SC_OPEN_MAX"))  # the pipes' ends close with the worker alone
        _, status = os.waitpid(worker, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:  # killed: by the same signal, so that a memory kill still reads as SIGKILL
            sig, code = -code, 128 - code
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
    finally:
        os._exit(code)


def _bind_path(view: str, path: str) -> str:
    """``path`` inside the view, made where it lies on the view's own tmpfs (a directory, or an
    empty file for a file); where a bind above it already shows it, nothing is made."""
    inside = view + path
    if not os.path.lexists(inside):
        if os.path.isdir(path):
            os.makedirs(inside, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(inside), exist_ok=True)
            os.close(os.open(inside, os.O_CREAT | os.O_WRONLY, 0o444))
    return inside


def _cover_directory(path: str) -> None:
    """Cover a hidden directory with a read-only tmpfs holding an empty stand-in of each entry,
    mode 000: it lists and stats as before (the package's task discovery checks that each task's
    reference is a file), but nothing in it opens (root without capabilities, or a dropped user,
    is refused as any other user is) and nothing of the real files is beneath."""
    entries = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in os.scandir(path)]
    _mount("d2k-hidden", path, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=0555,size=64k")
    for name, is_dir in entries:
        if is_dir:
            os.mkdir(os.path.join(path, name), 0)
        else:
            os.close(os.open(os.path.join(path, name), os.O_CREAT | os.O_WRONLY, 0))
    _mount(None, path, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def _bind_roots(view: str, roots: list[str], bound: list[str]) -> None:
    """Bind each of ``roots`` (shortest real path first) into the view by its real path, with a
    symlink where its own path differs (/lib to usr/lib, a venv's bin/python), skipping those a
    bind above already shows; appends what it binds to ``bound``."""
    for path in roots:
        real = os.path.realpath(path)
        if not os.path.exists(real):
            continue
        if real != path and not os.path.lexists(view + path):
            os.makedirs(os.path.dirname(view + path), exist_ok=True)
            os.symlink(real, view + path)
        if any(_within(real, b) for b in bound):
            continue  # shown already
        _mount(real, _bind_path(view, real), None, _MS_BIND | _MS_REC)
        bound.append(real)


def _build_view(view: str, read: list[str], write: list[str], devices: list[str], hidden: list[str],
                own_pids: bool) -> str:
    """Mount the worker's filesystem on ``view`` (an empty directory), then make it the root.

    A tmpfs holding bind mounts of the read and write roots (by their real paths, with a symlink
    where a root's own path differs, such as /lib to usr/lib); a ``/dev`` of the device files, a
    private ``/dev/shm`` and a ``/proc`` of this PID namespace (called in its first process); an
    empty stand-in that nobody may open over every hidden path the view shows (an empty file,
    or a directory of empty files of the same names, mode 000). Nothing else of the host is in
    reach: no /tmp, /run or home directory, hence none of their Unix sockets. Returns the state."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing done here reaches the host's mounts
    _mount("d2k-view", view, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=16m")
    # Binds only show; what may be written is Landlock's to say (and file permissions').
    bound: list[str] = []
    roots = sorted({p for p in [*read, *write] if p not in ("/dev", "/proc")}, key=lambda p: len(os.path.realpath(p)))
    # Roots under /dev (a TMPDIR on /dev/shm) are bound once the view's own /dev and /dev/shm exist,
    # which would otherwise cover them.
    under_dev = [p for p in roots if _within(os.path.realpath(p), "/dev")]
    _bind_roots(view, [p for p in roots if p not in under_dev], bound)
    dev = view + "/dev"
    os.makedirs(dev, exist_ok=True)
    _mount("d2k-dev", dev, "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=0755,size=64k")
    for device in devices:
        if os.path.exists(device):
            _mount(device, _bind_path(view, device), None, _MS_BIND)
    for name, target in _DEV_LINKS.items():
        os.symlink(target, os.path.join(dev, name))
    os.mkdir(dev + "/shm")
    _mount("d2k-shm", dev + "/shm", "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, f"mode=1777,size={SHM_BYTES}")
    _bind_roots(view, under_dev, bound)
    os.makedirs(view + "/proc", exist_ok=True)
    if own_pids:
        _mount("proc", view + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    else:  # the host's processes, each shown only to who may trace it (Landlock: none outside the domain)
        _mount("proc", view + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "hidepid=invisible")
    covered, blank = 0, view + "/.d2k-hidden"
    os.close(os.open(blank, os.O_CREAT | os.O_WRONLY, 0))
    for path in hidden:
        inside = view + path
        if not any(_within(path, b) for b in bound) or not os.path.lexists(inside) or os.path.islink(inside):
            continue
        if os.path.isdir(inside):
            _cover_directory(inside)
        else:
            _mount(blank, inside, None, _MS_BIND)
        covered += 1
    old = view + "/.old-root"
    os.mkdir(old)
    if _libc.syscall(_SYS_PIVOT_ROOT, view.encode(), old.encode()) != 0:
        raise OSError(ctypes.get_errno(), "pivot_root failed")
    os.chdir("/")
    _mount(None, "/.old-root", None, _MS_REC | _MS_PRIVATE)
    if _libc.umount2(b"/.old-root", _MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "the host's root could not be detached")
    os.rmdir("/.old-root")
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    return ("mount, PID and IPC" if own_pids else "mount and IPC (no PID namespace under a launcher: its /proc "
            "shows only the processes it may trace)") + \
        f": a view of {len(bound)} bound roots, {covered} hidden paths under empty mounts, " \
        "no host sockets, its own /proc, /dev/shm and IPC objects"


def _isolate(conf: "Confinement", own_pids: bool) -> str | None:
    """The namespaces layer, in the process about to become the worker: unshare, fork the worker as
    the first process of its PID namespace (this process stays behind as its stand-in, see
    :func:`_stand_in`, and never returns), and in the worker build its view. Returns the layer's
    state, or None where the machine refuses namespaces (the caller steps around the hidden paths).

    Without ``own_pids`` (under a launcher, which would be the namespace's first process, one to
    which no signal of its own namespace is delivered: a program that expects to signal itself
    would hang) there is no PID namespace and no fork."""
    why = _unshare(own_pids)
    if why:
        _isolate.refused = why
        return None
    cwd = os.getcwd()
    if own_pids:
        pid = os.fork()
        if pid != 0:
            _stand_in(pid)
        # The worker: dies with its stand-in, and everything in its namespace with it. (Its parent
        # lies outside the namespace, so getppid() says 0: were the stand-in gone already, the worker
        # would be an orphan of the supervisor, a subreaper that takes down all below it.)
        if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(125)
    state = _build_view(conf.view, conf.read, conf.write, conf.devices, conf.hidden, own_pids)
    os.chdir(cwd)
    return state


_isolate.refused = ""


# -- the whole ----------------------------------------------------------------------------------------

def to_memfd(text: str) -> int:
    """A memory file holding ``text`` (how a confinement travels: any size); close-on-exec."""
    fd = os.memfd_create("d2k-confinement")
    data = text.encode()
    while data:
        data = data[os.write(fd, data):]
    return fd


def read_fd(fd: int) -> str:
    """All of a memory file's text (read from its start), the descriptor closed."""
    chunks, offset = [], 0
    try:
        while chunk := os.pread(fd, 1 << 20, offset):
            chunks.append(chunk)
            offset += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


class Confinement:
    """What to confine a worker to. Plain data (it travels as JSON to the supervisor, in a memory file).

    ``read`` and ``write`` are directory or file paths; ``hidden`` paths beneath them that the worker
    must not read (the expert references, host secrets); ``devices`` files opened read-write
    (``/dev/null``, the GPU's); ``view`` an empty directory on which to build the worker's own
    filesystem (None: no namespaces, the hidden paths stepped around by Landlock); ``uid`` the user
    id to drop to when running as root (None: stay);
    ``memory_bytes`` the address-space limit (None: none, as CUDA reserves terabytes of it);
    ``cgroup_bytes`` the memory cgroup's limit (resident memory, where a cgroup can be made);
    ``processes`` whether the worker may start programs; ``tcp_ports`` the only TCP ports it may bind
    and connect to (the GPU memory checker talks to its target over them), none by default.
    """

    def __init__(self, read: list[str], write: list[str], devices: list[str], uid: int | None,
                 memory_bytes: int | None, cgroup_bytes: int, processes: bool, max_processes: int = 512,
                 file_size: int = 4 * 2**30, cpu_seconds: int = 3600, tcp_ports: list[int] | None = None,
                 hidden: list[str] | None = None, view: str | None = None):
        self.read, self.write, self.devices, self.hidden = read, write, devices, hidden or []
        self.uid, self.memory_bytes, self.cgroup_bytes, self.processes = uid, memory_bytes, cgroup_bytes, processes
        self.max_processes, self.file_size, self.cpu_seconds = max_processes, file_size, cpu_seconds
        self.tcp_ports, self.view = tcp_ports or [], view
        self.isolated = False  # set by apply: whether the namespaces were made

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in vars(self).items() if k != "isolated"})

    @classmethod
    def from_json(cls, text: str) -> "Confinement":
        return cls(**json.loads(text))

    def landlock_memfd(self) -> int:
        """The Landlock part alone in a memory file (inheritable), for :func:`main` to apply in the
        process it then execs; after :meth:`apply`, whose namespaces (where made) cover the hidden
        paths already."""
        fd = to_memfd(json.dumps({"read": self.read, "write": self.write, "devices": self.devices,
                                  "tcp_ports": self.tcp_ports, "hidden": [] if self.isolated else self.hidden}))
        os.set_inheritable(fd, True)
        return fd

    def apply(self, landlock: bool = True) -> dict[str, str]:
        """Confine the calling process (a forked child about to exec the worker) with every layer but
        seccomp; returns each layer's state. Raises OSError when a layer the machine offers fails to apply: a worker is
        never started with less than was detected. ``landlock=False`` leaves Landlock to the worker's
        own process (:func:`main`), as under a launcher that starts the worker as its child.

        With namespaces (``view`` set, and the machine allowing them) the calling process forks:
        the child, the first process of the new PID namespace, returns from here as the worker; the
        caller stays behind as its stand-in and never returns. (Not under a launcher: see
        :func:`_isolate`.)"""
        layers: dict[str, str] = {}
        limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, self.file_size),
                  (resource.RLIMIT_CPU, self.cpu_seconds)]
        if self.memory_bytes:
            limits.append((resource.RLIMIT_AS, self.memory_bytes))
        # The process limit counts every task of the user: it binds the worker alone only under a
        # user id of its own (elsewhere the cgroup's task limit does, where there is one).
        own_uid = self.uid is not None and os.geteuid() == 0
        if own_uid:
            limits.append((resource.RLIMIT_NPROC, self.max_processes))
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        layers["rlimits"] = (f"address space {self.memory_bytes / 2**30:.0f} GiB" if self.memory_bytes else
                             "no address-space limit") + \
            (f", {self.max_processes} tasks" if own_uid else ", no task limit (the user's count is shared)")
        was_root = os.geteuid() == 0
        isolated = _isolate(self, own_pids=landlock) if self.view else None
        self.isolated = isolated is not None
        hidden = [] if isolated else self.hidden
        layers["namespaces"] = isolated or (
            "absent: " + (_isolate.refused if self.view else "not asked for") + "; other processes, host "
            "sockets and IPC objects are in reach" + (", the hidden paths are stepped around by Landlock"
                                                     if self.hidden else ""))
        abi = landlock_abi()
        if not abi:
            layers["landlock"] = "absent: this kernel has no Landlock; reads and writes are limited by file permissions only"
        elif landlock:
            layers["landlock"] = _landlock(self.read, self.write, self.devices, abi, self.tcp_ports, hidden)
        else:
            layers["landlock"] = _describe_landlock(abi, self.tcp_ports, hidden) + \
                ", applied by the worker's own process before it execs Python"
        if not was_root:
            if isolated:  # every capability of its own user namespace goes
                _drop_capabilities()
            layers["uid"] = f"{os.geteuid()} (not root: nothing to drop)"
        elif self.uid is not None:
            os.setgroups([])
            os.setresgid(self.uid, self.uid, self.uid)
            os.setresuid(self.uid, self.uid, self.uid)
            layers["uid"] = f"{self.uid} (dropped from root)"
        else:
            _drop_capabilities()
            layers["uid"] = "root without capabilities (Python lies where other users cannot reach it)"
        return layers


# -- memory cgroup ------------------------------------------------------------------------------------

class MemoryCgroup:
    """A memory cgroup of one evaluation, below or beside the supervisor's own (cgroup v2, with a
    task limit where the pids controller is delegated too, or v1's memory controller). ``create`` returns None, with the reason in ``MemoryCgroup.absent``, where the
    machine offers none the supervisor may write."""

    absent = ""

    def __init__(self, path: str, v2: bool):
        self.path, self.v2 = path, v2
        self.max_tasks: int | None = None  # its task limit, where the pids controller is there too

    @classmethod
    def create(cls, name: str, limit_bytes: int, max_tasks: int) -> "MemoryCgroup | None":
        try:
            parent, v2 = _own_memory_cgroup()
            if v2 and "memory" not in _read(os.path.join(parent, "cgroup.subtree_control")).split():
                try:
                    _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
                except OSError as exc:
                    # A v2 cgroup holding processes cannot give its children controllers: beside
                    # it, then, where its own parent already gives them memory.
                    above = os.path.dirname(parent)
                    if exc.errno != errno.EBUSY or "memory" not in \
                            _read(os.path.join(above, "cgroup.subtree_control")).split():
                        raise
                    parent = above
            path = os.path.join(parent, name)
            os.mkdir(path)
        except (OSError, LookupError) as exc:
            cls.absent = f"absent: no writable memory cgroup ({exc})"
            return None
        group = cls(path, v2)
        try:
            if v2:
                _write(os.path.join(path, "memory.max"), str(limit_bytes))
                _write(os.path.join(path, "memory.swap.max"), "0")
                if os.path.exists(os.path.join(path, "pids.max")):  # where the parent delegates pids
                    _write(os.path.join(path, "pids.max"), str(max_tasks))
                    group.max_tasks = max_tasks
            else:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
        except OSError as exc:
            group.remove()
            cls.absent = f"absent: the memory limit cannot be set ({exc})"
            return None
        return group

    @property
    def procs(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def oom_kills(self) -> int:
        """How many processes of the group the kernel killed for memory (v1: times the limit was hit)."""
        try:
            if self.v2:
                fields = dict(line.split() for line in _read(os.path.join(self.path, "memory.events")).splitlines())
                return int(fields.get("oom_kill", 0))
            fields = dict(line.split() for line in _read(os.path.join(self.path, "memory.oom_control")).splitlines())
            return int(fields.get("oom_kill", 0)) or int(_read(os.path.join(self.path, "memory.failcnt")) or 0)
        except (OSError, ValueError):
            return 0

    def remove(self) -> None:
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def _own_memory_cgroup() -> tuple[str, bool]:
    """The directory of this process's memory cgroup, and whether it is cgroup v2."""
    rel_v1 = rel_v2 = None
    for line in _read("/proc/self/cgroup").splitlines():
        hierarchy, controllers, rel = line.split(":", 2)
        if hierarchy == "0" and not controllers:
            rel_v2 = rel
        elif "memory" in controllers.split(","):
            rel_v1 = rel
    for line in _read("/proc/self/mountinfo").splitlines():
        before, after = line.split(" - ", 1)
        mount_point, (fstype, _, options) = before.split()[4], after.split()[:3]
        if rel_v1 is not None and fstype == "cgroup" and "memory" in options.split(","):
            return mount_point + rel_v1.rstrip("/"), False
        if rel_v1 is None and rel_v2 is not None and fstype == "cgroup2":
            return mount_point + rel_v2.rstrip("/"), True
    raise LookupError("no memory cgroup is mounted")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def main(argv: list[str]) -> None:
    """``python -I -S confine.py SPEC_FD PROGRAM [ARG ...]``: Landlock this process (the rules read
    from SPEC_FD, a memory file of :meth:`Confinement.landlock_json`, closed here), then exec
    PROGRAM in it (same process id, same domain, no thread started before the rules).

    For a worker started by a launcher (the GPU memory checker runs its target as its own child): a
    domain applied in the launcher would name the launcher's /proc/<pid>/task, not the worker's,
    and the CUDA driver in the worker could not name its threads; the worker's own process
    confines itself here, before any of its code, let alone the solution's, runs."""
    spec = json.loads(read_fd(int(argv[1])))
    abi = landlock_abi()
    if abi:
        _landlock(spec["read"], spec["write"], spec["devices"], abi, spec["tcp_ports"], spec["hidden"])
    os.execv(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv)
