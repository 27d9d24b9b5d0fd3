#!/usr/bin/env python3
"""Talk to a memvisor control socket directly, without memvisor ctl: at
the byte level for the protocol tests, or in one connection where a ctl
process a request would be too slow. Usage: ctlraw.py SOCKET ACTION [ARG...]

  send LINE...       send each line, print each reply line
  pipe LINE...       send every line at once, then print each reply line
                     after the milliseconds it took since they were sent
  leave LINE         send LINE and disconnect without reading its reply
  huge N LINE        send an N-byte line without newline... then "\\n", then LINE
  partial TEXT       send TEXT without newline and disconnect
  many N LINE        open N connections at once, send LINE on each, print
                     the number of ok replies
  slow-events N      subscribe, generate nothing, sleep N s without reading,
                     then read everything and print the dropped count seen
  checkpoint-kill ARGS PID
                     start a checkpoint with ARGS (a JSON object), print its
                     job id, and SIGKILL PID as soon as the job copies
  checkpoints N DIR  N checkpoints one after another into DIR/img0...,
                     each waited for and its image removed
"""
import json
import os
import shutil
import signal
import socket
import sys
import time


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def readline(f):
    line = f.readline()
    if not line:
        print("EOF")
        sys.exit(0)
    return line.decode().rstrip("\n")


class Conn:
    """One connection; call() sends a request and returns its reply."""

    def __init__(self, path):
        self.s = connect(path)
        self.f = self.s.makefile("rb")

    def call(self, cmd, args=None):
        req = {"id": 1, "cmd": cmd, "args": args or {}}
        self.s.sendall(json.dumps(req).encode() + b"\n")
        return json.loads(self.f.readline())


def checkpoint_kill(path, args, pid):
    # One process starts the job and watches it: started after the
    # checkpoint, on a machine whose disk the checkpoint saturates, a
    # python process can take a second to start, and a ctl process a
    # poll misses copy phases of half a second.
    c = Conn(path)
    job = c.call("checkpoint", json.loads(args))["result"]["job"]
    print(job)
    deadline = time.time() + 30
    while time.time() < deadline:
        r = c.call("job", {"id": job})["result"]
        if r["phase"] == "copying":
            os.kill(int(pid), signal.SIGKILL)
            return
        if r["state"] != "running":
            sys.exit("the job ended before copying: %s" % r)
        time.sleep(0.005)
    sys.exit("the job never reached copying")


def checkpoints(path, n, top):
    c = Conn(path)
    for i in range(n):
        d = "%s/img%d" % (top, i)
        r = c.call("checkpoint", {"dir": d})
        assert r["ok"], r
        while True:
            j = c.call("job", {"id": r["result"]["job"]})["result"]
            if j["state"] != "running":
                break
            time.sleep(0.01)
        assert j["state"] == "done", j
        shutil.rmtree(d)


def raw_lines(s):
    """Lines read from socket s with recv; ends at EOF or a timeout."""
    buf = b""
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line + b"\n"
        try:
            chunk = s.recv(65536)
        except (socket.timeout, OSError):
            return
        if not chunk:
            return
        buf += chunk


def main():
    path, action, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if action == "send":
        s = connect(path)
        f = s.makefile("rb")
        for line in args:
            s.sendall(line.encode() + b"\n")
            print(readline(f))
    elif action == "pipe":
        s = connect(path)
        f = s.makefile("rb")
        t0 = time.monotonic()
        s.sendall("".join(line + "\n" for line in args).encode())
        for _ in args:
            line = readline(f)
            print(f"{(time.monotonic() - t0) * 1000:.0f} {line}")
    elif action == "leave":
        s = connect(path)
        s.sendall(args[0].encode() + b"\n")
        time.sleep(0.05)
        s.close()
    elif action == "huge":
        s = connect(path)
        f = s.makefile("rb")
        n = int(args[0])
        chunk = b"x" * 65536
        sent = 0
        while sent < n:
            s.sendall(chunk[: min(len(chunk), n - sent)])
            sent += min(len(chunk), n - sent)
        s.sendall(b"\n")
        print(readline(f))
        s.sendall(args[1].encode() + b"\n")
        print(readline(f))
    elif action == "partial":
        s = connect(path)
        s.sendall(args[0].encode())
        s.close()
        print("closed")
    elif action == "many":
        n = int(args[0])
        socks = [connect(path) for _ in range(n)]
        for s in socks:
            s.sendall(args[1].encode() + b"\n")
        ok = 0
        for s in socks:
            line = s.makefile("rb").readline()
            if json.loads(line).get("ok"):
                ok += 1
        print(ok)
    elif action == "slow-events":
        s = connect(path)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b'{"id":1,"cmd":"events"}\n')
        lines = raw_lines(s)
        print(next(lines).decode().rstrip("\n"))
        time.sleep(float(args[0]))
        s.settimeout(2.0)
        dropped = 0
        # Raw recv, not a buffered file: a timeout inside a buffered
        # readline may lose or cut a line (seen with Python 3.11.2).
        for line in lines:
            e = json.loads(line)
            if e.get("event") == "dropped":
                dropped += e["count"]
                break
        print("dropped", dropped)
    elif action == "checkpoint-kill":
        checkpoint_kill(path, args[0], args[1])
    elif action == "checkpoints":
        checkpoints(path, int(args[0]), args[1])
    else:
        sys.exit("unknown action " + action)


main()
