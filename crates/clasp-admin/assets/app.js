// The clasp dashboard: the pipeline graph with each operator's placement, time series of the
// run, the estimates as they converge and the scaling events, refreshed every second from the
// JSON API (docs/admin-api.md).
"use strict";

const api = (path) => fetch("/api/v1/" + path).then((r) => (r.ok ? r.json() : null));
const svgNs = "http://www.w3.org/2000/svg";
const workerColor = (w) => `hsl(${(w * 137.508) % 360}, 62%, 52%)`;
let pipeline = null;
let events = [];
let updates = 0;

function el(tag, attrs, parent, ns) {
  const e = ns ? document.createElementNS(svgNs, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  if (parent) parent.appendChild(e);
  return e;
}

// Columns by longest path from the sources, so 20 operators spread over a few columns.
function layout(p) {
  const depth = new Map();
  const key = (kind, name) => kind + ":" + name;
  p.sources.forEach((s) => depth.set(key("source", s), 0));
  for (let changed = true, n = 0; changed && n < 1000; n++) {
    changed = false;
    for (const s of p.streams) {
      const from = depth.get(key(s.from_kind, s.from));
      if (from === undefined) continue;
      const to = key(s.to_kind, s.to);
      if ((depth.get(to) ?? -1) < from + 1) {
        depth.set(to, from + 1);
        changed = true;
      }
    }
  }
  const maxOp = Math.max(1, ...p.operators.map((o) => depth.get(key("operator", o.name)) ?? 1));
  p.sinks.forEach((s) => depth.set(key("sink", s), maxOp + 1));
  const columns = [];
  const nodes = [];
  const add = (kind, name) => {
    const d = depth.get(key(kind, name)) ?? 0;
    (columns[d] = columns[d] || []).push(key(kind, name));
    nodes.push({ kind, name, key: key(kind, name), col: d });
  };
  p.sources.forEach((s) => add("source", s));
  p.operators.forEach((o) => add("operator", o.name));
  p.sinks.forEach((s) => add("sink", s));
  const rows = Math.max(...columns.map((c) => (c ? c.length : 0)));
  const W = 170, H = 58, GX = 40, GY = 12;
  const pos = new Map();
  for (const n of nodes) {
    const col = columns[n.col];
    const row = col.indexOf(n.key);
    const offset = ((rows - col.length) * (H + GY)) / 2;
    pos.set(n.key, { x: n.col * (W + GX) + 4, y: offset + row * (H + GY) + 4, w: W, h: H });
  }
  return { nodes, pos, width: columns.length * (W + GX), height: rows * (H + GY) + 8 };
}

function drawGraph(placement) {
  if (!pipeline) return;
  const svg = document.getElementById("graph");
  const { nodes, pos, width, height } = layout(pipeline);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.style.maxHeight = Math.max(160, height) + "px";
  svg.replaceChildren();
  for (const s of pipeline.streams) {
    const a = pos.get(s.from_kind + ":" + s.from), b = pos.get(s.to_kind + ":" + s.to);
    if (!a || !b) continue;
    const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2, mx = (x1 + x2) / 2;
    el("path", { class: "edge", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}` }, svg, true);
  }
  const byOp = new Map((placement?.operators || []).map((o) => [o.operator, o]));
  const workers = new Set();
  for (const n of nodes) {
    const p = pos.get(n.key);
    if (n.kind !== "operator") {
      const g = el("g", { class: "endpoint", "data-endpoint": n.name }, svg, true);
      el("rect", { x: p.x, y: p.y + 14, width: p.w, height: p.h - 28, rx: 12 }, g, true);
      el("text", { x: p.x + 10, y: p.y + p.h / 2 + 4, text: `${n.kind} ${n.name}` }, g, true);
      continue;
    }
    const op = byOp.get(n.name);
    const g = el("g", { class: "op", "data-operator": n.name }, svg, true);
    el("rect", { class: "box", x: p.x, y: p.y, width: p.w, height: p.h }, g, true);
    el("text", { x: p.x + 6, y: p.y + 15, text: n.name }, g, true);
    const shares = op ? op.shares : [];
    const meta = op ? `×${op.parallelism} on ${shares.length} worker${shares.length === 1 ? "" : "s"}` : "not placed";
    el("text", { class: "meta", x: p.x + 6, y: p.y + 29, text: meta }, g, true);
    // One segment per worker, as wide as its share σ_o(w).
    let x = p.x + 6;
    const bw = p.w - 12;
    for (const s of shares) {
      workers.add(s.worker);
      const w = Math.max(1, s.fraction * bw);
      const r = el("rect", { class: "share", "data-worker": s.worker, x, y: p.y + 36, width: w, height: 14, fill: workerColor(s.worker) }, g, true);
      el("title", { text: `worker ${s.worker}: ${(s.fraction * 100).toFixed(1)} %, ${s.instances} instance(s), ${s.key_groups} key groups` }, r, true);
      if (w > 18) el("text", { x: x + 3, y: p.y + 47, fill: "#fff", "font-size": 9, text: "w" + s.worker }, g, true);
      x += w;
    }
  }
  const legend = document.getElementById("legend");
  legend.replaceChildren();
  [...workers].sort((a, b) => a - b).forEach((w) => {
    const s = el("span", {}, legend);
    el("i", { style: `background:${workerColor(w)}` }, s);
    s.appendChild(document.createTextNode("worker " + w));
  });
}

// Scaling events as vertical marks: solid for rescales, dashed for recommendations.
const eventMarks = {
  hooks: {
    draw: [
      (u) => {
        const ctx = u.ctx;
        ctx.save();
        let marks = 0;
        for (const e of events) {
          const x = u.valToPos(e.time_s, "x", true);
          if (!(x >= u.bbox.left && x <= u.bbox.left + u.bbox.width)) continue;
          marks += 1;
          ctx.strokeStyle = e.kind === "rescale" ? "#d64545" : "#e89b2c";
          ctx.setLineDash(e.kind === "rescale" ? [] : [4, 4]);
          ctx.lineWidth = 1.5;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
        }
        ctx.restore();
        // How many marks the chart shows, for tests and scripts reading the page.
        u.root.parentElement.dataset.marks = String(marks);
      },
    ],
  },
};

const charts = {};
function chart(id, series, extra) {
  const node = document.getElementById(id);
  const opts = Object.assign(
    {
      width: Math.max(300, node.clientWidth),
      height: 200,
      series: [{ label: "t (s)" }, ...series],
      axes: [{}, { size: 60 }],
      scales: { x: { time: false } },
      plugins: [eventMarks],
      legend: { live: false },
    },
    extra || {}
  );
  charts[id] = { plot: new uPlot(opts, [[], ...series.map(() => [])], node), node };
}

function setData(id, data) {
  const c = charts[id];
  c.plot.setData(data);
  c.node.dataset.points = String(data[0].length);
}

function initCharts() {
  chart("chart-rate", [
    { label: "input", stroke: "#5b8def", width: 1.5 },
    { label: "throughput", stroke: "#2fa36b", width: 1.5 },
  ]);
  chart("chart-latency", [
    { label: "p50", stroke: "#2fa36b", width: 1.5 },
    { label: "p95", stroke: "#d64545", width: 1.5 },
  ]);
  chart("chart-workers", [
    { label: "active", stroke: "#5b8def", width: 2, paths: uPlot.paths.stepped({ align: 1 }) },
    { label: "desired", stroke: "#e89b2c", width: 1.5, dash: [5, 4], paths: uPlot.paths.stepped({ align: 1 }) },
  ]);
  chart("chart-alpha-beta", [
    { label: "α", stroke: "#5b8def", width: 1.5 },
    { label: "β", stroke: "#d64545", width: 1.5 },
  ]);
  chart(
    "chart-gamma-capacity",
    [
      { label: "γ", stroke: "#8a5bd6", width: 1.5, scale: "g" },
      { label: "W̄", stroke: "#2fa36b", width: 1.5, scale: "w" },
    ],
    { axes: [{}, { scale: "g", size: 60 }, { scale: "w", side: 1, size: 60, grid: { show: false } }], scales: { x: { time: false }, g: {}, w: {} } }
  );
}

const fmt = (x, d = 0) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));

function drawWorkers(workers) {
  const body = document.querySelector("#workers tbody");
  body.replaceChildren();
  for (const w of workers) {
    const tr = el("tr", {}, body);
    const id = el("td", {}, tr);
    el("i", { style: `display:inline-block;width:9px;height:9px;margin-right:4px;background:${workerColor(w.id)}` }, id);
    id.appendChild(document.createTextNode(w.id));
    el("td", { text: w.addr }, tr);
    const load = el("td", {}, tr);
    el("span", { class: "bar", style: `width:${Math.min(60, w.utilization * 60)}px` }, load);
    load.appendChild(document.createTextNode(fmt(w.utilization * 100) + " %"));
    el("td", { text: w.queue_now }, tr);
    el("td", { text: w.destinations }, tr);
    el("td", { text: w.state_keys }, tr);
  }
}

function drawEvents() {
  const body = document.querySelector("#events tbody");
  body.replaceChildren();
  for (const e of [...events].reverse()) {
    const tr = el("tr", {}, body);
    for (const v of [fmt(e.time_s, 1), e.kind, e.reason, `${e.from_workers} → ${e.to_workers}`, fmt(e.target_rate), fmt(e.planner_ms, 1), fmt(e.max_worker_pause_ms, 1), e.keys_moved]) {
      el("td", { text: v }, tr);
    }
  }
}

async function refresh() {
  const [series, coefficients, evs, placement, workers, counters, scaler] = await Promise.all(
    ["series", "coefficients", "events", "placement", "workers", "counters", "autoscaler"].map((p) => api(p).catch(() => null))
  );
  if (evs) events = evs;
  if (series) {
    const t = series.map((p) => p.t);
    setData("chart-rate", [t, series.map((p) => p.input_rate), series.map((p) => p.throughput)]);
    setData("chart-latency", [t, series.map((p) => p.p50_ms), series.map((p) => p.p95_ms)]);
    setData("chart-workers", [t, series.map((p) => p.workers), series.map((p) => p.desired_workers)]);
  }
  if (coefficients) {
    const h = coefficients.history;
    const t = h.map((s) => s.time_s);
    setData("chart-alpha-beta", [t, h.map((s) => s.coefficients.alpha), h.map((s) => s.coefficients.beta)]);
    setData("chart-gamma-capacity", [t, h.map((s) => s.coefficients.gamma), h.map((s) => s.coefficients.capacity / 1e6)]);
  }
  drawGraph(placement);
  if (workers) drawWorkers(workers);
  drawEvents();
  if (counters && scaler) {
    const active = placement ? placement.workers : 0;
    document.getElementById("status").innerHTML =
      `${fmt(counters.elapsed_s, 1)} s · ${counters.input_requests} requests in · ${counters.completed} done · ` +
      `workers <b>${active}</b> (desired ${scaler.desired_workers}) · ${scaler.mode}` +
      (counters.finished ? " · finished" : "");
  }
  updates += 1;
  document.body.dataset.updates = String(updates);
}

async function main() {
  pipeline = await api("pipeline");
  const scaler = await api("autoscaler");
  document.getElementById("job").textContent = `${pipeline.name} · policy ${scaler ? scaler.policy : "?"}`;
  initCharts();
  await refresh();
  setInterval(refresh, 1000);
  window.addEventListener("resize", () => {
    for (const c of Object.values(charts)) c.plot.setSize({ width: Math.max(300, c.node.clientWidth), height: 200 });
  });
}

main();
