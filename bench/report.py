#!/usr/bin/env python3
"""bench/report.py RAW: the markdown tables of bench/run.sh.

RAW holds one record a line, written by run.sh:
    meta KEY VALUE
    bench NAME UNIT CALLS LABEL...   (UNIT ns: ns/op of a loop; ms: wall time)
    run NAME nat|sup VALUE           (one a run, in repetition order)
    floor variant=V key=value ...    (one notif_floor line a variant and run)
    stats NAME COUNT SVC_TOTAL_NS SVC_P99_NS SVC_MAX_NS
                                     (one supervised run with --stats-json:
                                      notifications, memvisor's time from
                                      RECV to SEND)

Ratios are of medians. Differences (the cost of one notified call, epoll
against blocking RECV) are medians of differences taken within one
repetition: the two runs of a pair are adjacent in time, so the host's
slow phases, which last seconds here, hit both.
"""
import statistics
import sys
from collections import defaultdict

# The floor every notified call stands on: an emulated call, answered by a
# supervisor blocked in RECV with CPU-local wake-ups. Nothing built on user
# notifications answers faster.
FLOOR = "emul-block-sync"

TARGETS = {"pair": "<= 1.3x", "munmap": "call <= 1.1x floor",
           "mprotect": "call <= 1.1x floor", "getppid": "~1.0x", "true": "-"}


def load(path):
    d = {"meta": {}, "bench": [], "run": defaultdict(list),
         "floor": defaultdict(lambda: defaultdict(list)), "stats": {}}
    for line in open(path):
        kind, _, rest = line.rstrip("\n").partition(" ")
        f = rest.split()
        if kind == "meta":
            d["meta"][f[0]] = f[1]
        elif kind == "bench":
            d["bench"].append((f[0], f[1], f[2], " ".join(f[3:])))
        elif kind == "run" and len(f) == 3:
            d["run"][(f[0], f[1])].append(float(f[2]))
        elif kind == "floor":
            kv = dict(x.split("=", 1) for x in f)
            for k, v in kv.items():
                if k not in ("variant", "call", "wait"):
                    d["floor"][kv["variant"]][k].append(float(v))
        elif kind == "stats" and len(f) == 5:
            d["stats"][f[0]] = [float(x) for x in f[1:]]
    return d


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def paired(a, b):
    """Median of a[i] - b[i] over the repetitions both have."""
    return med([x - y for x, y in zip(a, b)])


def runs(d, name, mode):
    return d["run"].get((name, mode), [])


def floor_runs(d, variant, key="ns_per_op"):
    return d["floor"].get(variant, {}).get(key, [])


def floor_of(d, variant, key="ns_per_notif"):
    return med(floor_runs(d, variant, key))


def notifications(d, name):
    return int(d["stats"][name][0]) if name in d["stats"] else None


def per_call_ns(d, name, unit, calls):
    """Cost of one notified call, ns: supervised minus native, over the
    calls notified. For programs, memvisor's fixed start and exit (the
    `true` row) is taken out first when it was measured."""
    diff = paired(runs(d, name, "sup"), runs(d, name, "nat"))
    if unit == "ns":
        n = int(calls)
        return (diff / n if n else None), n
    n = notifications(d, name)
    if not n or name == "true":
        return None, n
    diff, base_n = diff * 1e6, 0
    if runs(d, "true", "sup"):
        diff -= paired(runs(d, "true", "sup"), runs(d, "true", "nat")) * 1e6
        base_n = notifications(d, "true") or 0
    return (diff / (n - base_n) if n > base_n else None), n


def spread(xs):
    """(max - min) / median: how far one run can be off."""
    return f"{(max(xs) - min(xs)) * 100 / med(xs):.0f}%" if xs else "-"


def fmt(x, spec, suffix=""):
    return "-" if x is None else format(x, spec) + suffix


def table_programs(d):
    reps = d["meta"].get("reps", "?")
    floor = floor_of(d, FLOOR)
    print(f"## native vs supervised (medians of {reps} runs)\n")
    print("| benchmark | native | supervised | ratio | target | notified calls "
          "| per call µs | ÷ floor | spread nat / sup |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---|")
    for name, unit, calls, label in d["bench"]:
        nat, sup = med(runs(d, name, "nat")), med(runs(d, name, "sup"))
        per, n = per_call_ns(d, name, unit, calls)
        scale, spec, suffix = (1e-3, ".2f", "µs/op") if unit == "ns" else (1, ".0f", "ms")
        ncol = f"{n}/op" if unit == "ns" else fmt(n, "d")
        print(f"| {label} ({suffix}) | {nat * scale:{spec}} | {sup * scale:{spec}} "
              f"| {sup / nat:.2f}x | {TARGETS.get(name, '<= 1.05x')} | {ncol} "
              f"| {fmt(per and per / 1e3, '.1f')} | {fmt(per and per / floor, '.2f', 'x')} "
              f"| {spread(runs(d, name, 'nat'))} / {spread(runs(d, name, 'sup'))} |")
    print()


