#!/usr/bin/env python3
"""bench/reload_report.py: numbers and plots for bench/reload.sh.

  run CONFIG CSV OUT JOB EVICT   one run -> one JSON line
  fill JOB MEMCPY                the fill-bandwidth case -> one JSON line
  report JSONL OUTDIR MIB RATE   medians as markdown; an SVG per CSV kept
"""
import json
import statistics
import sys


def read_csv(path):
    samples, marks = [], {}
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            name, t = line[1:].split(",")
            marks[name] = float(t)
        else:
            t, r = line.split(",")
            samples.append((float(t), float(r)))
    return samples, marks


def mean_rate(samples, a, b):
    v = [r for t, r in samples if a < t <= b]
    return statistics.mean(v) if v else 0.0


def min_window(samples, a, b):
    """The lowest rate over a 1 s window in (a, b]: how noisy the machine is."""
    v = [mean_rate(samples, t, t + 1) for t in range(int(a), int(b) - 1)]
    return min(v) if v else 0.0


def phases(out_path):
    p = {}
    for line in open(out_path):
        w = line.split()
        if w and w[0] == "phase":
            p[w[1]] = {"p50": int(w[3]), "p99": int(w[5]), "p999": int(w[7])}
    return p


def last_json(path):
    d = json.load(open(path))
    return d.get("result", d)


def run(config, csv, out, job, evict):
    samples, marks = read_csv(csv)
    steady = mean_rate(samples, 1.0, marks["evict"])
    r0 = marks["reload"]
    j, e = last_json(job), last_json(evict)
    ph = phases(out)
    print(json.dumps({
        "kind": "run", "config": config, "steady": steady,
        "w5": mean_rate(samples, r0, r0 + 5) / steady,
        "w20": mean_rate(samples, r0, r0 + 20) / steady,
        "after": mean_rate(samples, marks["after"], 1e9) / steady,
        "lat_steady": ph.get("steady"), "lat_reload": ph.get("reload"),
        "load_s": j["load_ns"] / 1e9, "verify_s": j["verify_ns"] / 1e9, "faults": j["faults"],
        "fault_p50_us": j["fault_p50_ns"] / 1e3, "fault_p99_us": j["fault_p99_ns"] / 1e3,
        "read_rate": j["read_rate"], "pause_ms": e["pause_ns"] / 1e6,
        "cpu_per_gib": j.get("cpu_ns_per_gib", 0) / 1e9,
        "evicted": e["evicted"]["bytes"],
        "huge_mib": j.get("huge_bytes", 0) / 2**20,
        "huge_restored_mib": j.get("huge_restored_bytes", 0) / 2**20,
        "steady_min": min_window(samples, 1.0, marks["evict"]) / steady,
        "load1": float(open("/proc/loadavg").read().split()[0])}))


def fill(job, memcpy):
    j = last_json(job)
    m = float(open(memcpy).read().split()[1])
    print(json.dumps({"kind": "fill", "fill_gbs": j["bytes"] / j["load_ns"],
                      "memcpy_gbs": m, "load_s": j["load_ns"] / 1e9,
                      "cpu_per_gib": j.get("cpu_ns_per_gib", 0) / 1e9}))


