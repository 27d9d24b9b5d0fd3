#!/usr/bin/env python3
"""Churn program: a multiprocessing pool (start method 'fork') and threads
that build large lists, dicts and bytearrays, pause, and hash them.

  pool.py [ROUNDS] [N]

Each round forks a new pool of 3 workers (so processes are forked while
memory is evicted), maps 6 tasks over it, and meanwhile runs 2 threads in
the parent doing the same work; it prints one line of hashes per round.
The output depends only on the arguments.
"""
import hashlib
import multiprocessing as mp
import random
import sys
import threading
import time


def build(seed, n):
    rnd = random.Random(seed)
    lst = [rnd.getrandbits(48) for _ in range(n)]
    d = {i: (x * 2654435761) & 0xFFFFFFFFFFFF for i, x in enumerate(lst)}
    ba = bytearray(n * 8)
    for i in range(0, n, 7):
        ba[i * 8:(i + 1) * 8] = lst[i].to_bytes(8, "little")
    strs = ["%x-%d" % (x, i) for i, x in enumerate(lst[: n // 4])]
    return lst, d, ba, strs


def digest(lst, d, ba, strs):
    h = hashlib.sha256()
    h.update(repr(lst[::3]).encode())
    h.update(repr(sorted(d.items())[::5]).encode())
    h.update(bytes(ba))
    h.update("".join(strs).encode())
    return h.hexdigest()[:16]


def task(args):
    seed, n = args
    data = build(seed, n)
    first = digest(*data)
    time.sleep(0.02 + (seed % 5) * 0.01)  # let the memory be evicted
    second = digest(*data)
    return first if first == second else "changed:%s:%s" % (first, second)


def thread_work(seed, n, out, i):
    out[i] = task((seed, n))


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 60000
    ctx = mp.get_context("fork")
    keep = build(1, n * 2)  # a large structure that lives through every round
    keep_hash = digest(*keep)
    for r in range(rounds):
        res = [None, None]
        ths = [threading.Thread(target=thread_work, args=(1000 * r + 900 + i, n, res, i)) for i in range(2)]
        for t in ths:
            t.start()
        with ctx.Pool(3) as pool:
            hashes = pool.map(task, [(1000 * r + i, n) for i in range(6)], chunksize=1)
        for t in ths:
            t.join()
        again = digest(*keep)
        print("round %d: %s threads %s keep %s" % (r, " ".join(hashes), " ".join(res),
                                                    "same" if again == keep_hash else "CHANGED " + again),
              flush=True)
    print("done")


if __name__ == "__main__":
    main()