def table_service(d):
    """Where the supervised time goes: memvisor's own handling (RECV to
    SEND) against the whole difference; the rest is the kernel's round trip
    and the wake-ups."""
    if not d["stats"]:
        return
    print("## memvisor's handling time, RECV to after SEND (one more supervised run, "
          "--stats-json)\n")
    print("| benchmark | notifications | handling total ms | mean µs | worst p99 µs "
          "| max µs |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, unit, calls, label in d["bench"]:
        if name not in d["stats"]:
            continue
        n, total, p99, mx = d["stats"][name]
        print(f"| {label} | {n:.0f} | {total / 1e6:.1f} | {total / n / 1e3 if n else 0:.1f} "
              f"| {p99 / 1e3:.0f} | {mx / 1e3:.0f} |")
    print()


def table_floor(d):
    print("## notification floor (notif_floor, no memvisor; medians of runs "
          "of 5 batches)\n")
    print("| variant | op µs | same op native µs | per notification µs | ops/s "
          "| SYNC_WAKE_UP used | spread of op |")
    print("|---|---:|---:|---:|---:|---|---|")
    for v in sorted(d["floor"], key=lambda v: (v.split("-")[0] != "emul", v)):
        op = floor_of(d, v, "ns_per_op")
        print(f"| {v} | {op / 1e3:.2f} | {floor_of(d, v, 'native_ns') / 1e3:.2f} "
              f"| {floor_of(d, v) / 1e3:.2f} | {1e9 / op:.0f} "
              f"| {'yes' if floor_of(d, v, 'sync_used') else 'no'} "
              f"| {spread(floor_runs(d, v))} |")
    print()


def epoll_line(d, call, wake, pair_sup):
    """epoll against blocking RECV, per notification, paired by run."""
    e, b = floor_runs(d, f"{call}-epoll-{wake}"), floor_runs(d, f"{call}-block-{wake}")
    if not e or not b:
        return
    calls = floor_of(d, f"{call}-block-{wake}", "calls_per_op")
    diff = paired(e, b) / calls
    line = (f"- {call}-*-{wake}: epoll then RECV costs {diff / 1e3:+.2f} µs a notification "
            f"against a blocking RECV ({diff * calls * 100 / med(b):+.0f}% of the op)")
    if call == "cont" and pair_sup == pair_sup:
        line += f"; twice a pair, {diff * 2 * 100 / pair_sup:+.0f}% of memvisor's supervised pair"
    print(line)


def summary(d):
    floor = floor_of(d, FLOOR)
    wake = "sync" if d["meta"].get("mv_sync") == "set" else "async"
    own = f"cont-block-{wake}"
    print("## summary\n")
    print(f"- floor ({FLOOR}): {floor / 1e3:.2f} µs a notification (round trip "
          f"{floor_of(d, FLOOR, 'ns_per_op') / 1e3:.2f} µs minus a native getppid)")
    print(f"- memvisor's listener SYNC_WAKE_UP: {d['meta'].get('mv_sync', '?')}; "
          f"its notify thread blocks in RECV: it compares with {own}")
    for name, calls in (("pair", 2), ("munmap", 1), ("mprotect", 1)):
        if not runs(d, name, "sup"):
            continue
        if (notifications(d, name) or 0) < 100:
            # The policy let these calls through in the kernel (the
            # default policy does): there is no notified call to cost.
            ratio = med(runs(d, name, "sup")) / med(runs(d, name, "nat"))
            print(f"- memvisor, {name}: not notified (allowed in the kernel by the policy); "
                  f"supervised/native {ratio:.2f}x")
            continue
        per, _ = per_call_ns(d, name, "ns", calls)
        print(f"- memvisor, {name}: {per / 1e3:.2f} µs a notified call = "
              f"{per / floor:.2f}x the floor (target <= 1.1x)")
    pair_sup = med(runs(d, "pair", "sup"))
    if pair_sup == pair_sup and floor_runs(d, own):
        ratio = med([m / f for m, f in zip(runs(d, "pair", "sup"), floor_runs(d, own))])
        print(f"- memvisor's supervised pair / the {own} pair: {ratio:.2f}x "
              f"(memvisor's own work on top of the mechanism it uses)")
    for call in ("emul", "cont"):
        for w in ("sync", "async"):
            epoll_line(d, call, w, pair_sup)
    print()


def main():
    d = load(sys.argv[1])
    table_programs(d)
    table_service(d)
    table_floor(d)
    summary(d)


if __name__ == "__main__":
    main()
