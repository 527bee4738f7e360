// SPDX-License-Identifier: Apache-2.0
// weft's web face: plain JavaScript and SVG, no library, no build step.  Four views chosen by
// the URL's fragment, each drawn from the JSON API (docs/http.md):
//   #/             the cluster: agents and queries            GET /api/cluster
//   #/query/ID     one query, live (polled every second)      GET /api/queries/ID/windows
//   #/traces       the traces in the graph store, searchable  GET /api/traces
//   #/trace/ID     one trace with its aggregate context       GET /api/traces/ID
// Text from the server goes into the page with textContent only, never as markup.
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';
let timer = null; // the current view's polling
let token = sessionStorage.getItem('weft-token') || '';

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

function status(msg, bad) {
  const s = document.getElementById('status');
  s.textContent = msg;
  s.className = bad ? 'err' : '';
}

// GET a JSON document; a 401 asks for the token (kept for this tab only).
async function api(path) {
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  const r = await fetch(path, { headers });
  if (r.status === 401) {
    document.getElementById('token-form').hidden = false;
    throw new Error('this server needs its token (401)');
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status));
  return body;
}

function fmtDur(ns) {
  const a = Math.abs(ns);
  const units = [[1e9, 's'], [1e6, 'ms'], [1e3, 'µs']];
  for (const [s, u] of units) {
    if (a >= s) {
      const x = ns / s;
      return (Math.abs(x) >= 99.95 ? x.toFixed(0) : Math.abs(x) >= 9.995 ? x.toFixed(1) : x.toFixed(2)) + u;
    }
  }
  return ns + 'ns';
}

function fmtTime(ns) {
  return new Date(ns / 1e6).toISOString().replace('T', ' ').replace('Z', '');
}

function main(...kids) {
  const m = document.getElementById('main');
  m.replaceChildren(...kids);
  return m;
}

// ---- the cluster ----

async function viewCluster() {
  const c = await api('/api/cluster');
  const agents = el('table', { id: 'agents' },
    el('tr', {}, ...['host', 'role', 'alive', 'kernel', 'probe types', 'spooled', 'last seen', 'running'].map((h) => el('th', {}, h))));
  for (const a of c.agents) {
    agents.append(el('tr', { class: 'agent' },
      el('td', {}, a.host), el('td', {}, a.role),
      el('td', { class: a.alive ? '' : 'dead' }, a.alive ? 'yes' : 'expired'),
      el('td', { class: 'mono' }, a.kernel), el('td', {}, a.features.join(' ')),
      el('td', { class: 'num' }, a.spooled), el('td', { class: 'num' }, fmtDur(a.last_seen_ms * 1e6) + ' ago'),
      el('td', {}, a.running.join(', '))));
  }
  const queries = el('table', { id: 'queries' },
    el('tr', {}, ...['id', 'state', 'windows', 'revisions', 'hosts', 'errors', 'query'].map((h) => el('th', {}, h))));
  for (const q of c.queries) {
    queries.append(el('tr', { class: 'query' },
      el('td', {}, el('a', { href: '#/query/' + q.id }, q.id)), el('td', {}, q.state),
      el('td', { class: 'num' }, q.windows), el('td', { class: 'num' }, q.revisions),
      el('td', {}, q.hosts.join(', ')), el('td', { class: 'err' }, q.errors.join('; ')),
      el('td', { class: 'mono' }, q.query)));
  }
  main(el('h2', {}, 'Aggregator ' + c.aggregator + ' — ' + c.agents.length + ' agents, ' + c.rejected + ' rejected'),
    agents, el('h2', {}, 'Queries'), queries, ...(c.graph ? [el('h2', {}, 'Graph store'), graphTable(c.graph)] : []));
  status('updated ' + new Date().toLocaleTimeString());
}

// a bound as its option takes it: the largest whole unit (7d, 12h, 30m; 20GiB, 500MiB)
function fmtBound(v, units, last) {
  for (const [s, u] of units) if (v >= s && v % s === 0) return v / s + u;
  return v + last;
}

function fmtAge(ns) {
  return fmtBound(ns, [[864e11, 'd'], [36e11, 'h'], [6e10, 'm'], [1e9, 's'], [1e6, 'ms'], [1e3, 'us']], 'ns');
}

