#!/usr/bin/env python3
"""bench/rb_drive.py MEMVISOR RB_ITER MIB PAGES N [until|point]: rb_iter under
memvisor, marked in its first read of stdin, then N iterations: one byte
in, its answer out, a rollback (request, job, done) over one control
connection. With until: marked with --hold, and each iteration is one
byte in and one `rollback --until read:0`, which runs it to its next read
(the answer is read after). With point: the same, with rb_iter run under
`memvisor run --until-point read:0`, so that the run is told of the read
by memvisor's filter instead of stopping at every call.
Prints "memvisor n=N p50_us= p99_us= per_s=" (each iteration's wall time,
the rollback included), and the rollbacks' own pause (the job's pause_ns)
p50 and p99, elapsed time (elapsed_ns) p50, and the p50 of each of the
result's times (stop, check, layout, memory, registers, resume).
RB_RSS=1: also the VmRSS of memvisor and of the program (and the
snapshot's) after a tenth of the iterations (warmed up) and at the end,
and how much each grew: "memory flat" over many rollbacks."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def call(s, f, cmd, args=None):
    s.sendall(json.dumps({"id": 1, "cmd": cmd, "args": args or {}}).encode() + b"\n")
    r = json.loads(f.readline())
    if not r.get("ok"):
        sys.exit(f"{cmd}: {r.get('error')}")
    return r["result"]


def job(s, f, jid):
    if WAIT:  # answered at the job's end: no polls
        j = call(s, f, "job", {"id": jid, "wait_ms": 60000})
        if j["state"] == "done":
            return j["result"]
        sys.exit(f"job {jid}: {j.get('error') or j['state']}")
    while True:
        j = call(s, f, "job", {"id": jid})
        if j["state"] == "done":
            return j["result"]
        if j["state"] != "running":
            sys.exit(f"job {jid}: {j.get('error')}")
        time.sleep(0.0002)


# RB_POLL=1: follow each job by polling `job` (as before wait_ms); by
# default the rollback's own request waits for its end (one round trip).
WAIT = os.environ.get("RB_POLL") != "1"
RSS = os.environ.get("RB_RSS") == "1"


def rollback(s, f, args):
    if WAIT:
        j = call(s, f, "rollback", dict(args, wait_ms=60000))
        if j["state"] == "done":
            return j["result"]
        sys.exit(f"rollback: {j.get('error') or j['state']}")
    return job(s, f, call(s, f, "rollback", args)["job"])


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as st:
            for l in st:
                if l.startswith("VmRSS:"):
                    return int(l.split()[1])
    except OSError:
        pass
    return 0


def rss_all(pids):
    return [rss_kb(x) for x in pids]


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    mv, prog, mib, pages, n = sys.argv[1:6]
    n = int(n)
    mode = sys.argv[6] if len(sys.argv) > 6 else ""
    until = mode in ("until", "point")
    point = ["--until-point", "read:0"] if mode == "point" else []
    d = tempfile.mkdtemp(prefix="rb_drive.")
    sock = os.path.join(d, "sock")
    p = subprocess.Popen([mv, "run", "--socket", sock] + point + ["--", prog, mib, pages, "stdin"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = b""
    while not line.endswith(b"\n"):
        line += os.read(p.stdout.fileno(), 1)
    while not os.path.exists(sock):
        time.sleep(0.01)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    f = s.makefile("rb")
    time.sleep(0.05)  # into its read
    marked = job(s, f, call(s, f, "mark", {"hold": until})["job"])
    watch = [p.pid, marked.get("pid", 0), marked.get("snapshot", {}).get("pid", 0)]
    rss_at, rss_warm = max(1, n // 10), None
    wall, pause, elapsed, times = [], [], [], {}
    start = time.monotonic()
    for i in range(n):
        a = time.monotonic()
        os.write(p.stdin.fileno(), bytes([i % 256]))
        if until:
            r = rollback(s, f, {"until": "read:0"})
            if r["until"]["event"] != "reached":
                sys.exit(f"iteration {i}: {r['until']}")
            if r["until"].get("stops", "traced") != ("notified" if point else "traced"):
                sys.exit(f"iteration {i}: stops {r['until']['stops']}")
        if os.read(p.stdout.fileno(), 1) != b"d":
            sys.exit("no answer")
        if not until:
            r = rollback(s, f, {})
        wall.append(time.monotonic() - a)
        pause.append(r["pause_ns"] / 1e3)
        elapsed.append(r["elapsed_ns"] / 1e3)
        for k, v in r.get("times", {}).items():
            times.setdefault(k, []).append(v / 1e3)
        if until:
            times.setdefault("run_ns", []).append(r["until"]["run_ns"] / 1e3)
        if RSS and i + 1 == rss_at:
            rss_warm = rss_all(watch)
    rss_end = rss_all(watch) if RSS else None
    total = time.monotonic() - start
    if until:
        call(s, f, "unmark")
    p.stdin.close()
    p.wait()
    print(f"memvisor n={n} p50_us={pct(wall, .5) * 1e6:.1f} p99_us={pct(wall, .99) * 1e6:.1f} "
          f"per_s={n / total:.0f} pause_p50_us={pct(pause, .5):.0f} "
          f"pause_p99_us={pct(pause, .99):.0f} job_p50_us={pct(elapsed, .5):.0f} "
          + " ".join(f"{k[:-3]}_p50_us={pct(v, .5):.0f}" for k, v in times.items()))
    if RSS:
        for name, a, b in zip(("memvisor", "program", "snapshot"), rss_warm, rss_end):
            # 0: the process was gone (or never known): no figure.
            grew = f"{(b - a) * 100.0 / a:+.2f}%" if a and b else "n/a"
            print(f"rss {name} after_{rss_at}={a}kB after_{n}={b}kB grew={grew}")
    os.unlink(sock) if os.path.exists(sock) else None
    os.rmdir(d)


main()
