#!/usr/bin/env python3
"""Check a Prometheus text exposition with the real parser, and print it as
JSON for the tests to look into.

  promcheck.py FILE     (- for stdin)

Parses FILE with prometheus_client (Debian: python3-prometheus-client) and
checks what that parser lets pass: every sample line belongs to a family
declared by # HELP and # TYPE before it, no series appears twice, label
values are well formed, and each histogram's buckets are sorted by le,
cumulative, end with +Inf, and +Inf equals _count (each series of a
histogram, by its labels other than le, on its own).

Prints {"FAMILY": {"type": T, "samples": [[NAME, {LABELS}, VALUE], ...]}}
(family names as the parser gives them: a counter's without _total).
Exit 0 if good, 1 with the problems on stderr, 77 when prometheus_client
is missing (the test skips).
"""
import json
import math
import re
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit(77)

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(\{{(?:{LABEL}(?:,{LABEL})*)?\}})? (\S+)$")


def lines_check(text):
    """What the format asks of each line, beyond the parser."""
    bad, declared, seen = [], {}, set()
    helped = set()
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            if name not in helped:
                bad.append(f"line {n}: TYPE of {name} before its HELP")
            if name in declared:
                bad.append(f"line {n}: {name} declared twice")
            declared[name] = typ
            continue
        m = SAMPLE.match(line)
        if not m:
            bad.append(f"line {n}: not a sample line: {line!r}")
            continue
        name, labels, value = m.groups()
        fam = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and declared.get(name[: -len(suffix)]) == "histogram":
                fam = name[: -len(suffix)]
        if fam not in declared:
            bad.append(f"line {n}: {name} has no # TYPE before it")
        if (name, labels) in seen:
            bad.append(f"line {n}: series {name}{labels or ''} twice")
        seen.add((name, labels))
        try:
            float(value)
        except ValueError:
            bad.append(f"line {n}: value {value!r}")
    if not text.endswith("\n"):
        bad.append("the last line has no newline")
    return bad


def histogram_check(fam):
    """Each series of the histogram (its labels but le) on its own."""
    bad = []
    series = {}
    for s in fam.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(key, ([], []))
        if s.name.endswith("_bucket"):
            series[key][0].append((s.labels["le"], s.value))
        elif s.name.endswith("_count"):
            series[key][1].append(s.value)
    for key, (buckets, count) in series.items():
        what = fam.name + ("{" + ",".join(f"{k}={v}" for k, v in key) + "}" if key else "")
        les = [float(le) for le, _ in buckets]
        if les != sorted(les) or not les or not math.isinf(les[-1]):
            bad.append(f"{what}: le not sorted or no +Inf: {les}")
        vals = [v for _, v in buckets]
        if vals != sorted(vals):
            bad.append(f"{what}: buckets not cumulative: {vals}")
        if len(count) != 1 or not buckets or vals[-1] != count[0]:
            bad.append(f"{what}: +Inf {vals[-1:]} != _count {count}")
    return bad


def main():
    text = sys.stdin.read() if sys.argv[1] == "-" else open(sys.argv[1]).read()
    bad = lines_check(text)
    out = {}
    for fam in text_string_to_metric_families(text):
        if fam.type == "histogram":
            bad += histogram_check(fam)
        out[fam.name] = {
            "type": fam.type,
            "samples": [[s.name, s.labels, s.value] for s in fam.samples],
        }
    if bad:
        print("\n".join(bad), file=sys.stderr)
        sys.exit(1)
    print(json.dumps(out))


main()