function fmtSize(b) {
  return fmtBound(b, [[2 ** 40, 'TiB'], [2 ** 30, 'GiB'], [2 ** 20, 'MiB'], [2 ** 10, 'KiB']], 'B');
}

// the graph store the aggregator writes: what came in, what was lost, what retention dropped
// (the "graph" object of /api/cluster, docs/http.md)
function graphTable(g) {
  const bounds = [];
  if (g.max_age_ns !== undefined) bounds.push('--graph-max-age ' + fmtAge(g.max_age_ns));
  if (g.max_bytes !== undefined) bounds.push('--graph-max-size ' + fmtSize(g.max_bytes));
  const rows = [
    ['file', g.path, 'path'],
    ['received', g.batches + (g.batches === 1 ? ' batch: ' : ' batches: ') + g.tasks + ' tasks, ' + g.events + ' events, ' + g.edges + ' edges', 'received'],
    ['traces checked', g.checked + ', ' + g.incomplete + ' incomplete', 'checked'],
    ['not stored', g.lost + ' lost, ' + g.rejected + ' rejected, ' + g.failed + ' failed, ' + g.replaced + ' replaced', 'lost'],
    ['kernel edges', g.kernel_matched + ' matched, ' + g.kernel_split + ' split, ' + g.kernel_bad + ' bad, ' + g.kernel_dropped + ' dropped', 'kernel'],
    ['retention', bounds.length ? bounds.join(', ') + ': ' + g.retained + ' traces dropped' : 'none: the store grows until `weft graph retain` is run', 'retention'],
  ];
  if (g.forward) {
    const f = g.forward;
    rows.push(['forwarded to', f.url, 'forward-url'],
      ['forwarding', f.sent + ' spans sent, ' + f.spooled + ' spooled, ' + f.pending + ' pending, ' + f.dropped + ' dropped, ' + f.rejected + ' rejected' +
        (f.last_error ? ' (last error: ' + f.last_error + ')' : ''), 'forward']);
  }
  return el('table', { id: 'graph' }, ...rows.map(([k, v, id]) =>
    el('tr', { 'data-row': id }, el('th', {}, k), el('td', { class: id === 'path' || id === 'forward-url' ? 'mono' : '' }, v))));
}

// ---- a query, live ----

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

function keyOf(row, kinds) {
  return kinds.filter((k) => k.kind === 'key').map((k) => String(row[k.name])).join(' ') || 'all';
}

function seriesChart(name, windows, kinds) {
  // one line per group (the first 8 by their latest value), x: window index
  const W = 520, H = 160, L = 50;
  const lines = new Map();
  for (const w of windows) {
    for (const r of w.rows) {
      const v = r[name];
      if (typeof v !== 'number') continue;
      const k = keyOf(r, kinds);
      if (!lines.has(k)) lines.set(k, []);
      lines.get(k).push([w.index, v]);
    }
  }
  const keys = [...lines.keys()].slice(0, PALETTE.length);
  const xs = windows.map((w) => w.index);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  let ymax = 0;
  for (const k of keys) for (const [, v] of lines.get(k)) ymax = Math.max(ymax, v);
  ymax = ymax || 1;
  const g = svg('svg', { width: W, height: H + 20, class: 'series', 'data-column': name });
  g.append(svg('line', { class: 'axis', x1: L, y1: H, x2: W, y2: H }), svg('line', { class: 'axis', x1: L, y1: 0, x2: L, y2: H }),
    svg('text', { x: 0, y: 10 }, String(+ymax.toPrecision(3))), svg('text', { x: 0, y: H }, '0'),
    svg('text', { x: L, y: H + 14 }, 'window ' + x0), svg('text', { x: W - 70, y: H + 14 }, 'window ' + x1));
  keys.forEach((k, i) => {
    const d = lines.get(k).map(([x, v], j) => (j ? 'L' : 'M') + (L + (x - x0) / (x1 - x0) * (W - L - 5)).toFixed(1) + ',' + (H - v / ymax * (H - 5)).toFixed(1)).join('');
    g.append(svg('path', { d, stroke: PALETTE[i] }, svg('title', {}, k)));
  });
  const legend = el('div', { class: 'legend' }, ...keys.map((k, i) => el('span', { style: 'color:' + PALETTE[i] + ';margin-right:1em' }, '— ' + k)));
  return el('figure', {}, el('figcaption', {}, name + ' over time'), g, legend);
}

