#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a synthetic trace file for the graph benchmarks (tools/bench/graph.sh).

    graph-gen.py FORMAT TRACES TASKS OUT [SEED]

FORMAT is zipkin or otlp; each of the TRACES traces has TASKS tasks: a root and a chain of
children two deep, spread over three services on three hosts, with one annotation (event)
on every task and a few tags.  Times start at 2026-01-01 and move 1 ms per trace, so a store
filled with them has realistic per-process concurrency.  Deterministic for a seed.
"""
import json
import random
import sys

SERVICES = ["frontend", "cart", "db"]
NAMES = ["GET /cart", "load", "query", "render", "auth"]
T0_US = 1767225600 * 1000000  # 2026-01-01T00:00:00Z


def trace_tasks(rng, t, tasks):
    """(id, parent, service, name, start_us, dur_us) of one trace."""
    tid = "%032x" % rng.getrandbits(128)
    start = T0_US + t * 1000
    out = []
    for i in range(tasks):
        sid = "%016x" % (rng.getrandbits(63) | 1)
        parent = out[(i - 1) // 2][0] if i else None
        svc = SERVICES[i % len(SERVICES)]
        name = NAMES[i % len(NAMES)]
        s = start + i * 10
        d = max(1, 10000 - i * 100 + rng.randint(0, 500))
        out.append((sid, parent, svc, name, s, d))
    return tid, out


def zipkin(rng, traces, tasks, f):
    f.write("[")
    first = True
    for t in range(traces):
        tid, spans = trace_tasks(rng, t, tasks)
        for sid, parent, svc, name, s, d in spans:
            span = {"traceId": tid, "id": sid, "name": name, "timestamp": s, "duration": d,
                    "kind": "SERVER",
                    "localEndpoint": {"serviceName": svc, "ipv4": "10.0.0.%d" % (SERVICES.index(svc) + 1)},
                    "annotations": [{"timestamp": s + d // 2, "value": "cache.miss"}],
                    "tags": {"http.method": "GET", "component": "bench"}}
            if parent:
                span["parentId"] = parent
            f.write(("" if first else ",") + json.dumps(span, separators=(",", ":")))
            first = False
    f.write("]\n")


def otlp(rng, traces, tasks, f):
    # one resourceSpans per service, as a collector batches them
    by_svc = {s: [] for s in SERVICES}
    for t in range(traces):
        tid, spans = trace_tasks(rng, t, tasks)
        for sid, parent, svc, name, s, d in spans:
            span = {"traceId": tid, "spanId": sid, "name": name, "kind": 2,
                    "startTimeUnixNano": str(s * 1000), "endTimeUnixNano": str((s + d) * 1000),
                    "attributes": [{"key": "http.method", "value": {"stringValue": "GET"}}],
                    "events": [{"timeUnixNano": str((s + d // 2) * 1000), "name": "cache.miss"}],
                    "status": {}}
            if parent:
                span["parentSpanId"] = parent
            by_svc[svc].append(span)
    req = {"resourceSpans": [
        {"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": svc}},
            {"key": "host.name", "value": {"stringValue": "host-%s" % svc}}]},
         "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}
        for svc, spans in by_svc.items()]}
    json.dump(req, f, separators=(",", ":"))
    f.write("\n")


def main():
    if len(sys.argv) not in (5, 6) or sys.argv[1] not in ("zipkin", "otlp"):
        print(__doc__, file=sys.stderr)
        return 2
    fmt, traces, tasks, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(int(sys.argv[5]) if len(sys.argv) == 6 else 1)
    with open(out, "w") as f:
        (zipkin if fmt == "zipkin" else otlp)(rng, traces, tasks, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
