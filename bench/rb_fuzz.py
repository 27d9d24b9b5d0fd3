#!/usr/bin/env python3
"""bench/rb_fuzz.py MEMVISOR [N]: a fuzzing loop on a real parser, Python's
json module reading one line of stdin, run three ways side by side on the
same N inputs (default 300; a third of them not valid JSON):

  exec      a new process per input (no fork server, no source change):
            python3 -c PARSE (json.loads of one line of stdin, os._exit
            with 0, or 1 when it raised)
  fork      AFL's fork server written into the target (a source change):
            one process imports json, then forks a child per input that
            parses it and exits, and waits for it
  memvisor  the exec column's program, unchanged, under memvisor: marked
            once, held, in its first read of stdin (`mark --hold`), then
            per input: the line written to its stdin and one
            `rollback --until read:0`, whose event is the parser's exit
  point     the same under `memvisor run --until-point read:0`: the run is
            told of the read and the exit by memvisor's filter instead of
            stopping at every system call

Each loop's verdicts (exit status 0 or 1 per input) must be the same as
the exec loop's: the driver stops with an error otherwise. Prints one line
per way: iterations per second, p50 and p99 of an iteration in us; then
memvisor's ratio to each. The memvisor line adds the rollback's own pause
p50 and the program's run (run_ns) p50."""
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

# Each way parses and ends alike: os._exit, without the interpreter's
# teardown (which the fork server's child skips too).
PARSE = ("import json,os,sys\n"
         "try:\n json.loads(sys.stdin.readline())\n"
         "except Exception:\n os._exit(1)\n"
         "os._exit(0)\n")
FORKSERVER = r"""
import json, os, sys
out = os.fdopen(1, "w", buffering=1)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            json.loads(line)
        except Exception:
            os._exit(1)
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    out.write("%d\n" % os.waitstatus_to_exitcode(st))
"""


def inputs(n):
    rnd = random.Random(26)
    v = []
    for i in range(n):
        doc = {"id": i, "name": "item%d" % rnd.randrange(1000),
               "tags": [rnd.choice("abcdef") * rnd.randrange(1, 8) for _ in range(rnd.randrange(5))],
               "price": rnd.random() * 100, "nested": {"ok": bool(i % 2), "list": list(range(i % 17))}}
        s = json.dumps(doc)
        if i % 3 == 2:  # a mutation: a byte dropped, doubled or replaced
            k = rnd.randrange(len(s))
            s = rnd.choice([s[:k] + s[k + 1:], s[:k] + s[k] + s[k:], s[:k] + "\x7f" + s[k + 1:]])
        v.append(s.replace("\n", " "))
    return v


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def loop_exec(corpus):
    verdicts, wall = [], []
    for s in corpus:
        a = time.monotonic()
        r = subprocess.run([sys.executable, "-c", PARSE], input=(s + "\n").encode(),
                           stderr=subprocess.DEVNULL)
        wall.append(time.monotonic() - a)
        verdicts.append(r.returncode)
    return verdicts, wall


def loop_fork(corpus):
    p = subprocess.Popen([sys.executable, "-c", FORKSERVER], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    verdicts, wall = [], []
    for s in corpus:
        a = time.monotonic()
        p.stdin.write((s + "\n").encode())
        p.stdin.flush()
        verdicts.append(int(p.stdout.readline()))
        wall.append(time.monotonic() - a)
    p.stdin.close()
    p.wait()
    return verdicts, wall


class Ctl:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def call(self, cmd, args=None):
        self.s.sendall(json.dumps({"id": 1, "cmd": cmd, "args": args or {}}).encode() + b"\n")
        r = json.loads(self.f.readline())
        if not r.get("ok"):
            sys.exit(f"{cmd}: {r.get('error')}")
        return r["result"]

    def job(self, jid):
        return self.done(self.call("job", {"id": jid, "wait_ms": 60000}))

    def done(self, j):
        if j["state"] != "done":
            sys.exit(f"job {j['id']}: {j.get('error') or j['state']}")
        return j["result"]


def in_read0(pid):
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()[:2] == ["0", "0x0"]
    except OSError:
        return False


def loop_memvisor(mv, corpus, point=False):
    d = tempfile.mkdtemp(prefix="rb_fuzz.")
    sock = os.path.join(d, "sock")
    opt = ["--until-point", "read:0"] if point else []
    p = subprocess.Popen([mv, "run", "--socket", sock] + opt + ["--", sys.executable, "-c", PARSE],
                         stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        if time.monotonic() > deadline:
            sys.exit("memvisor did not start")
        time.sleep(0.01)
    c = Ctl(sock)
    pid = c.call("status")["command_pid"]
    while not in_read0(pid):
        if time.monotonic() > deadline:
            sys.exit(f"process {pid} never read its stdin")
        time.sleep(0.01)
    c.job(c.call("mark", {"hold": True})["job"])
    verdicts, wall, pause, ran = [], [], [], []
    for s in corpus:
        a = time.monotonic()
        os.write(p.stdin.fileno(), (s + "\n").encode())
        r = c.done(c.call("rollback", {"until": "read:0", "wait_ms": 60000}))
        wall.append(time.monotonic() - a)
        ev = r["until"]
        if ev["event"] != "exited":
            sys.exit(f"input {len(verdicts)}: the parser did not exit: {ev}")
        if ev.get("stops", "traced") != ("notified" if point else "traced"):
            sys.exit(f"input {len(verdicts)}: stops {ev.get('stops')}")
        verdicts.append(ev["status"])
        pause.append(r["pause_ns"] / 1e3)
        ran.append(ev["run_ns"] / 1e3)
    c.call("unmark")
    p.stdin.close()
    p.wait()
    try:
        os.rmdir(d)
    except OSError:
        pass
    return verdicts, wall, pause, ran


def line(name, wall):
    total = sum(wall)
    print(f"{name:9s} n={len(wall)} per_s={len(wall) / total:.0f} "
          f"p50_us={pct(wall, .5) * 1e6:.0f} p99_us={pct(wall, .99) * 1e6:.0f}")
    return len(wall) / total


def main():
    mv = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    corpus = inputs(n)
    ve, we = loop_exec(corpus)
    vf, wf = loop_fork(corpus)
    vm, wm, pause, ran = loop_memvisor(mv, corpus)
    vp, wp, ppause, pran = loop_memvisor(mv, corpus, point=True)
    for name, v in (("fork", vf), ("memvisor", vm), ("point", vp)):
        bad = [i for i in range(n) if v[i] != ve[i]]
        if bad:
            sys.exit(f"{name}: verdicts differ from exec's at inputs {bad[:10]}")
    print(f"verdicts: {ve.count(0)} parsed, {n - ve.count(0)} refused, the same in every loop")
    e = line("exec", we)
    f = line("fork", wf)
    m = line("memvisor", wm)
    pt = line("point", wp)
    k = max(1, n // 5)
    print(f"memvisor first/last {k}: p50_us={pct(wm[:k], .5) * 1e6:.0f}/{pct(wm[-k:], .5) * 1e6:.0f}")
    print(f"memvisor pause_p50_us={pct(pause, .5):.0f} run_p50_us={pct(ran, .5):.0f} "
          f"memvisor/exec={m / e:.1f} memvisor/fork={m / f:.2f}")
    print(f"point pause_p50_us={pct(ppause, .5):.0f} run_p50_us={pct(pran, .5):.0f} "
          f"point/exec={pt / e:.1f} point/fork={pt / f:.2f}")


main()