// h.buckets: [{min, max, count}]; h.mark (optional): the index of the bucket to mark
function histBars(h, width, height, cls, column) {
  const g = svg('svg', { width, height: height + 16, class: 'hist ' + (cls || '') });
  if (column) g.setAttribute('data-column', column);
  const n = h.buckets.length || 1;
  const maxc = Math.max(1, ...h.buckets.map((b) => b.count));
  const bw = width / n;
  h.buckets.forEach((b, i) => {
    const bh = Math.max(h.mark === i ? 2 : 0, Math.log10(1 + b.count) / Math.log10(1 + maxc) * height);
    g.append(svg('rect', { class: 'b' + (h.mark === i ? ' mark' : ''), 'data-min': b.min, 'data-max': b.max, 'data-count': b.count, x: i * bw, y: height - bh, width: Math.max(1, bw - 1), height: bh },
      svg('title', {}, '[' + b.min + ', ' + b.max + ']: ' + b.count)));
  });
  if (h.buckets.length) {
    g.append(svg('text', { x: 0, y: height + 12 }, String(h.buckets[0].min)),
      svg('text', { x: width - 60, y: height + 12 }, String(h.buckets[h.buckets.length - 1].max)));
  }
  return g;
}

// a hist/lhist column's buckets in a window: each row's
function rowBuckets(name) {
  return (w) => w.rows.flatMap((r) => (r[name] && r[name].buckets) || []);
}

// a quantile column's buckets in a window: its sketch, merged over the groups
function sketchBuckets(name) {
  return (w) => (w.sketches && w.sketches[name] && w.sketches[name].buckets) || [];
}

function heatMap(name, windows, bucketsOf) {
  // x: window, y: bucket (by its lower bound), colour: log count, summed over groups
  const bounds = new Set();
  for (const w of windows) for (const b of bucketsOf(w)) bounds.add(b.min);
  const ys = [...bounds].sort((a, b) => a - b);
  const W = 520, cellH = Math.max(4, Math.min(14, 200 / Math.max(1, ys.length)));
  const cw = W / Math.max(1, windows.length);
  let maxc = 1;
  const cells = [];
  windows.forEach((w, xi) => {
    const sums = new Map();
    for (const b of bucketsOf(w)) sums.set(b.min, (sums.get(b.min) || 0) + b.count);
    for (const [min, c] of sums) { maxc = Math.max(maxc, c); cells.push([xi, ys.indexOf(min), c, w.index, min]); }
  });
  const g = svg('svg', { width: W, height: ys.length * cellH + 2, class: 'heat', 'data-column': name, 'data-windows': windows.map((w) => w.index).join(' ') });
  for (const [xi, yi, c, wi, min] of cells) {
    const t = Math.log10(1 + c) / Math.log10(1 + maxc);
    g.append(svg('rect', { 'data-window': wi, x: xi * cw, y: (ys.length - 1 - yi) * cellH, width: Math.max(1, cw - 1), height: cellH - 1, fill: 'rgb(' + Math.round(255 - 200 * t) + ',' + Math.round(255 - 150 * t) + ',255)' },
      svg('title', {}, 'window ' + wi + ', from ' + min + ': ' + c)));
  }
  return el('figure', {}, el('figcaption', {}, name + ' over time (heat map: window × bucket, log colour)'), g);
}

