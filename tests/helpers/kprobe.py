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
out["unprivileged_userfaultfd"] = sysctl("vm/unprivileged_userfaultfd")
out["ptrace_scope"] = sysctl("kernel/yama/ptrace_scope")
print(json.dumps(out))
