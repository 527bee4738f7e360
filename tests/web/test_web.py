#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The aggregator's web face, end to end: a real aggregator serving --http on the machine's
non-loopback address with a token, a real agent running real queries over a real workload,
Zipkin's yelp test trace (tests/data/zipkin) imported into the graph store it serves, driven
through headless Chromium (Selenium), scraped by promtool and a real Prometheus server.

What it asserts (docs/http.md):
  - off loopback: the API and /metrics answer 401 without the token (and with a wrong one),
    200 with it; an aggregator asked to serve off loopback without a token refuses to start;
    hostile requests (path traversal, a method but GET, 100 KB of headers) are refused and
    counted, and the server still answers;
  - the trace page draws exactly one lane per span of the file; for every lane, the marked
    bar of its type's histogram is the sketch bucket of that span's duration computed here
    from the file with kernel/weft_sketch.h's rule; the one annotated span's event is rare
    (the test imports 30 copies of the trace without it) and drawn dark; every overlay's
    toggle hides and shows it; the exports are Chrome trace, OTLP and Jaeger JSON;
  - the cluster page shows the graph store: its file, its retention bound as given
    (--graph-max-size 1GiB), and the 3 tasks a live graph query of the agent captured (a
    workload's 3 getppid() calls as spans), which the traces page lists as 3 traces besides
    the 31 imported;
  - the live query page shows windows closing (its window number grows, rows appear); the
    quantile columns p50/p99 are drawn as their window's sketch: the bars are the sketch's
    log-linear buckets, their counts add up to exactly the window's reads (count() summed over
    its groups), the marked bar holds the quantile's rank and the reported value, and the heat
    map has one column per window drawn;
  - /metrics passes `promtool check metrics`, and Prometheus scrapes, with the token, the
    exported query's latest window: exactly the 5000 getppid calls the workload made;
  - the browser's console logged no error; a screenshot of every page is written to the
    build directory (web-*.png).

Exits 77 (skipped, with the reason) when Chromium, chromedriver or Selenium is missing.
"""
import copy
import http.client
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SKIP = 77
WAIT = 30.0  # no single step comes near it: conditions are polled, never timed
TOKEN = "test-token-0123456789abcdef"


T0 = time.monotonic()


def step(what):
    """Progress on stderr, with the time since the start (ctest shows it on failure)."""
    print("%6.1fs %s" % (time.monotonic() - T0, what), file=sys.stderr, flush=True)


def skip(why):
    print("SKIP: " + why, file=sys.stderr)
    sys.exit(SKIP)


def wait_for(what, fn, timeout=WAIT, every=0.1):
    end = time.monotonic() + timeout
    while True:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # the condition is retried until the deadline
            last = e
        else:
            last = None
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for %s (%s)" % (what, last))
        time.sleep(every)


def sketch_index(x):
    """kernel/weft_sketch.h's weft_sketch_index(): 0..31 exact, then 32 sub-buckets per
    power of two."""
    v = max(0, x)
    if v < 32:
        return v
    e = v.bit_length() - 1
    return ((e - 4) << 5) + ((v >> (e - 5)) & 31)


def global_ipv4():
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout
    m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", out)
    return m.group(1) if m else None


def quantile_rank(q, n):
    """kernel/aggstate.c's agg_quantile_rank(): nearest rank, 1-based."""
    if q >= 1.0:
        return n
    r = q * n
    return max(1, math.ceil(r - 1e-9 * max(r, 1.0)))