async function viewQuery(id) {
  const wins = new Map(); // index -> window
  let seq = 0;
  const root = main(el('h2', {}, 'Query ' + id), el('p', {}, 'waiting for its first window...'));
  async function poll() {
    const r = await api('/api/queries/' + id + '/windows?since=' + seq);
    seq = r.seq;
    for (const w of r.windows) wins.set(w.window.index, w.window);
    if (!r.windows.length) return; // nothing new: the page stays as drawn
    for (const k of [...wins.keys()].sort((a, b) => a - b).slice(0, Math.max(0, wins.size - 120))) wins.delete(k);
    const list = [...wins.values()].sort((a, b) => a.index - b.index).slice(-60);
    const last = list[list.length - 1];
    const kinds = last.kinds;
    const table = el('table', { id: 'latest' }, el('tr', {}, ...last.columns.map((c) => el('th', {}, c))));
    for (const row of last.rows) {
      table.append(el('tr', { class: 'row' }, ...last.columns.map((c) => {
        const v = row[c];
        if (v && typeof v === 'object') return el('td', {}, histBars(v, 160, 30));
        return el('td', { class: typeof v === 'number' ? 'num' : '' }, v === null ? '-' : v);
      })));
    }
    const winTable = el('table', { id: 'windows' }, el('tr', {}, ...['window', 'end', 'groups', 'revision', 'hosts', 'missing'].map((h) => el('th', {}, h))));
    for (const w of list.slice(-12).reverse()) {
      winTable.append(el('tr', { class: 'window' }, el('td', { class: 'num' }, w.index), el('td', {}, fmtTime(w.end_ns)),
        el('td', { class: 'num' }, w.groups), el('td', { class: 'num' }, w.revision),
        el('td', {}, w.hosts.join(', ')), el('td', { class: 'missing' }, w.missing.join(', '))));
    }
    const charts = el('div', { class: 'hists' });
    for (const k of kinds) {
      if (k.kind === 'key') continue;
      if (k.kind === 'hist' || k.kind === 'lhist') {
        const sum = new Map();
        for (const r of last.rows) for (const b of (r[k.name] && r[k.name].buckets) || []) {
          const e = sum.get(b.min) || { min: b.min, max: b.max, count: 0 };
          e.count += b.count;
          sum.set(b.min, e);
        }
        const h = { buckets: [...sum.values()].sort((a, b) => a.min - b.min) };
        charts.append(el('figure', {}, el('figcaption', {}, k.name + ', window ' + last.index + ' (log counts)'), histBars(h, 520, 120, 'latest', k.name)));
        charts.append(heatMap(k.name, list, rowBuckets(k.name)));
      } else if (k.kind === 'quantile' && last.sketches && last.sketches[k.name]) {
        // the sketch's log-linear buckets (merged over the groups), the quantile's marked
        const sk = last.sketches[k.name];
        charts.append(el('figure', {}, el('figcaption', {}, k.name + ' (q ' + sk.q + ' of ' + sk.n + ' values: ' + (sk.value === null ? '-' : sk.value) + ', its bucket marked), window ' + last.index + ' (log counts)'),
          histBars(sk, 520, 120, 'latest sketch', k.name)));
        charts.append(heatMap(k.name, list, sketchBuckets(k.name)));
        charts.append(seriesChart(k.name, list, kinds));
      } else {
        charts.append(seriesChart(k.name, list, kinds));
      }
    }
    root.replaceChildren(el('h2', { id: 'query-title', 'data-window': last.index }, 'Query ' + id + ' — window ' + last.index + (last.last ? ' (last)' : '')),
      el('p', {}, 'hosts: ' + last.hosts.join(', ') + (last.missing.length ? '; missing: ' : ''), last.missing.length ? el('span', { class: 'missing' }, last.missing.join(', ')) : null,
        last.revision ? '; revision ' + last.revision : ''),
      table, el('h2', {}, 'Over time'), charts, el('h2', {}, 'Windows'), winTable);
    status('window ' + last.index + ' at ' + new Date().toLocaleTimeString());
  }
  await poll();
  timer = setInterval(() => poll().catch((e) => status(e.message, true)), 1000);
}

// ---- traces ----

async function viewTraces(params) {
  const fields = [['service', 'service'], ['name', 'name'], ['host', 'host'], ['min_duration', 'min duration'], ['max_duration', 'max duration']];
  const form = el('form', { class: 'search', id: 'trace-search' },
    ...fields.map(([k, label]) => el('label', {}, label, el('input', { name: k, value: params.get(k) || '', size: 14 }))),
    el('label', {}, 'sort', (() => {
      const s = el('select', { name: 'sort' }, el('option', { value: 'start' }, 'newest'), el('option', { value: 'duration' }, 'longest'));
      s.value = params.get('sort') || 'start';
      return s;
    })()),
    el('button', { type: 'submit' }, 'search'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    location.hash = '#/traces?' + p.toString();
  });
  const q = new URLSearchParams();
  for (const [k] of fields) if (params.get(k)) q.set(k, params.get(k));
  if (params.get('sort')) q.set('sort', params.get('sort'));
  q.set('limit', '200');
  const r = await api('/api/traces?' + q.toString());
  const table = el('table', { id: 'traces' }, el('tr', {}, ...['trace', 'service', 'name', 'duration', 'start', 'host', 'tasks', 'hosts'].map((h) => el('th', {}, h))));
  for (const t of r.traces) {
    table.append(el('tr', { class: 'trace' }, el('td', { class: 'mono' }, el('a', { href: '#/trace/' + t.trace }, t.trace.replace(/^0{16}/, ''))),
      el('td', {}, t.service), el('td', {}, t.name), el('td', { class: 'num' }, fmtDur(t.duration)),
      el('td', {}, fmtTime(t.start)), el('td', {}, t.host), el('td', { class: 'num' }, t.tasks), el('td', { class: 'num' }, t.hosts)));
  }
  main(form, el('p', {}, r.count + ' traces'), table);
  status('');
}

