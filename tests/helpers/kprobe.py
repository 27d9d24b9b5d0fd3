#!/usr/bin/env python3
"""What this kernel gives this user, probed apart from memvisor (ctypes, no
memvisor code), for tests/bats/check.bats to compare `memvisor check` with.
Prints one JSON object:

  userfaultfd       userfaultfd(2) (O_CLOEXEC|O_NONBLOCK) made a uffd
  userfaultfd_errno the errno it failed with, else 0
  uffd_features     the UFFDIO_API features the kernel offers (asked for
                    none), from a full uffd or a user-mode-only one; null
                    when neither could be made
  event_fork        UFFDIO_API with EVENT_FORK|REMAP|REMOVE|UNMAP worked
  uffd_sysv_shm     a uffd registered a System V segment's mapping for
                    missing faults (UFFDIO_REGISTER)
  unprivileged_userfaultfd, ptrace_scope   the sysctls, null when absent
"""
import ctypes
import errno
import json
import os
import struct

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_userfaultfd = 323  # x86_64
O_CLOEXEC, O_NONBLOCK, UFFD_USER_MODE_ONLY = 0o2000000, 0o4000, 1
UFFD_API = 0xAA
# _IOWR(0xAA, 0x3F, struct uffdio_api): 24 bytes
UFFDIO_API = (3 << 30) | (24 << 16) | (0xAA << 8) | 0x3F
EVICT = (1 << 1) | (1 << 2) | (1 << 3) | (1 << 6)


def uffd(flags=0):
    fd = libc.syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | flags)
    return (fd, 0) if fd >= 0 else (-1, ctypes.get_errno())


def api(fd, want):
    buf = ctypes.create_string_buffer(struct.pack("QQQ", UFFD_API, want, 0), 24)
    rc = libc.ioctl(fd, ctypes.c_ulong(UFFDIO_API), buf)
    return struct.unpack("QQQ", buf.raw)[1] if rc == 0 else None


# _IOWR(0xAA, 0x00, struct uffdio_register): 32 bytes
UFFDIO_REGISTER = (3 << 30) | (32 << 16) | (0xAA << 8) | 0x00
IPC_PRIVATE, IPC_CREAT, IPC_RMID = 0, 0o1000, 0
MISSING_SHMEM = 1 << 5


def sysv_registers():
    fd, _ = uffd()
    if fd < 0:
        fd, _ = uffd(UFFD_USER_MODE_ONLY)
    if fd < 0 or api(fd, MISSING_SHMEM) is None:
        return False
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(IPC_PRIVATE, ctypes.c_size_t(4096), IPC_CREAT | 0o600)
    if shmid < 0:
        os.close(fd)
        return False
    addr = libc.shmat(shmid, None, 0)
    libc.shmctl(shmid, IPC_RMID, None)
    ok = False
    if addr not in (None, ctypes.c_void_p(-1).value):
        reg = ctypes.create_string_buffer(struct.pack("QQQQ", addr, 4096, 1, 0), 32)
        ok = libc.ioctl(fd, ctypes.c_ulong(UFFDIO_REGISTER), reg) == 0
        libc.shmdt(ctypes.c_void_p(addr))
    os.close(fd)
    return ok


def sysctl(name):
    try:
        with open("/proc/sys/" + name) as f:
            return int(f.read())
    except OSError:
        return None


out = {}
fd, err = uffd()
out["userfaultfd"] = fd >= 0
out["userfaultfd_errno"] = err
if fd < 0:
    fd, _ = uffd(UFFD_USER_MODE_ONLY)
out["uffd_features"] = api(fd, 0) if fd >= 0 else None
if fd >= 0:
    os.close(fd)
fd, _ = uffd()
if fd < 0:
    fd, _ = uffd(UFFD_USER_MODE_ONLY)
out["event_fork"] = fd >= 0 and api(fd, EVICT) is not None
if fd >= 0:
    os.close(fd)
out["uffd_sysv_shm"] = sysv_registers()
out["unprivileged_userfaultfd"] = sysctl("vm/unprivileged_userfaultfd")
out["ptrace_scope"] = sysctl("kernel/yama/ptrace_scope")
print(json.dumps(out))
