#!/usr/bin/env python3
"""ctlstorm.py SOCKET CLIENTS SECONDS PID: CLIENTS concurrent control
clients hammer status, regions and events for SECONDS. memvisor serves 64
clients at once: a client refused with "busy" reconnects a little later.
Prints "ctlstorm ok REQUESTS EVENTS BUSY" or the first failure and exits 1."""
import json
import socket
import sys
import threading
import time

path, nclients, secs, pid = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
errors, counts, events, busy = [], [0], [0], [0]
lock = threading.Lock()


def connect(end):
    """A connection memvisor accepted (not refused as busy), or None."""
    while time.time() < end:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        f = s.makefile("rb")
        try:
            s.sendall(b'{"id":"hello","cmd":"hello"}\n')
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed before our request: read why
        try:
            line = f.readline()
        except ConnectionResetError:
            line = b""  # closed with our request unread
        r = json.loads(line) if line else {"ok": False, "error": {"code": "busy"}}
        if r.get("ok"):
            return s, f
        if r["error"]["code"] != "busy":
            raise RuntimeError("refused: %r" % r)
        with lock:
            busy[0] += 1
        s.close()
        time.sleep(0.05)
    return None


def client(i):
    try:
        end = time.time() + secs
        conn = connect(end)
        if conn is None:
            return
        s, f = conn
        if i % 10 == 0:  # a tenth subscribe to events and just read
            s.sendall(b'{"id":0,"cmd":"events"}\n')
            json.loads(f.readline())
            s.settimeout(0.5)
            n = 0
            while time.time() < end:
                try:
                    line = f.readline()
                except (socket.timeout, OSError):
                    continue
                if not line:
                    break
                json.loads(line)
                n += 1
            with lock:
                events[0] += n
            return
        n = 0
        cmds = [b'{"id":%d,"cmd":"status"}\n', b'{"id":%d,"cmd":"regions","args":{"pid":' + str(pid).encode() + b',"summary":true}}\n',
                b'{"id":%d,"cmd":"ps"}\n']
        while time.time() < end:
            req = cmds[n % len(cmds)] % n
            s.sendall(req)
            while True:
                r = json.loads(f.readline())
                if "event" in r:
                    continue
                break
            if not r.get("ok") or r.get("id") != n:
                raise RuntimeError("bad reply %r" % r)
            n += 1
        with lock:
            counts[0] += n
    except Exception as e:  # noqa: BLE001 - any failure fails the storm
        with lock:
            errors.append("client %d: %s" % (i, e))


threads = [threading.Thread(target=client, args=(i,)) for i in range(nclients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    print("\n".join(errors[:5]))
    sys.exit(1)
print("ctlstorm ok", counts[0], events[0], busy[0])
