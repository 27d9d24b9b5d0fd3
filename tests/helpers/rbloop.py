#!/usr/bin/env python3
"""Roll tests/workloads/rb_target back N times over one control connection
(a ctl process a rollback would be most of the time).

Usage: rbloop.py SOCKET FIFO OUT N SEED [COMMANDS [until|tree]]

The program was marked while it waited for input. Each iteration sends 1
to 3 commands (picked from COMMANDS, a comma-separated list, default
"w,m,u,p,z,b,s,t,f,x"; "w" gets a seed and a count of pages), waiting for each
answer, then asks for a rollback and waits for its job. The first "got"
line after each rollback must equal the first one after the mark: the
same count, hash, no resident hole page, registers ok. Prints one line per
failure and "ok N rollbacks, P50 us p50, P99 us p99" (the rollback jobs'
own pause_ns) at the end; exits 1 on the first failure.

With "until" (the program marked with --hold): each iteration sends one
command and asks for `rollback --until read:0`, which runs it: the "got"
line must be the mark's, and the event what the command does: crashed
with SIGSEGV at 0x10 ("c"), SIGABRT ("a"), SIGSEGV ("o", the stack;
"C", in a new thread),
exited with status 3 ("e"), else reached read(0) again. RBLOOP_STOPS set:
each run's "stops" must be that ("notified" under run --until-point).

With "tree" (tests/workloads/rb_tree, a tree marked with --hold): each
iteration runs one command with `rollback --until read:0`, whose event
must be what it does (the child's crash "S", its death by the parent's
SIGTERM "K", its exit "x", else the parent's next read), then "n" the same way: its "hashes" line must be the mark's,
both processes' memory and counts.
"""
import json
import os
import random
import socket
import sys
import time


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def call(self, cmd, args=None):
        self.s.sendall(json.dumps({"id": 1, "cmd": cmd, "args": args or {}}).encode() + b"\n")
        r = json.loads(self.f.readline())
        if not r.get("ok"):
            raise SystemExit(f"{cmd}: {r.get('error')}")
        return r["result"]


def lines(path):
    with open(path) as f:
        return f.read().splitlines()


def wait_lines(path, n, what):
    deadline = time.monotonic() + 30
    while True:
        v = lines(path)
        if len(v) >= n:
            return v
        if time.monotonic() > deadline:
            raise SystemExit(f"no answer to {what!r} within 30 s: {v[-3:]}")
        time.sleep(0.0005)


def wait_job(c, jid):
    """The job's result, asked once: memvisor answers at its end."""
    while True:
        j = c.call("job", {"id": jid, "wait_ms": 60000})
        if j["state"] == "done":
            return j["result"]
        if j["state"] != "running":
            raise SystemExit(f"job {jid} {j['state']}: {j.get('error')}")


def pick(rng, cmds):
    """A command of cmds; "w" with its seed and page count, "W" its seed."""
    cmd = rng.choice(cmds)
    if cmd == "W":
        return f"W {rng.randint(1, 1 << 30)}"
    return f"w {rng.randint(1, 1 << 30)} {rng.randint(1, 200)}" if cmd == "w" else cmd


def summary(pauses, events=None):
    pauses = sorted(pauses)
    p = lambda q: pauses[min(len(pauses) - 1, int(q * len(pauses)))]
    line = f"ok {len(pauses)} rollbacks, {p(0.5):.0f} us p50, {p(0.99):.0f} us p99"
    if events is not None:
        line += "; " + ", ".join(f"{k} {v}" for k, v in sorted(events.items()))
    print(line)


def expect(cmd, ev):
    """What rollback --until must report after cmd, or None when it did."""
    want = {"c": ("crashed", 11), "a": ("crashed", 6), "o": ("crashed", 11),
            "C": ("crashed", 11), "e": ("exited", None)}.get(cmd[0], ("reached", None))
    if ev["event"] != want[0]:
        return f"{want[0]} expected"
    if want[0] == "crashed" and ev["signal"] != want[1]:
        return f"signal {want[1]} expected"
    if cmd == "c" and ev.get("addr") != 0x10:
        return "address 0x10 expected"
    if want[0] == "exited" and ev["status"] != 3:
        return "status 3 expected"
    if want[0] == "reached" and (ev["syscall"] != "read" or ev["arg0"] != 0):
        return "read(0) expected"
    return None


