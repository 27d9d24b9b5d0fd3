#!/usr/bin/env python3
"""Check the JSON documents on stdin (one per line, or one indented
document) for the protocol's one form of times and rates
(docs/protocol.md, "Times and rates"): no JSON real anywhere, and every
member that names a time or a rate holds an integer; a time's name ends
in _ns (a "start" or "end" that is an address string is not a time).
Prints each offence as PATH: what, and exits 1 if there is one."""
import json
import sys

TIMEISH = ("time", "uptime", "elapsed", "started", "start", "end", "duration", "loaded")


def walk(v, path, bad):
    if isinstance(v, float):
        bad.append(f"{path}: a real ({v!r})")
    elif isinstance(v, dict):
        for k, x in v.items():
            number = isinstance(x, (int, float)) and not isinstance(x, bool)
            if number and (k in TIMEISH or k.endswith("_s")):
                bad.append(f"{path}.{k}: a time not in integer nanoseconds (*_ns)")
            if (k.endswith("_ns") or k in ("rate", "read_rate")) and x is not None \
                    and not isinstance(x, int) and not isinstance(x, dict):
                bad.append(f"{path}.{k}: not an integer ({x!r})")
            walk(x, f"{path}.{k}", bad)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            walk(x, f"{path}[{i}]", bad)


def main():
    text = sys.stdin.read()
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = [json.loads(line) for line in text.splitlines() if line.strip()]
    bad = []
    for i, d in enumerate(docs):
        walk(d, f"doc{i}", bad)
    for b in bad:
        print(b)
    if not docs:
        print("no JSON document")
        return 1
    return 1 if bad else 0


sys.exit(main())
