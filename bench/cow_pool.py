"""cow_pool: a python fork pool over a heap the parent filled, for
bench/cow.sh (issue 15's benchmark).

Usage: cow_pool.py MIB WORKERS STRIDE
The parent fills a bytearray of MIB MiB, then forks WORKERS workers; each
writes one byte in every STRIDE-th page (its own pages), reports, and
sleeps. The parent prints "ready PARENT WORKER..." and, at "exit" or EOF
on stdin, kills the workers and exits.
"""
import os
import signal
import sys

mib, workers, stride = (int(a) for a in sys.argv[1:4])
PAGE = 4096
heap = bytearray(os.urandom(1 << 20) * mib)
kids = []
r, w = os.pipe()
for k in range(workers):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        for off in range(k * PAGE, len(heap), stride * PAGE):
            heap[off] ^= 0xFF
        os.write(w, b"x")
        while True:
            signal.pause()
    kids.append(pid)
os.close(w)
for _ in kids:
    os.read(r, 1)
print("ready", os.getpid(), *kids, flush=True)
for line in sys.stdin:
    if line.startswith("exit"):
        break
for pid in kids:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
