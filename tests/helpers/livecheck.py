#!/usr/bin/env python3
"""livecheck.py IMG PID ADDR MIB THREADS: the live_counter region of PID
in the image IMG (tests/workloads/live_counter.c) holds one instant: for
each writer thread t, the sweep numbers of its pages (p % THREADS == t,
in order) read [s+1, ..., s+1, s, ..., s]. Every page must be in the
image. Prints "ok SWEEPS" (the lowest sweep seen) or the first violation
on stderr and exits 1.

livecheck.py --selftest: the check itself, on made-up sequences (it must
be able to fail)."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import imgcmp  # noqa: E402

PAGE = 4096


def one_instant(values):
    """None if values is [a]*k + [a-1]*(n-k) (k >= 1), else why not."""
    a = values[0]
    k = 0
    while k < len(values) and values[k] == a:
        k += 1
    for j in range(k, len(values)):
        if values[j] != a - 1:
            return f"position {j}: {values[j]} after {k} pages of {a} (expected {a - 1})"
    return None


def selftest():
    good = [[5, 5, 4, 4], [3, 3, 3], [7, 6, 6]]
    bad = [[5, 4, 5], [5, 5, 3], [4, 5, 5], [6, 4]]
    for v in good:
        if one_instant(v):
            sys.exit(f"livecheck: selftest: {v} refused")
    for v in bad:
        if not one_instant(v):
            sys.exit(f"livecheck: selftest: {v} accepted")
    print("ok selftest")


def main():
    if sys.argv[1:] == ["--selftest"]:
        selftest()
        return
    img, pid, addr, mib, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3], 16), int(sys.argv[4]), int(sys.argv[5])
    end = addr + (mib << 20)
    man = imgcmp.load(img)
    r = imgcmp.find_region(man, pid, addr)
    where = imgcmp.image_pages(man, r, addr, end)
    npages = (mib << 20) // PAGE
    if len(where) != npages:
        sys.exit(f"livecheck: the image holds {len(where)} of the region's {npages} pages")
    low = None
    with open(os.path.join(img, "pages"), "rb") as pf:
        for t in range(threads):
            vals = []
            for p in range(t, npages, threads):
                pf.seek(where[addr + p * PAGE])
                vals.append(struct.unpack("<Q", pf.read(8))[0])
            why = one_instant(vals)
            if why:
                sys.exit(f"livecheck: thread {t}'s pages are not one instant: {why}")
            low = vals[-1] if low is None else min(low, vals[-1])
    print(f"ok {low}")


if __name__ == "__main__":
    main()
