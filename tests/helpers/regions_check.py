#!/usr/bin/env python3
"""Compare memvisor's `regions` result (JSON on stdin) with the kernel's
/proc/PID/maps, line for line, and its committed bytes with smaps Rss
(within one page per region). Exit 0 when they agree; print every
difference otherwise."""
import json
import sys

PAGE = 4096


def maps(pid):
    out = []
    for line in open(f"/proc/{pid}/maps"):
        f = line.split(None, 5)
        start, end = (int(x, 16) for x in f[0].split("-"))
        path = f[5].strip() if len(f) > 5 else None
        out.append((start, end, f[1], int(f[2], 16), f[3], int(f[4]), path or None))
    return out


def smaps_rss(pid):
    rss, cur = {}, None
    for line in open(f"/proc/{pid}/smaps"):
        head = line.split(None, 1)[0]
        if "-" in head and not head.endswith(":"):
            cur = int(head.split("-")[0], 16)
        elif head == "Rss:":
            rss[cur] = int(line.split()[1]) * 1024
    return rss


def main():
    pid = int(sys.argv[1])
    res = json.load(sys.stdin)
    got = []
    for r in res["regions"]:
        perms = r["prot"] + ("s" if r["shared"] else "p")
        got.append((int(r["start"], 16), int(r["end"], 16), perms, r["offset"], r["dev"],
                    r["inode"], r["path"]))
    want = maps(pid)
    bad = 0
    if len(got) != len(want):
        print(f"region count: memvisor {len(got)}, kernel {len(want)}")
        bad += 1
    for g, w in zip(got, want):
        if g != w:
            print(f"memvisor {g}\nkernel   {w}")
            bad += 1
    rss = smaps_rss(pid)
    for r in res["regions"]:
        start = int(r["start"], 16)
        k = rss.get(start)
        if k is None:
            continue
        if abs(k - r["committed"]) > PAGE:
            print(f"committed at {r['start']}: memvisor {r['committed']}, smaps Rss {k}")
            bad += 1
    total = sum(r["end_"] if False else int(r["end"], 16) - int(r["start"], 16) for r in res["regions"])
    if total != res["mapped"]:
        print(f"mapped total {res['mapped']} != sum of sizes {total}")
        bad += 1
    sys.exit(1 if bad else 0)


main()