// ---- one trace ----

function typeHistogram(ty, marks, width, height) {
  // bars at their place on a log axis of latency; height: log counts; this trace's bins marked
  const g = svg('svg', { width, height: height + 16, class: 'hist', 'data-service': ty.service, 'data-name': ty.name });
  if (!ty.buckets.length) return g;
  const lo = Math.log10(Math.max(1, ty.buckets[0][1]));
  const last = ty.buckets[ty.buckets.length - 1];
  const hi = Math.max(lo + 1, Math.log10(last[1] + last[2]));
  const X = (ns) => (Math.log10(Math.max(1, ns)) - lo) / (hi - lo) * (width - 4);
  const maxc = Math.max(...ty.buckets.map((b) => b[3]));
  for (const [bin, blo, bw, count] of ty.buckets) {
    const h = Math.max(2, Math.log10(1 + count) / Math.log10(1 + maxc) * height);
    const x = X(blo);
    g.append(svg('rect', { class: 'b' + (marks.has(bin) ? ' mark' : ''), 'data-bin': bin, 'data-count': count, x, y: height - h, width: Math.max(2, X(blo + bw) - x), height: h },
      svg('title', {}, fmtDur(blo) + ' – ' + fmtDur(blo + bw) + ': ' + count + ' tasks')));
  }
  g.append(svg('text', { x: 0, y: height + 12 }, fmtDur(ty.buckets[0][1])), svg('text', { x: width - 50, y: height + 12 }, fmtDur(last[1] + last[2])));
  return g;
}