def svg(csv, path, title):
    samples, marks = read_csv(csv)
    if not samples:
        return
    W, H, L, B = 720, 300, 60, 30
    tmax = max(t for t, _ in samples)
    rmax = max(r for _, r in samples) * 1.1 or 1
    x = lambda t: L + (W - L - 10) * t / tmax
    y = lambda r: H - B - (H - B - 20) * r / rmax
    pts = " ".join(f"{x(t):.1f},{y(r):.1f}" for t, r in samples)
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="monospace" font-size="11">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L}" y="14">{title}</text>',
         f'<line x1="{L}" y1="{H-B}" x2="{W-10}" y2="{H-B}" stroke="black"/>',
         f'<line x1="{L}" y1="20" x2="{L}" y2="{H-B}" stroke="black"/>',
         f'<text x="{L-55}" y="24">{rmax/1e6:.1f}M/s</text>',
         f'<text x="{W-60}" y="{H-8}">{tmax:.0f} s</text>',
         f'<polyline fill="none" stroke="steelblue" points="{pts}"/>']
    for name, t in marks.items():
        s.append(f'<line x1="{x(t):.1f}" y1="20" x2="{x(t):.1f}" y2="{H-B}" stroke="red" stroke-dasharray="4"/>')
        s.append(f'<text x="{x(t)+3:.1f}" y="32" fill="red">{name}</text>')
    s.append("</svg>")
    open(path, "w").write("\n".join(s) + "\n")


def med(v):
    return statistics.median(v) if v else float("nan")


def cpu(v):
    """Median loader+workers CPU seconds per GiB loaded, or - (older builds)."""
    c = [r["cpu_per_gib"] for r in v if r.get("cpu_per_gib") is not None]
    return f"{med(c):.2f}" if c else "-"


def report(jsonl, outdir, mib, rate):
    rows = [json.loads(l) for l in open(jsonl) if l.strip()]
    runs = [r for r in rows if r["kind"] == "run"]
    print(f"{mib} MiB, reload --rate {rate} MB/s; medians of {len(runs) // max(1, len({r['config'] for r in runs}))} runs\n")
    print("| config | steady calls/s | 0-5 s | 0-20 s | after reload | p50/p99/p99.9 steady (ns) | p50/p99/p99.9 reload (ns) | full reload (s) | faults | fault p50/p99 (us) | evict pause (ms) | huge MiB before / after | steady: worst 1 s | load avg | loader+workers CPU s/GiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in dict.fromkeys(r["config"] for r in runs):
        v = [r for r in runs if r["config"] == c]
        ls = lambda k, q: med([r[k][q] for r in v if r[k]])
        name = f"{c.rstrip('w')} hot" + (" + walker" if c.endswith("w") else "")
        print(f"| {name} | {med([r['steady'] for r in v]):,.0f} | {med([r['w5'] for r in v]):.1%} | "
              f"{med([r['w20'] for r in v]):.1%} | {med([r['after'] for r in v]):.1%} | {ls('lat_steady','p50'):.0f}/{ls('lat_steady','p99'):.0f}/{ls('lat_steady','p999'):.0f} | "
              f"{ls('lat_reload','p50'):.0f}/{ls('lat_reload','p99'):.0f}/{ls('lat_reload','p999'):.0f} | "
              f"{med([r['load_s'] for r in v]):.2f} | {med([r['faults'] for r in v]):.0f} | "
              f"{med([r['fault_p50_us'] for r in v]):.0f}/{med([r['fault_p99_us'] for r in v]):.0f} | "
              f"{med([r['pause_ms'] for r in v]):.0f} | "
              f"{med([r.get('huge_mib', 0) for r in v]):.0f} / {med([r.get('huge_restored_mib', 0) for r in v]):.0f} | "
              f"{med([r.get('steady_min', 0) for r in v]):.1%} | {med([r.get('load1', 0) for r in v]):.1f} | "
              f"{cpu(v)} |")
        svg(f"{outdir}/reload-{c}.csv", f"{outdir}/reload-{c}.svg", f"getcpu calls/s, {name}, {mib} MiB, --rate {rate}")
    for r in rows:
        if r["kind"] == "fill":
            print(f"\nfill from a page-cache-resident image: {r['fill_gbs']:.2f} GB/s "
                  f"({r['load_s']:.2f} s); memcpy into fresh memory: {r['memcpy_gbs']:.2f} GB/s "
                  f"({r['fill_gbs'] / r['memcpy_gbs']:.2f}x); loader+workers CPU {cpu([r])} s/GiB")


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"run": run, "fill": fill, "report": report}[cmd](*sys.argv[2:])
