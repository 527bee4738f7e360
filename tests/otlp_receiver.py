#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A small OTLP/HTTP traces receiver for the forwarding tests (tests/unit/test_graph_forward.c).

It serves POST /v1/traces with Content-Type application/json (OTLP JSON
ExportTraceServiceRequest), one request at a time, and appends to --record one line per span
it accepts: "TRACEID SPANID PARENTSPANID NEVENTS NLINKS" (PARENTSPANID "-" for a root).  A
span is recorded only in a request answered 200, and before the answer is written, so what
the file holds is exactly what the sender was told was taken.  --log gets one line per
request: its number, the status answered and the spans in it.

POST /v1/metrics (OTLP JSON ExportMetricsServiceRequest) is checked (every histogram's
bucketCounts has one more entry than its strictly increasing explicitBounds, and sums to its
count) and each data point appended to RECORD.metrics as
"RESOURCE-SERVICE METRIC SERVICE|NAME|OTHER-ATTRS VALUE" (VALUE: a histogram's count, a
sum's asInt).

Scripted faults, in the order requests arrive:
  --fail CODE:N     answer the first N requests CODE (with Retry-After: --retry-after when
                    CODE is 429 or 503) and record nothing of them;
  --exit-after N    after answering N requests 200, close the listening socket and exit 0
                    (a sender then finds the port refusing connections).

--port 0 binds any free port; the port is written to --port-file once listening.  A request
that is not a POST to /v1/traces, or whose body is not OTLP JSON, is answered 400 and
recorded nowhere (its line in --log says why).
"""
import argparse
import http.server
import json
import os
import sys


def spans_of(req):
    out = []
    for rs in req.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                out.append(sp)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--record", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--fail", default=None)
    ap.add_argument("--retry-after", default="1")
    ap.add_argument("--exit-after", type=int, default=0)
    a = ap.parse_args()

    fail_code, fail_n = 0, 0
    if a.fail:
        c, n = a.fail.split(":")
        fail_code, fail_n = int(c), int(n)
    state = {"n": 0, "ok": 0}
    rec = open(a.record, "a")
    met = open(a.record + ".metrics", "a")
    log = open(a.log, "a")

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, code, body=b"{}", extra=None):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def metrics(self, n, body):
            """Checks a metrics request and records its data points; the answer's code."""
            try:
                req = json.loads(body)
                lines = []
                for rm in req["resourceMetrics"]:
                    res = {a["key"]: a["value"].get("stringValue")
                           for a in rm["resource"]["attributes"]}
                    for sm in rm["scopeMetrics"]:
                        for m in sm["metrics"]:
                            kind = "histogram" if "histogram" in m else "sum"
                            for p in m[kind]["dataPoints"]:
                                at = {a["key"]: a["value"]["stringValue"]
                                      for a in p["attributes"]}
                                if kind == "histogram":
                                    bc = [int(c) for c in p["bucketCounts"]]
                                    b = p["explicitBounds"]
                                    if len(bc) != len(b) + 1 or sum(bc) != int(p["count"]) \
                                            or b != sorted(b) or len(set(b)) != len(b):
                                        raise ValueError("inconsistent histogram")
                                    value = p["count"]
                                else:
                                    value = p["asInt"]
                                lines.append("%s %s %s|%s|%s %s\n" % (
                                    res.get("service.name"), m["name"],
                                    at.pop("weft.task.service"), at.pop("weft.task.name"),
                                    ",".join("%s=%s" % kv for kv in sorted(at.items())),
                                    value))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                log.write("%d 400 0 bad metrics %s\n" % (n, e))
                log.flush()
                return 400
            met.write("".join(lines))
            met.flush()
            log.write("%d 200 0 metrics %d\n" % (n, len(lines)))
            log.flush()
            return 200

        def do_POST(self):
            state["n"] += 1
            n = state["n"]
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if self.path == "/v1/metrics" and \
                    self.headers.get("Content-Type") == "application/json":
                self.answer(self.metrics(n, body))
                return
            if self.path != "/v1/traces" or \
                    self.headers.get("Content-Type") != "application/json":
                log.write("%d 400 0 bad path or type %s %s\n" %
                          (n, self.path, self.headers.get("Content-Type")))
                log.flush()
                self.answer(400, b'{"message":"not an OTLP JSON traces request"}')
                return
            try:
                spans = spans_of(json.loads(body))
            except (ValueError, AttributeError, TypeError) as e:
                log.write("%d 400 0 bad body %s\n" % (n, e))
                log.flush()
                self.answer(400, b'{"message":"bad body"}')
                return
            if n <= fail_n:
                log.write("%d %d %d\n" % (n, fail_code, len(spans)))
                log.flush()
                extra = {}
                if fail_code in (429, 503):
                    extra["Retry-After"] = a.retry_after
                self.answer(fail_code, b'{"message":"scripted failure"}', extra)
                return
            for sp in spans:
                rec.write("%s %s %s %d %d\n" % (
                    sp["traceId"], sp["spanId"], sp.get("parentSpanId") or "-",
                    len(sp.get("events", [])), len(sp.get("links", []))))
            rec.flush()
            log.write("%d 200 %d\n" % (n, len(spans)))
            log.flush()
            state["ok"] += 1
            self.answer(200, b"{}")

        def do_GET(self):
            self.answer(405, b"{}")

    srv = http.server.HTTPServer(("127.0.0.1", a.port), H)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    try:
        while not a.exit_after or state["ok"] < a.exit_after:
            srv.handle_request()
    finally:
        srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