async function viewTrace(id) {
  const t = await api('/api/traces/' + encodeURIComponent(id));
  const LABEL = 300, W = Math.max(600, document.body.clientWidth - LABEL - 60), LANE = 22;
  const span = Math.max(1, t.duration);
  const X = (ns) => LABEL + (ns - t.start) / span * W;
  const row = new Map(); // task id -> lane number
  t.tasks.forEach((k, i) => row.set(k.id, i));
  const H = t.tasks.length * LANE + 24;
  const chart = svg('svg', { id: 'gantt', width: LABEL + W + 10, height: H });
  const lanes = svg('g', { class: 'lanes' });
  const gCrit = svg('g', { class: 'ov ov-crit' }), gEv = svg('g', { class: 'ov ov-events' });
  const gEdge = svg('g', { class: 'ov ov-edges' }), gMole = svg('g', { class: 'ov ov-molehill' });
  // the axis
  for (let i = 0; i <= 4; i++) {
    const x = LABEL + W * i / 4;
    chart.append(svg('line', { class: 'axis', x1: x, y1: 12, x2: x, y2: H }), svg('text', { x: x + 2, y: 10 }, fmtDur(span * i / 4)));
  }
  let selected = null;
  const detail = el('div', { id: 'detail' });
  t.tasks.forEach((k, i) => {
    const y = 16 + i * LANE;
    const lane = svg('g', { class: 'lane' + (k.status === 'error' ? ' error' : ''), 'data-task': k.id, 'data-type': k.type });
    lane.append(svg('rect', { class: 'bg', x: 0, y, width: LABEL + W, height: LANE }));
    lane.append(svg('text', { class: 'label', x: 4 + Math.min(k.depth, 16) * 10, y: y + 15 }, (k.service ? k.service + ': ' : '') + k.name));
    lane.append(svg('rect', { class: 'bar', x: X(k.start), y: y + 4, width: Math.max(1, X(k.end) - X(k.start)), height: LANE - 8 },
      svg('title', {}, fmtDur(k.duration) + (k.percentile !== undefined ? ', p' + k.percentile.toFixed(0) + ' of ' + k.type_count : ''))));
    lane.addEventListener('click', () => select(k, lane));
    lanes.append(lane);
    for (const e of k.events) {
      gEv.append(svg('circle', { class: 'ev ' + (e.rare ? 'rare' : 'common'), 'data-task': k.id, cx: X(e.time), cy: y + LANE / 2, r: e.rare ? 4.5 : 3 },
        svg('title', {}, e.name + (e.share !== undefined ? ' (' + (100 * e.share).toFixed(1) + '% of its type)' : ''))));
    }
    // the molehill: tasks of the same process running, each ms of this task
    const p = t.processes[k.process];
    if (p && p.ms.length) {
      const peak = Math.max(1, ...p.ms);
      const first = Math.max(0, Math.floor((k.start - p.from) / 1e6)), last = Math.min(p.ms.length - 1, Math.floor((k.end - p.from) / 1e6));
      let d = '';
      for (let m = first; m <= last; m++) {
        const x = Math.max(X(k.start), X(p.from + m * 1e6)), x2 = Math.min(X(k.end), X(p.from + (m + 1) * 1e6));
        const h = p.ms[m] / peak * (LANE - 6);
        d += (d ? 'L' : 'M') + x.toFixed(1) + ',' + (y + LANE - 2 - h).toFixed(1) + 'L' + x2.toFixed(1) + ',' + (y + LANE - 2 - h).toFixed(1);
      }
      if (d) gMole.append(svg('path', { class: 'mole', 'data-task': k.id, d: d + 'L' + X(k.end).toFixed(1) + ',' + (y + LANE - 2) + 'L' + X(k.start).toFixed(1) + ',' + (y + LANE - 2) + 'Z' },
        svg('title', {}, 'tasks of ' + (k.host || '?') + ' pid ' + k.pid + ' running (peak ' + peak + ')')));
    }
  });
  for (const s of t.critical_path) {
    const i = row.get(s.task);
    if (i === undefined) continue;
    gCrit.append(svg('rect', { 'data-task': s.task, x: X(s.from), y: 16 + i * LANE + 8, width: Math.max(1, X(s.to) - X(s.from)), height: LANE - 16 }));
  }
  for (const e of t.edges) {
    const a = row.get(e.from), b = row.get(e.to);
    if (a === undefined || b === undefined) continue;
    const to = t.tasks[b];
    const x = X(to.start), y1 = 16 + a * LANE + LANE / 2, y2 = 16 + b * LANE + LANE / 2;
    const w = e.share === undefined ? 1 : 0.75 + 3.25 * Math.min(1, e.share);
    gEdge.append(svg('path', { class: 'edge' + (e.rare ? ' rare' : ''), 'data-kind': e.kind, d: 'M' + (x - 6) + ',' + y1 + 'C' + (x - 14) + ',' + y1 + ' ' + (x - 14) + ',' + y2 + ' ' + x + ',' + y2, 'stroke-width': w },
      svg('title', {}, e.kind + ' edge' + (e.share !== undefined ? ', ' + (100 * e.share).toFixed(1) + '% of its parent type' : ''))));
  }
  chart.append(gMole, lanes, gCrit, gEdge, gEv);

  // per task type: its latency histogram, this trace's tasks of it marked
  const marks = t.types.map(() => new Set());
  for (const k of t.tasks) if (k.hist_bin !== undefined) marks[k.type].add(k.hist_bin);
  const hists = el('div', { class: 'hists ov ov-hist', id: 'hists' });
  t.types.forEach((ty, i) => {
    const n = ty.buckets.reduce((s, b) => s + b[3], 0);
    hists.append(el('figure', { 'data-type': i }, el('figcaption', {}, (ty.service ? ty.service + ': ' : '') + ty.name + ' — ' + n + ' tasks'), typeHistogram(ty, marks[i], 260, 60)));
  });

  function select(k, lane) {
    if (selected) selected.classList.remove('sel');
    lane.classList.add('sel');
    selected = lane;
    const ty = t.types[k.type];
    detail.replaceChildren(el('h2', {}, (k.service ? k.service + ': ' : '') + k.name),
      el('p', {}, 'duration ' + fmtDur(k.duration) + ', at +' + fmtDur(k.offset) +
        (k.percentile !== undefined ? ', p' + k.percentile.toFixed(1) + ' of ' + k.type_count + ' tasks of its type' : '') +
        (k.concurrency !== undefined ? ', up to ' + k.concurrency + ' other tasks of its process at once' : '') +
        (k.critical ? ', ' + fmtDur(k.critical_ns) + ' on the critical path' : '') + (k.host ? ' on ' + k.host : '')),
      el('figure', { class: 'hist-selected' }, el('figcaption', {}, 'its type\'s latency (log counts), this task marked'),
        typeHistogram(ty, new Set(k.hist_bin !== undefined ? [k.hist_bin] : []), 520, 100)),
      el('pre', { class: 'mono' }, JSON.stringify(k.attrs, null, 1)));
  }

  const toggles = el('div', { class: 'toggles' });
  for (const [cls, label] of [['ov-crit', 'critical path'], ['ov-events', 'events'], ['ov-edges', 'edges'], ['ov-molehill', 'concurrency'], ['ov-hist', 'histograms']]) {
    const box = el('input', { type: 'checkbox', id: 't-' + cls.slice(3) });
    box.checked = true;
    box.addEventListener('change', () => {
      for (const g of document.querySelectorAll('.' + cls)) g.style.display = box.checked ? '' : 'none';
    });
    toggles.append(el('label', {}, box, ' ' + label));
  }
  const exports = el('p', { class: 'exports' }, 'export: ');
  for (const [f, label] of [['chrome', 'Chrome trace (Perfetto)'], ['otlp', 'OTLP JSON'], ['jaeger', 'Jaeger JSON']]) {
    const href = '/api/traces/' + t.trace + '/export?format=' + f;
    exports.append(el('a', { href, id: 'export-' + f, download: 'trace-' + t.trace + '-' + f + '.json', on: { click: (ev) => { if (token) { ev.preventDefault(); download(href, 'trace-' + t.trace + '-' + f + '.json'); } } } }, label));
  }
  const crit = t.tasks.filter((k) => k.critical).length;
  main(el('h2', { id: 'trace-title' }, 'Trace ' + t.trace),
    el('p', {}, t.tasks.length + ' tasks, ' + t.edges.length + ' edges on ' + t.hosts + ' hosts, ' + fmtDur(t.duration) + ' from ' + fmtTime(t.start) +
      '; critical path through ' + crit + ' tasks' + (t.context ? '' : ' (no aggregate context)')),
    exports, toggles,
    el('p', { class: 'legend' }, 'bars to scale; red: the critical path; dots: events (dark: rare, under ' + (100 * t.rare_share) + '% of the type; light: common); curves: edges, width by how often the type has them (orange: rare); green: tasks of the same process running; click a lane for its type\'s histogram'),
    chart, detail, el('h2', {}, 'Latency of each task type (log counts; red: this trace\'s tasks)'), hists);
  select(t.tasks[0], lanes.firstChild);
  status('');
}

async function download(href, name) {
  const r = await fetch(href, { headers: { Authorization: 'Bearer ' + token } });
  const url = URL.createObjectURL(await r.blob());
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  URL.revokeObjectURL(url);
}

// ---- routing ----

async function route() {
  clearInterval(timer);
  timer = null;
  const h = location.hash || '#/';
  const [path, query] = h.slice(1).split('?');
  const params = new URLSearchParams(query || '');
  let m;
  try {
    if ((m = path.match(/^\/query\/(\d+)$/))) await viewQuery(m[1]);
    else if ((m = path.match(/^\/trace\/([0-9a-fA-F]{1,32})$/))) await viewTrace(m[1]);
    else if (path === '/traces') await viewTraces(params);
    else {
      await viewCluster();
      timer = setInterval(() => viewCluster().catch((e) => status(e.message, true)), 2000);
    }
  } catch (e) {
    status(e.message, true);
    main(el('p', { class: 'err', id: 'error' }, e.message));
  }
}

document.getElementById('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  token = document.getElementById('token').value.trim();
  sessionStorage.setItem('weft-token', token);
  document.getElementById('token-form').hidden = true;
  route();
});
window.addEventListener('hashchange', route);
route();
