#!/usr/bin/env python3
"""Talk to a memvisor control socket at the byte level, for the protocol
tests. Usage: ctlraw.py SOCKET ACTION [ARG...]

  send LINE...       send each line, print each reply line
  huge N LINE        send an N-byte line without newline... then "\\n", then LINE
  partial TEXT       send TEXT without newline and disconnect
  many N LINE        open N connections at once, send LINE on each, print
                     the number of ok replies
  slow-events N      subscribe, generate nothing, sleep N s without reading,
                     then read everything and print the dropped count seen
"""
import json
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
    else:
        sys.exit("unknown action " + action)


main()