def check_sketches(browser, url, live):
    """The quantile columns p50 and p99 of the live query (reads' args.count, grouped by comm)
    drawn as their window's sketch: the bars are the sketch's buckets (kernel/weft_sketch.h),
    their counts add up to exactly the window's reads (the count() column summed over its
    rows, from the API), the marked bar holds the value of the quantile's rank and the value
    reported; the heat map has one column per window the page drew."""
    # one snapshot of the page (drawn whole in one task: nothing changes during the script)
    page = browser.execute_script("""
        const out = {window: +document.getElementById('query-title').dataset.window};
        for (const name of ['p50', 'p99']) {
          const g = document.querySelector('svg.hist.sketch[data-column="' + name + '"]');
          const heat = document.querySelector('svg.heat[data-column="' + name + '"]');
          if (!g || !heat) return null;
          out[name] = {
            bars: [...g.querySelectorAll('rect.b')].map((r) => [+r.dataset.min, +r.dataset.max,
                   +r.dataset.count, r.classList.contains('mark')]),
            cols: [...new Set([...heat.querySelectorAll('rect')].map((r) => +r.dataset.window))],
            windows: heat.dataset.windows.split(' ').map(Number)};
        }
        return out;""")
    assert page, "no sketch histogram or heat map for p50/p99"
    st, body = get(url + "/api/queries/%s/windows?since=0" % live, TOKEN)
    assert st == 200, st
    wins = {w["window"]["index"]: w["window"] for w in json.loads(body)["windows"]}
    win = wins[page["window"]]
    reads = sum(r["reads"] for r in win["rows"])
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        bars, sk = page[name]["bars"], win["sketches"][name]
        assert sk["q"] == q and sk["n"] == reads, (name, sk["n"], reads)
        assert sum(b[2] for b in bars) == reads, (name, bars, reads)
        assert [b[:3] for b in bars] == [[b["min"], b["max"], b["count"]] for b in sk["buckets"]]
        for lo, hi, _, _ in bars:  # each bar is one bucket of the sketch, whole
            assert sketch_index(lo) == sketch_index(hi) != sketch_index(hi + 1), (lo, hi)
            assert lo == 0 or sketch_index(lo - 1) != sketch_index(lo), lo
        marked = [i for i, b in enumerate(bars) if b[3]]
        assert len(marked) == 1, (name, bars)
        m, k = marked[0], quantile_rank(q, reads)
        below = sum(b[2] for b in bars[:m])
        assert below < k <= below + bars[m][2], (name, k, bars)
        assert bars[m][0] <= sk["value"] <= bars[m][1], (name, sk["value"], bars[m])
        # the heat map: one column per window drawn (every window has reads: the agent's own)
        cols, drawn = page[name]["cols"], page[name]["windows"]
        assert sorted(cols) == sorted(drawn) and len(drawn) >= 3, (name, cols, drawn)
        assert page["window"] in drawn
    step("sketches: window %d, %d reads, p50 %s, p99 %s" % (
        page["window"], reads, win["sketches"]["p50"]["value"], win["sketches"]["p99"]["value"]))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Procs:
    def __init__(self, d):
        self.d = d
        self.procs = []

    def start(self, name, argv, **kw):
        err = open(os.path.join(self.d, name + ".err"), "w")
        p = subprocess.Popen(argv, stdout=kw.pop("stdout", subprocess.DEVNULL), stderr=err,
                             cwd=self.d, **kw)
        p.log = err.name
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def log_has(p, needle):
    with open(p.log) as f:
        return needle in f.read()