def until_run(c, w, cmd):
    """Write cmd, then rollback --until read:0: the job's result."""
    w.write(cmd + "\n")
    w.flush()
    return wait_job(c, c.call("rollback", {"until": "read:0", "timeout_ms": 30000})["job"])


def check_run(i, cmd, r, bad, pauses, events):
    """Stop at the first run that did not give what cmd does (bad), was
    not watched as RBLOOP_STOPS says, or left the program running."""
    ev = r["until"]
    stops = os.environ.get("RBLOOP_STOPS")
    if not bad and stops and ev.get("stops") != stops:
        bad = f"stops {stops} expected"
    if bad or not r["held"]:
        print(f"iteration {i}: {cmd!r} gave {ev} (held {r['held']}): {bad or 'held expected'}")
        sys.exit(1)
    events[ev["event"]] = events.get(ev["event"], 0) + 1
    pauses.append(r["pause_ns"] / 1000)


def until_loop(c, w, out, n, rng, cmds):
    pauses, want, events = [], None, {}
    for i in range(n):
        cmd = pick(rng, cmds)
        before = len(lines(out))
        r = until_run(c, w, cmd)
        v = wait_lines(out, before + 1, cmd)
        got = v[before]
        want = want or got
        if got != want:
            print(f"iteration {i}: after the rollback '{got}', the mark had '{want}'")
            sys.exit(1)
        check_run(i, cmd, r, expect(cmd, r["until"]), pauses, events)
    return pauses, events


def tree_expect(cmd, ev, parent, kid):
    """What rollback --until of rb_tree's tree must report after cmd."""
    got = (ev["event"], ev.get("pid"))
    if cmd == "S":
        ok = got + (ev.get("signal"), ev.get("addr")) == ("crashed", kid, 11, 0x10)
    elif cmd == "K":
        ok = got + (ev.get("signal"), ev.get("sender")) == ("crashed", kid, 15, parent)
    elif cmd == "x":  # the parent waits for it before its next read
        ok = got == ("exited", kid)
    else:
        ok = got + (ev.get("tid"), ev.get("syscall"), ev.get("arg0")) == (
            "reached", parent, parent, "read", 0)
    return None if ok else "not what it does"


def tree_loop(c, w, out, n, rng, cmds):
    ready = [x for x in lines(out) if x.startswith("ready ")][0].split()
    parent, kid = int(ready[1]), int(ready[2])
    pauses, want, events = [], None, {}
    for i in range(n):
        for cmd in (pick(rng, cmds), "n"):
            before = len(lines(out))
            r = until_run(c, w, cmd)
            check_run(i, cmd, r, tree_expect(cmd, r["until"], parent, kid), pauses, events)
        got = [x for x in lines(out)[before:] if x.startswith("hashes ")][:1]
        want = want or got
        if not got or got != want:
            print(f"iteration {i}: after the rollback {got}, the mark had {want}")
            sys.exit(1)
    return pauses, events


def main():
    sock, fifo, out, n, seed = sys.argv[1:6]
    cmds = (sys.argv[6] if len(sys.argv) > 6 else "w,m,u,p,z,b,s,t,f,x").split(",")
    mode = sys.argv[7] if len(sys.argv) > 7 else ""
    rng = random.Random(int(seed))
    c = Conn(sock)
    if mode in ("until", "tree"):
        with open(fifo, "w") as w:
            loop = until_loop if mode == "until" else tree_loop
            summary(*loop(c, w, out, int(n), rng, cmds))
        return
    pauses = []
    want = None
    with open(fifo, "w") as w:
        for i in range(int(n)):
            for k in range(rng.randint(1, 3)):
                cmd = pick(rng, cmds)
                before = len(lines(out))
                w.write(cmd + "\n")
                w.flush()
                v = wait_lines(out, before + 2, cmd)
                got = v[before]
                if not got.startswith("got "):
                    raise SystemExit(f"iteration {i}: {cmd!r} answered {got!r}")
                if k == 0:
                    want = want or got
                    if got != want:
                        print(f"iteration {i}: after the rollback '{got}', the mark had '{want}'")
                        sys.exit(1)
            r = wait_job(c, c.call("rollback")["job"])
            pauses.append(r["pause_ns"] / 1000)
    summary(pauses)


main()
