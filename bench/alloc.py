# Python workload for bench/run.sh: small-object churn (pymalloc arenas,
# brk/mmap of 256 KiB arenas) and large buffers (above glibc's mmap
# threshold, so each is an mmap/munmap pair), plus some computing.
import sys

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
total = 0
for r in range(rounds):
    objs = [{"i": i, "s": str(i) * 3, "t": (i, i * 2)} for i in range(60000)]
    objs.sort(key=lambda o: o["s"])
    total += sum(o["t"][1] for o in objs[::7])
    bufs = [bytearray(1 << 20) for _ in range(40)]
    for b in bufs:
        b[::4096] = b"\x01" * len(b[::4096])
    total += sum(b[0] for b in bufs)
    del objs, bufs
print(total)