def get(url, token=None, method="GET"):
    req = urllib.request.Request(url, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main():
    weft = os.environ.get("WEFT_BIN")
    bindir = os.environ.get("WEFT_BINARY_DIR")
    srcdir = os.environ.get("WEFT_SOURCE_DIR")
    if not weft or not bindir or not srcdir:
        print("run through ctest (WEFT_BIN, WEFT_BINARY_DIR, WEFT_SOURCE_DIR)", file=sys.stderr)
        return 1
    if os.geteuid() != 0:
        skip("needs root (the agent loads eBPF)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
    except ImportError as e:
        skip("python3-selenium is missing (%s)" % e)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not chromium or not driver_bin:
        skip("chromium or chromium-driver is missing")
    addr = global_ipv4()
    if not addr:
        skip("no non-loopback IPv4 address to serve on")

    d = tempfile.mkdtemp(prefix="weft-web-")
    procs = Procs(d)
    browser = None
    try:
        run = lambda *a: subprocess.run([weft] + list(a), cwd=d, check=True,
                                        capture_output=True, text=True)
        run("keygen", "--role", "aggregator", "aggregator")
        allow = run("keygen", "--role", "agent", "a").stdout
        allow += run("keygen", "--role", "client", "me").stdout
        with open(os.path.join(d, "allow"), "w") as f:
            f.write(allow)
        tok = os.path.join(d, "token")
        with open(tok, "w") as f:
            f.write(TOKEN + "\n")

        # the trace, and 30 copies without its one annotation: the event becomes rare
        src = os.path.join(srcdir, "tests/data/zipkin/yelp.json")
        with open(src) as f:
            spans = json.load(f)
        for i in range(30):
            cp = copy.deepcopy(spans)
            for s in cp:
                s["traceId"] = "%016x" % (0x7e570000 + i)
                s["timestamp"] += (i + 1) * 10_000_000
                s.pop("annotations", None)
                # other latencies, so that the histograms have more than one bar
                s["duration"] = max(1, s["duration"] * (1 + (i % 7)) // 3)
            with open(os.path.join(d, "copy%02d.json" % i), "w") as f:
                json.dump(cp, f)
        gs = os.path.join(d, "graph.sqlite")
        run("graph", "import", "--graph-store", gs, src,
            *[os.path.join(d, "copy%02d.json" % i) for i in range(30)])

        # off loopback without a token: refused before anything starts
        r = subprocess.run([weft, "aggregator", "--listen", "tcp://127.0.0.1:%d" % free_port(),
                            "--key", "aggregator.key", "--allow", "allow", "--store", ":memory:",
                            "--http", addr + ":0"], cwd=d, capture_output=True, text=True,
                           timeout=WAIT)
        assert r.returncode != 0 and "not a loopback address" in r.stderr, r.stderr

        endpoint = "tcp://127.0.0.1:%d" % free_port()
        agg = procs.start("aggregator", [weft, "aggregator", "--listen", endpoint, "--key",
                                         "aggregator.key", "--allow", "allow", "--store",
                                         os.path.join(d, "agg.sqlite"), "--lateness", "500ms",
                                         "--http", addr + ":0", "--http-token", tok,
                                         "--graph-store", gs, "--graph-max-size", "1GiB",
                                         "-v"])
        wait_for("the aggregator to listen", lambda: log_has(agg, "listening on"))
        with open(agg.log) as f:
            url = re.search(r"web: serving (http://\S+)", f.read()).group(1)
        assert url.startswith("http://" + addr + ":"), url

        # the token, off loopback
        for path in ("/api/cluster", "/metrics", "/api/traces"):
            assert get(url + path)[0] == 401, path
            assert get(url + path, "wrong-token-0123456789")[0] == 401, path
            assert get(url + path, TOKEN)[0] == 200, path
        assert get(url + "/app.js")[0] == 200  # the pages carry no data
        # hostile requests: refused, counted, and the server goes on
        host, port = url[len("http://"):].rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=10)
        c.request("GET", "/../../../etc/passwd", headers={"Authorization": "Bearer " + TOKEN})
        r = c.getresponse()
        assert r.status in (400, 404), r.status
        r.read()
        c.close()
        assert get(url + "/api/cluster", TOKEN, method="POST")[0] == 405
        assert get(url + "/api/traces/zz", TOKEN)[0] == 400
        assert get(url + "/api/traces/" + "a" * 40, TOKEN)[0] == 400
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"GET /api/cluster HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 +
                      b"\r\n\r\n")
            try:
                reply = s.recv(4096)
            except ConnectionResetError:
                reply = b""
            assert not reply.startswith(b"HTTP/1.1 200"), reply[:100]
        assert get(url + "/api/cluster", TOKEN)[0] == 200

        step("agent")
        agent = procs.start("agent", [weft, "agent", "--connect", endpoint, "--server-key",
                                      "aggregator.pub", "--key", "a.key", "--host", "a",
                                      "--cpu-budget", "0"])
        wait_for("the agent to connect", lambda: log_has(agent, "connected to aggregator"))
        client = ["--to", endpoint, "--server-key", "aggregator.pub", "--key", "me.key"]
        live = run("submit", *client, "--no-follow",
                   "from syscall:read group by comm select count() as reads, "
                   "hist(args.count) as sizes, p50(args.count) as p50, p99(args.count) as p99 "
                   "every 1s").stdout.strip()

        def on_workload(calls, threads, query, *opts):
            """Submits `query` % the pid of wl_syscalls CALLS THREADS, which waits for a byte
            before its calls (the query names its pid: other tests on this machine may run
            the same workload meanwhile), releases it once the agent runs the query, and
            cancels the query after it exited.  Returns the query's id."""
            wl = subprocess.Popen([os.path.join(bindir, "tests/workloads/wl_syscalls"),
                                   str(calls), str(threads), "wait"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
            procs.procs.append(wl)
            qid = run("submit", *client, "--no-follow", *opts,
                      query % int(wl.stdout.readline())).stdout.strip()
            assert qid.isdigit(), qid
            wait_for("the agent to run query " + qid,
                     lambda: log_has(agent, "query %s running" % qid))
            wl.stdin.write("go\n")
            wl.stdin.close()
            assert wl.wait(WAIT) == 0
            # without `every`, its one window closes when it ends: it holds every call
            run("cancel", *client, qid)
            return qid

        assert live.isdigit(), live
        exported = on_workload(5000, 2, "from syscall:getppid where pid == %d "
                               "select count() as calls", "--export-metrics")
        # a graph query, captured live on the agent into the aggregator's graph store: each of
        # a workload's 3 getppid() calls a task, the root of a trace of its own
        on_workload(3, 1, "from span(syscall:getppid) where pid == %d graph")

        def graph_status():
            return json.loads(get(url + "/api/cluster", TOKEN)[1]).get("graph", {})

        wait_for("the 3 tasks in the graph store", lambda: graph_status().get("tasks") == 3)

        step("browser")
        # the browser
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1400,1000", "--user-data-dir=" + os.path.join(d, "chrome")):
            opts.add_argument(a)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        browser = webdriver.Chrome(service=Service(driver_bin), options=opts)
        browser.set_script_timeout(WAIT)
        # the token for this tab, before the page first asks (a 401 would log an error)
        browser.get(url + "/style.css")
        browser.execute_script("sessionStorage.setItem('weft-token', arguments[0])", TOKEN)

        def shot(name):
            browser.save_screenshot(os.path.join(bindir, "web-%s.png" % name))

        def q(css):
            return browser.find_elements(By.CSS_SELECTOR, css)

        step("cluster page")
        # the cluster
        browser.get(url + "/#/")
        wait_for("agent a on the cluster page",
                 lambda: any("a" == r.find_elements(By.TAG_NAME, "td")[0].text and
                             "yes" == r.find_elements(By.TAG_NAME, "td")[2].text
                             for r in q("#agents tr.agent")))
        wait_for("the three queries listed", lambda: len(q("#queries tr.query")) == 3)
        # the graph store: the file, its retention bound as the option was given, and the
        # same counts as the status the page is drawn from
        wait_for("the graph store's table", lambda: q("#graph tr[data-row=retention] td"))
        g = graph_status()

        def cell(row):
            return q("#graph tr[data-row=%s] td" % row)[0].text

        assert cell("path") == gs, cell("path")
        assert g["max_bytes"] == 1 << 30 and "max_age_ns" not in g, g
        assert cell("retention") == "--graph-max-size 1GiB: %d traces dropped" % g["retained"], \
            cell("retention")
        assert g["retained"] == 0, g  # 34 small traces are far under a GiB
        assert g["tasks"] == 3 and g["events"] == 0 and g["edges"] == 0, g
        assert cell("received") == "%d %s: 3 tasks, 0 events, 0 edges" % (
            g["batches"], "batch" if g["batches"] == 1 else "batches"), cell("received")
        assert cell("kernel") == "%d matched, %d split, %d bad, %d dropped" % (
            g["kernel_matched"], g["kernel_split"], g["kernel_bad"], g["kernel_dropped"])
        shot("cluster")

        step("traces page")
        # traces: the list, then a search
        browser.get(url + "/#/traces")
        # the 31 imported and the 3 captured live
        wait_for("34 traces listed", lambda: len(q("#traces tr.trace")) == 34)
        assert sum(r.find_elements(By.TAG_NAME, "td")[1].text == "wl_syscalls"
                   for r in q("#traces tr.trace")) == 3
        browser.find_element(By.NAME, "min_duration").send_keys("130ms")
        browser.find_element(By.CSS_SELECTOR, "#trace-search button").click()
        longest = max(s["duration"] for s in spans) * 1000
        assert longest >= 130_000_000
        wait_for("the search to narrow the list",
                 lambda: 1 <= len(q("#traces tr.trace")) < 31)
        assert not any("wl_syscalls" in r.text for r in q("#traces tr.trace"))
        assert any("a03ee8fff1dcd9b9" in r.text for r in q("#traces tr.trace"))
        shot("traces")

        step("trace page")
        # one trace
        browser.get(url + "/#/trace/a03ee8fff1dcd9b9")
        wait_for("the Gantt chart", lambda: q("#gantt .lane"))
        lanes = q("#gantt .lane")
        # a task per span piece: the two sides of a shared id are two tasks (docs/graphs.md)
        pieces = {(s["id"], bool(s.get("shared")), s["localEndpoint"]["serviceName"])
                  for s in spans}
        assert len(lanes) == len(pieces) == 16, (len(lanes), len(pieces))
        # which span each task is: its id, or the original id a derived one keeps
        st, body = get(url + "/api/traces/a03ee8fff1dcd9b9", TOKEN)
        span_of = {t["id"]: (t["attrs"].get("zipkin.id", t["id"]), t["service"])
                   for t in json.loads(body)["tasks"]}
        assert {l.get_attribute("data-task") for l in lanes} == set(span_of)
        dur_of = {(s["id"], s["localEndpoint"]["serviceName"]): s["duration"] * 1000
                  for s in spans}
        dur = {t: dur_of[span_of[t]] for t in span_of}
        selected = """return [arguments[0].classList.contains('sel'),
            [...document.querySelectorAll('.hist-selected rect.mark')].map(r => +r.dataset.bin)]"""
        for lane in lanes:
            tid = lane.get_attribute("data-task")
            lane.find_element(By.CSS_SELECTOR, ".label").click()
            sel, bins = browser.execute_script(selected, lane)
            assert sel and bins == [sketch_index(dur[tid])], (tid, bins, sketch_index(dur[tid]))
        expected = {sketch_index(v) for v in dur.values()}
        got = {int(r.get_attribute("data-bin")) for r in q("#hists rect.mark")}
        assert got == expected, (got, expected)
        annotated = [(s["id"], s["localEndpoint"]["serviceName"]) for s in spans
                     if s.get("annotations")]
        rare = q("#gantt circle.ev.rare")
        assert [span_of[c.get_attribute("data-task")] for c in rare] == annotated, annotated
        assert not q("#gantt circle.ev.common")
        fill = browser.execute_script("return getComputedStyle(arguments[0]).fill", rare[0])
        assert fill == "rgb(29, 36, 48)", fill  # dark
        assert q("#gantt .ov-crit rect") and q("#gantt .ov-edges path")
        assert q("#gantt .ov-molehill path")
        displays = """return [...document.querySelectorAll(arguments[0])]
            .map(g => getComputedStyle(g).display)"""
        for name in ("crit", "events", "edges", "molehill", "hist"):
            box = browser.find_element(By.ID, "t-" + name)
            assert browser.execute_script(displays, ".ov-" + name), name
            box.click()
            wait_for(name + " hidden", lambda: set(
                browser.execute_script(displays, ".ov-" + name)) == {"none"})
            box.click()
            wait_for(name + " shown", lambda: "none" not in
                     browser.execute_script(displays, ".ov-" + name))
        shot("trace")
        for fmt, key in (("chrome", "traceEvents"), ("otlp", "resourceSpans"),
                         ("jaeger", "data")):
            href = q("#export-" + fmt)[0].get_attribute("href")
            st, body = get(href, TOKEN)
            assert st == 200 and key in json.loads(body), fmt

        step("live query page")
        # the live query page: windows close while it is open
        browser.get(url + "/#/query/" + live)
        shown = """const t = document.getElementById('query-title');
            return t ? +t.dataset.window : -1"""
        first = wait_for("a window of query " + live,
                         lambda: [browser.execute_script(shown)][0] + 1) - 1
        # windows close every second; on a loaded machine the agent and the browser lag
        wait_for("a later window", lambda: browser.execute_script(shown) >= first + 2,
                 timeout=4 * WAIT)
        # one snapshot of the page (it is redrawn as windows come: elements go stale)
        rows, heat, series, missing = browser.execute_script("""
            const n = (s) => document.querySelectorAll(s).length;
            return [n('#latest tr.row'), n('svg.heat rect'), n('svg.series path'),
                    [...document.querySelectorAll('#windows td.missing')].map(t => t.textContent)]""")
        assert rows and heat and series, (rows, heat, series)
        assert "" in missing, missing  # a window that every host reported
        check_sketches(browser, url, live)
        shot("query")

        severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe

        step("metrics")
        # /metrics: the exported query's only window, once it closed, exactly
        def metrics():
            return get(url + "/metrics", TOKEN)[1].decode()
        line = 'weft_query_calls{query_id="%s"} 5000' % exported
        try:
            wait_for("the exported window in /metrics", lambda: line in metrics(),
                     timeout=4 * WAIT)
        except AssertionError:
            step("/metrics: " + "".join(l + "\n" for l in metrics().splitlines()
                                        if l.startswith("weft_query")))
            raise
        text = metrics()
        assert 'weft_agents{state="alive"} 1' in text
        assert re.search(r"^weft_http_rejected_total [1-9]", text, re.M), text
        pc = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                            text=True)
        assert pc.returncode == 0, pc.stdout + pc.stderr

        step("prometheus")
        prom = shutil.which("prometheus")
        if prom:
            pport = free_port()
            with open(os.path.join(d, "prometheus.yml"), "w") as f:
                f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n"
                        "  - job_name: weft\n    authorization:\n"
                        "      credentials_file: %s\n    static_configs:\n"
                        "      - targets: ['%s:%s']\n" % (tok, host, port))
            procs.start("prometheus", [prom, "--config.file=" + os.path.join(d, "prometheus.yml"),
                                       "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
                                       "--web.listen-address=127.0.0.1:%d" % pport])

            def scraped():
                st, body = get("http://127.0.0.1:%d/api/v1/query?query=weft_query_calls" % pport)
                res = json.loads(body)["data"]["result"] if st == 200 else []
                return [r for r in res if r["metric"].get("query_id") == exported]
            res = wait_for("Prometheus to scrape the exported query", scraped)
            assert res[0]["value"][1] == "5000", res
        else:
            print("prometheus not installed: promtool only", file=sys.stderr)
        # the daemons end cleanly (under ASan, a leak or a bad access is a non-zero exit)
        browser.quit()
        browser = None
        for p in (agent, agg):
            p.send_signal(signal.SIGTERM)
            rc = p.wait(WAIT)
            assert rc == 0, (p.log, rc, open(p.log).read()[-3000:])
        print("ok: screenshots in %s/web-*.png" % bindir)
        return 0
    except BaseException:
        if browser:
            step("the page's status line: %r" % browser.execute_script(
                "return document.getElementById('status').textContent"))
            step("the browser's log: %r" % browser.get_log("browser"))
        for p in procs.procs:
            if not hasattr(p, "log"):
                continue  # the workload: its output is a pipe
            with open(p.log) as f:
                step("%s: ...%s" % (p.log, f.read()[-3000:]))
        raise
    finally:
        if browser:
            browser.quit()
        procs.stop()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
