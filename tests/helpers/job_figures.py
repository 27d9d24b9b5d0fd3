#!/usr/bin/env python3
"""Check the times of finished jobs (docs/protocol.md, "checkpoint";
docs/protocol-reload.md): the job objects on stdin, one per line, as
`ctl --json job ID` or `ctl --json checkpoint ... --wait` print them.

  - every member named *_ns is an integer >= 0;
  - the phases of a checkpoint add up to no more than what holds them:
    stop + layout + copy within the pause (with --evict and no live copy,
    the sync and the evict too), each process's pause within the job's,
    the live set-up within the copy, the second stop of --evict --live
    within its own pause;
  - "in all" (elapsed_ns) is never smaller than the pause and the other
    phases it holds, and the job's elapsed_ns holds its result's;
  - a reload's verify, load and huge page times within the job's.

Prints each offence as JOB: what, and exits 1 if there is one."""
import json
import sys

# Phases are taken on one monotonic clock, so a sum within its container
# needs no slack; this much allows for a clock read between two stages.
TOL = 1_000_000


def ns_members(v, path, bad):
    if isinstance(v, dict):
        for k, x in v.items():
            if k.endswith("_ns") and not isinstance(x, dict):
                if not isinstance(x, int) or isinstance(x, bool) or x < 0:
                    bad.append(f"{path}.{k} = {x!r}: not a non-negative integer")
            ns_members(x, f"{path}.{k}", bad)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            ns_members(x, f"{path}[{i}]", bad)


def within(bad, where, parts, whole, what):
    """sum(parts) <= whole (+ TOL); parts and whole as (name, value)."""
    total = sum(v for _, v in parts)
    if total > whole[1] + TOL:
        names = " + ".join(f"{n} {v}" for n, v in parts)
        bad.append(f"{where}: {what}: {names} = {total} > {whole[0]} {whole[1]}")


def get(o, k):
    v = o.get(k, 0) if isinstance(o, dict) else 0
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def checkpoint(j, r, where, bad):
    pause = ("pause_ns", get(r, "pause_ns"))
    elapsed = ("elapsed_ns", get(r, "elapsed_ns"))
    live = r.get("live") or {}
    copied_live = live.get("live") is True
    evicted = "evicted" in r
    if evicted and "evict_ns" not in r:
        bad.append(f"{where}: evicted, but no evict_ns")
    # With --evict and no live copy the program stays stopped through the
    # sync and the evict; otherwise they follow the resume.
    in_pause = evicted and not copied_live
    paused = [(k, get(r, k)) for k in ("stop_ns", "layout_ns", "copy_ns")]
    after = [("sync_ns", get(r, "sync_ns"))]
    if evicted:
        (paused if in_pause else after).append(("evict_ns", get(r, "evict_ns")))
    if copied_live and evicted:
        # The evict's own pause holds its work and follows the first.
        ev = live.get("evict") or {}
        after[-1] = ("live.evict.pause_ns", get(ev, "pause_ns"))
        within(bad, where, [("evict_ns", get(r, "evict_ns"))], after[-1],
               "the evict within its pause")
        within(bad, where, [(f"live.evict.{k}", get(ev, k))
                            for k in ("stop_ns", "scan_ns", "unprotect_ns", "drop_ns")],
               after[-1], "the second stop's phases within its pause")
    if in_pause:
        paused, after = paused + after, []
    within(bad, where, paused, pause, "the phases within the pause")
    within(bad, where, [("prepare_ns", get(r, "prepare_ns")), pause] + after, elapsed,
           "the pause and what follows it within elapsed_ns")
    for p in r.get("processes", []):
        within(bad, where, [(f"process {p.get('pid')} pause_ns", get(p, "pause_ns"))], pause,
               "a process's pause within the job's")
    if copied_live:
        within(bad, where, [("live.protect_ns", get(live, "protect_ns"))],
               ("live.setup_ns", get(live, "setup_ns")), "the protection within the set-up")
        within(bad, where, [("live.setup_ns", get(live, "setup_ns"))], ("copy_ns", get(r, "copy_ns")),
               "the live set-up within the copy")
    elif "live_pause_ns" in live:
        # A live attempt given up came before this attempt's pause.
        within(bad, where, [("live.live_pause_ns", get(live, "live_pause_ns"))],
               ("prepare_ns", get(r, "prepare_ns")), "the first attempt before the pause")
    dedup = r.get("dedup") or {}
    within(bad, where, [("dedup.read_ns", get(dedup, "read_ns"))], elapsed,
           "the dedup check within elapsed_ns")
    within(bad, where, [elapsed], ("job elapsed_ns", get(j, "elapsed_ns")),
           "the result within the job")


def reload(j, r, where, bad):
    within(bad, where, [(k, get(r, k)) for k in ("verify_ns", "load_ns", "huge_ns")],
           ("job elapsed_ns", get(j, "elapsed_ns")), "the reload's phases within the job")


def main():
    bad, n = [], 0
    for line in sys.stdin.read().splitlines():
        if not line.strip():
            continue
        j = json.loads(line)
        n += 1
        where = f"job {j.get('id')} ({j.get('kind')}, {j.get('state')})"
        ns_members(j, where, bad)
        r = j.get("result")
        if j.get("state") != "done" or not isinstance(r, dict):
            continue
        if j.get("kind") == "checkpoint":
            checkpoint(j, r, where, bad)
        elif j.get("kind") == "reload":
            reload(j, r, where, bad)
    for b in bad:
        print(b)
    if not n:
        print("no job")
        return 1
    return 1 if bad else 0


sys.exit(main())
