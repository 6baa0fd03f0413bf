// runlines dashboard: the run table, the charts and the run and diff pages, over /api/*.
"use strict";

const POLL_MS = 1000;
const COLORS = ["#3559e0", "#e8590c", "#12805c", "#c2255c", "#7048e8", "#0c8599", "#e67700",
  "#5c940d", "#d6336c", "#495057", "#1971c2", "#9c36b5"];
const GROUP_ORDER = ["train_step", "eval", "system", "span"];
const BASE_COLUMNS = ["run", "status", "attempts", "step", "duration_s", "started"];
const TOKEN = new URLSearchParams(location.search).get("token");

const state = {
  runs: [],            // rows of /api/runs
  progress: {},        // run -> /api/progress entry: still reading, torn lines
  colors: new Map(),   // run -> color
  selected: new Set(),
  series: new Map(),   // run -> last /api/series answer
  charts: new Map(),   // chart key -> {card, plot, structure}
  sort: {key: "started", desc: true},
  firstLoad: true,
  polling: false,
};

// --- helpers ------------------------------------------------------------------------------

function api(path) {
  const headers = TOKEN ? {"X-Runlines-Token": TOKEN} : {};
  return fetch(path, {headers, cache: "no-store"}).then(async (r) => {
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  });
}

function withToken(url) {
  return TOKEN ? url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN) : url;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fmt(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    const abs = Math.abs(value);
    if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(3);
    return value.toPrecision(4).replace(/\.?0+$/, "");
  }
  return JSON.stringify(value);
}

function fmtDuration(s) {
  if (s === null || s === undefined || typeof s !== "number") return "";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " m " + Math.round(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " m";
}

function fmtSeconds(s) {
  if (typeof s !== "number") return "";
  if (s >= 60) return fmtDuration(s);
  if (s >= 1) return s.toFixed(2) + " s";
  if (s >= 1e-3) return (s * 1e3).toPrecision(3) + " ms";
  return (s * 1e6).toPrecision(3) + " µs";
}

function fmtAxis(value) {
  if (value === null || value === undefined) return "";
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(1);
  return String(Number(value.toPrecision(4)));
}

function fmtTime(ts) {
  if (ts === null || ts === undefined || ts === "") return "";
  const d = typeof ts === "number" ? new Date(ts * 1000) : new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString();
}

function isNonfinite(v) { return v === "NaN" || v === "Infinity" || v === "-Infinity"; }

function colorOf(run) {
  if (!state.colors.has(run)) state.colors.set(run, COLORS[state.colors.size % COLORS.length]);
  return state.colors.get(run);
}

function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${n >> 16},${(n >> 8) & 255},${n & 255},${a})`;
}

// --- the run table --------------------------------------------------------------------------

function columns() {
  const config = new Set(), metrics = new Set();
  for (const row of state.runs) {
    for (const key of Object.keys(row)) {
      if (key.startsWith("_") || BASE_COLUMNS.includes(key) || key === "path") continue;
      (key.startsWith("config.") ? config : metrics).add(key);
    }
  }
  return [...BASE_COLUMNS, ...[...config].sort(), ...[...metrics].sort()];
}

function matchesFilter(row, text) {
  if (!text) return true;
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  const hay = Object.entries(row).map(([k, v]) => k + "=" + fmt(v)).join(" ").toLowerCase();
  return words.every((w) => hay.includes(w));
}

function sortedRows() {
  const {key, desc} = state.sort;
  const text = document.getElementById("filter").value.trim();
  const rows = state.runs.filter((r) => matchesFilter(r, text));
  rows.sort((a, b) => {
    const x = a[key], y = b[key];
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return desc ? -c : c;
  });
  return rows;
}

function renderTable() {
  const table = document.getElementById("runs");
  const cols = columns();
  const head = el("tr", {}, el("th", {}, ""), cols.map((c) => el("th", {
    "data-key": c,
    class: [c.startsWith("config.") ? "group-config" : !BASE_COLUMNS.includes(c) ? "group-metric" : "",
      state.sort.key === c ? (state.sort.desc ? "sorted-desc" : "sorted-asc") : ""].join(" ").trim() || null,
    title: c,
    onclick: () => {
      state.sort = {key: c, desc: state.sort.key === c ? !state.sort.desc : false};
      renderTable();
    },
  }, c === "duration_s" ? "duration" : c.replace(/^config\./, ""))));
  table.tHead.replaceChildren(head);
  const rows = sortedRows();
  table.tBodies[0].replaceChildren(...rows.map((row) => tableRow(row, cols)));
  document.getElementById("run-count").textContent =
    `${rows.length} of ${state.runs.length} runs · ${state.selected.size} selected`;
  document.getElementById("diff-selected").disabled = state.selected.size !== 2;
}

function tableRow(row, cols) {
  const selected = state.selected.has(row.run);
  const box = el("input", {type: "checkbox", "aria-label": "select " + row.run, checked: selected,
    onchange: (e) => toggleRun(row.run, e.target.checked)});
  return el("tr", {class: selected ? "selected" : null, "data-run": row.run},
    el("td", {}, box), cols.map((c) => cell(row, c)));
}

function cell(row, key) {
  const value = row[key];
  if (key === "run") {
    return el("td", {title: row.path}, el("span", {class: "swatch", style: `background:${colorOf(row.run)}`}),
      el("a", {href: "#/run/" + encodeURIComponent(row.run)}, row.run));
  }
  if (key === "status") {
    const progress = state.progress[row.run] || {};
    const torn = progress.torn_lines ? el("span", {class: "torn", title: `${progress.torn_lines} torn line(s) skipped`}, `⚠ ${progress.torn_lines} torn`) : null;
    const reading = progress.reading ? el("span", {class: "reading", title: "the history is still being read: metrics so far"}, "reading…") : null;
    const problems = (progress.problems || []).length ? el("span", {class: "torn problem", title: progress.problems.join("\n")}, "⚠ copy not used") : null;
    return el("td", {}, el("span", {class: "badge " + value, "data-status": value}, value), reading, torn, problems);
  }
  if (key === "duration_s") return el("td", {class: "num"}, fmtDuration(value));
  if (key === "started") return el("td", {}, fmtTime(value));
  if (isNonfinite(value)) return el("td", {class: "num nonfinite"}, value);
  return el("td", {class: typeof value === "number" ? "num" : null}, fmt(value));
}

function toggleRun(run, on) {
  if (on) state.selected.add(run); else state.selected.delete(run);
  renderTable();
  refreshCharts();
}

// --- charts -------------------------------------------------------------------------------

function xOf(answer, s, i) {
  const mode = document.getElementById("x-axis").value;
  if (mode === "step") return s.step[i];
  if (mode === "wall") return s.ts[i];
  return s.ts[i] - (answer.started ?? s.ts[0]);
}

function markX(answer, mark) {
  const mode = document.getElementById("x-axis").value;
  if (mode === "step") return mark.step;
  if (mode === "wall") return mark.ts;
  return mark.ts - (answer.started ?? mark.ts);
}

function ema(values, weight) {
  const out = new Array(values.length);
  let last = null, debias = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) { out[i] = null; continue; }
    last = last === null ? v * (1 - weight) : last * weight + v * (1 - weight);
    debias = debias * weight + (1 - weight);
    out[i] = last / debias;
  }
  return out;
}

function chartKeys() {
  const keys = new Map();
  const filter = document.getElementById("chart-filter").value.trim().toLowerCase();
  for (const run of state.selected) {
    const answer = state.series.get(run);
    for (const s of answer?.series || []) {
      const key = s.event + "\u0000" + s.field;
      if (filter && !(s.event + "." + s.field).toLowerCase().includes(filter)) continue;
      if (!keys.has(key)) keys.set(key, {event: s.event, field: s.field});
    }
  }
  return [...keys.entries()].sort(([, a], [, b]) => {
    const ga = GROUP_ORDER.indexOf(a.event), gb = GROUP_ORDER.indexOf(b.event);
    const oa = ga < 0 ? GROUP_ORDER.length : ga, ob = gb < 0 ? GROUP_ORDER.length : gb;
    return oa - ob || a.event.localeCompare(b.event) || a.field.localeCompare(b.field);
  });
}

function chartData(event, field) {
  const weight = Number(document.getElementById("smoothing").value);
  const logY = document.getElementById("log-y").checked;
  const tables = [], runs = [], marks = [];
  for (const run of [...state.selected].sort()) {
    const answer = state.series.get(run);
    const s = answer?.series?.find((x) => x.event === event && x.field === field);
    if (!s) continue;
    const order = s.y.map((_, i) => i).sort((a, b) => xOf(answer, s, a) - xOf(answer, s, b) || a - b);
    const xs = [], ys = [];
    let prev = null;
    for (const i of order) {
      let x = xOf(answer, s, i);
      if (prev !== null && x <= prev) x = prev + 1e-9 * Math.max(1, Math.abs(prev)); // uPlot wants x strictly rising
      prev = x;
      xs.push(x);
      ys.push(logY && s.y[i] <= 0 ? null : s.y[i]);
    }
    tables.push([xs, ys, ema(ys, weight)]);
    runs.push(run);
    for (const m of s.marks) marks.push({run, x: markX(answer, m), value: m.value});
    if (s.nonfinite > s.marks.length) marks.truncated = true;
  }
  return {data: tables.length ? uPlot.join(tables) : [[]], runs, marks,
    nonfinite: runs.reduce((n, run) => n + (state.series.get(run).series.find((x) => x.event === event && x.field === field)?.nonfinite || 0), 0)};
}

function drawMarks(u, marks) {
  const ctx = u.ctx;
  const top = u.bbox.top;
  ctx.save();
  ctx.font = `${10 * devicePixelRatio}px system-ui`;
  ctx.textAlign = "center";
  for (const m of marks) {
    const x = u.valToPos(m.x, "x", true);
    if (!Number.isFinite(x) || x < u.bbox.left - 1 || x > u.bbox.left + u.bbox.width + 1) continue;
    ctx.fillStyle = colorOf(m.run);
    ctx.strokeStyle = alpha("#c4321c", 0.35);
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + u.bbox.height);
    ctx.stroke();
    ctx.setLineDash([]);
    const size = 5 * devicePixelRatio;
    ctx.fillStyle = "#c4321c";
    ctx.beginPath();
    ctx.moveTo(x - size, top);
    ctx.lineTo(x + size, top);
    ctx.lineTo(x, top + size * 1.6);
    ctx.closePath();
    ctx.fill();
    ctx.fillText(m.value === "NaN" ? "NaN" : m.value === "Infinity" ? "+inf" : "-inf", x, top + size * 4);
  }
  ctx.restore();
}

function seriesOf(run, event, field) {
  return state.series.get(run)?.series?.find((x) => x.event === event && x.field === field);
}

function plotOptions(width, runs, marks, event, field) {
  const mode = document.getElementById("x-axis").value;
  const smoothing = Number(document.getElementById("smoothing").value) > 0;
  const series = [{label: mode === "step" ? "step" : mode === "wall" ? "time" : "seconds",
    value: (u, v) => v === null ? "" : mode === "wall" ? fmtTime(v) : fmt(v)}];
  for (const run of runs) {
    const color = colorOf(run);
    const few = (seriesOf(run, event, field)?.y.length || 0) < 30;  // a line of 1 point is invisible
    series.push({label: smoothing ? run + " (raw)" : run, stroke: smoothing ? alpha(color, 0.22) : color, width: 1,
      spanGaps: true, points: {show: few, fill: color}, value: (u, v) => fmt(v)});
    series.push({label: run, stroke: color, width: 1.6, spanGaps: true, points: {show: false},
      value: (u, v) => fmt(v), show: smoothing});
  }
  return {
    width, height: 220,
    scales: {x: {time: mode === "wall"}, y: {distr: document.getElementById("log-y").checked ? 3 : 1}},
    axes: [{stroke: "#667085", grid: {stroke: "#eef0f3"}, ticks: {stroke: "#e4e7ec"}},
      {stroke: "#667085", grid: {stroke: "#eef0f3"}, ticks: {stroke: "#e4e7ec"}, size: 60,
        values: (u, vals) => vals.map(fmtAxis)}],
    series,
    legend: {live: true},
    cursor: {drag: {x: true, y: false}},
    hooks: {draw: [(u) => drawMarks(u, marks)]},
  };
}

function renderCharts() {
  const container = document.getElementById("charts");
  const keys = chartKeys();
  if (!state.selected.size || !keys.length) {
    for (const c of state.charts.values()) c.plot?.destroy();
    state.charts.clear();
    container.replaceChildren(el("div", {class: "empty"}, state.selected.size
      ? "The selected runs have no numeric fields yet." : "Select runs in the table to chart them."));
    return;
  }
  const wanted = new Set(keys.map(([k]) => k));
  for (const [key, chart] of state.charts) {
    if (!wanted.has(key)) { chart.plot?.destroy(); state.charts.delete(key); }
  }
  const groups = new Map();
  for (const [key, info] of keys) {
    const group = info.event;
    if (!groups.has(group)) groups.set(group, []);
    groups.get(group).push([key, info]);
  }
  const sections = [];
  for (const [group, items] of groups) {
    const grid = el("div", {class: "chart-grid"});
    for (const [key, info] of items) grid.append(chartCard(key, info));
    sections.push(el("h2", {}, group === "span" ? "span durations (s)" : group), grid);
  }
  container.replaceChildren(...sections);
  for (const [key, info] of keys) updateChart(key, info);
}

function chartCard(key, info) {
  let chart = state.charts.get(key);
  if (!chart) {
    const marks = el("span", {class: "marks nonfinite"});
    const body = el("div", {class: "plot"});
    const card = el("div", {class: "chart", "data-event": info.event, "data-field": info.field},
      el("div", {class: "title"}, el("span", {class: "event"}, info.event + " ·"), info.field, marks), body);
    chart = {card, body, marksLabel: marks, plot: null, structure: ""};
    state.charts.set(key, chart);
  }
  return chart.card;
}

function updateChart(key, info) {
  const chart = state.charts.get(key);
  const {data, runs, marks, nonfinite} = chartData(info.event, info.field);
  const structure = [runs.join(","), document.getElementById("x-axis").value,
    document.getElementById("log-y").checked, Number(document.getElementById("smoothing").value) > 0].join("|");
  const width = Math.max(300, chart.card.clientWidth - 20);
  if (!chart.plot || chart.structure !== structure) {
    chart.plot?.destroy();
    chart.body.replaceChildren();
    chart.plot = new uPlot(plotOptions(width, runs, marks, info.event, info.field), data, chart.body);
    chart.structure = structure;
    // the legend names each run once: with smoothing on, the faint raw line needs no row
    const smoothing = Number(document.getElementById("smoothing").value) > 0;
    chart.body.querySelectorAll(".u-legend .u-series").forEach((row, i) => {
      if (i > 0 && i % 2 === (smoothing ? 1 : 0)) row.classList.add("raw");
    });
  } else {
    chart.plot.hooks.draw = [(u) => drawMarks(u, marks)];
    chart.plot.setData(data);
  }
  chart.card.dataset.runs = String(runs.length);
  chart.card.dataset.axes = structure.split("|").slice(1).join("|");  // x mode | log y | smoothed
  chart.card.dataset.points = String(data[0].length);
  chart.card.dataset.nonfinite = String(nonfinite);
  chart.marksLabel.textContent = nonfinite ? `⚠ ${nonfinite} non-finite (${[...new Set(marks.map((m) => m.value))].join(", ")})` : "";
}

async function fetchSeries(run) {
  const old = state.series.get(run);
  const query = "/api/series?run=" + encodeURIComponent(run) + (old ? "&since=" + old.version : "");
  const answer = await api(query);
  if (answer.unchanged) return false;
  state.series.set(run, answer);
  return true;
}

async function refreshCharts() {
  await Promise.all([...state.selected].map((run) => fetchSeries(run).catch(() => false)));
  renderCharts();
}

// --- polling ------------------------------------------------------------------------------

async function poll() {
  if (state.polling) return;
  state.polling = true;
  try {
    const [runs, progress] = await Promise.all([api("/api/runs"), api("/api/progress")]);
    state.runs = runs;
    state.progress = progress.runs;
    for (const row of state.runs) colorOf(row.run);
    if (state.firstLoad) {
      state.firstLoad = false;
      const recent = [...state.runs].sort((a, b) => String(b.started).localeCompare(String(a.started)));
      for (const row of recent.slice(0, 5)) state.selected.add(row.run);
    }
    for (const run of [...state.selected]) if (!state.runs.some((r) => r.run === run)) state.selected.delete(run);
    const live = document.getElementById("live");
    live.classList.remove("off");
    const behind = progress.bytes_behind;
    live.textContent = behind > 0 ? `reading logs · ${Math.max(1, Math.round(behind / 1048576))} MB to go` : "live";
    if (currentView() === "runs") {
      renderTableIfIdle();
      const changed = await Promise.all([...state.selected].map((run) => fetchSeries(run).catch(() => false)));
      if (changed.some(Boolean) || state.charts.size === 0) renderCharts();
    }
  } catch (err) {
    document.getElementById("live").classList.add("off");
    document.getElementById("live").title = String(err);
  } finally {
    state.polling = false;
  }
}

function renderTableIfIdle() {
  // leave the table alone while its filter box is being typed in or a checkbox is focused
  const active = document.activeElement;
  if (active && active.closest && active.closest("#runs")) return;
  renderTable();
}

// --- the run page -------------------------------------------------------------------------

function kvTable(object) {
  const rows = Object.entries(object || {}).map(([k, v]) => el("tr", {}, el("td", {}, k),
    el("td", {}, typeof v === "object" && v !== null ? JSON.stringify(v) : fmt(v))));
  return rows.length ? el("table", {class: "kv"}, el("tbody", {}, rows)) : el("p", {class: "muted"}, "none recorded");
}

function flatConfig(config, prefix = "", out = {}) {
  for (const [k, v] of Object.entries(config || {})) {
    if (v && typeof v === "object" && !Array.isArray(v)) flatConfig(v, prefix + k + ".", out);
    else out[prefix + k] = v;
  }
  return out;
}

function grid(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => c instanceof Node ? el("td", {}, c) : el("td", {class: typeof c === "number" ? "num" : null}, fmt(c)))))));
}

async function showRun(label) {
  const view = document.getElementById("view-run");
  view.replaceChildren(el("p", {class: "muted"}, "loading…"));
  let d;
  try { d = await api("/api/run?run=" + encodeURIComponent(label)); } catch (err) {
    view.replaceChildren(el("div", {class: "empty"}, String(err.message))); return;
  }
  setCrumbs(["run", label]);
  const attempts = grid(["attempt", "started", "status", "duration", "resume step", "error"], d.attempts.map((a) => [
    a.attempt, fmtTime(a.started), el("span", {class: "badge " + (a.status || d.row.status)}, a.status || d.row.status),
    fmtDuration(a.duration_s), a.resume_step ?? "", a.exc_type ? `${a.exc_type}: ${a.exc_message || ""}` : a.signal || (a.exit_code ?? "")]));
  const spans = Object.keys(d.spans).length
    ? grid(["span", "count", "total", "mean", "max"], Object.entries(d.spans).map(([n, s]) => [n, s.count, fmtSeconds(s.total_s), fmtSeconds(s.mean_s), fmtSeconds(s.max_s)]))
    : el("p", {class: "muted"}, "no spans");
  const images = d.artifacts.filter((a) => a.image);
  const others = d.artifacts.filter((a) => !a.image);
  const artifactUrl = (a) => withToken("/api/artifact?run=" + encodeURIComponent(label) + "&path=" + encodeURIComponent(a.path));
  const artifacts = el("div", {},
    images.length ? el("div", {class: "images"}, images.map((a) => el("figure", {},
      el("img", {src: artifactUrl(a), alt: a.name, loading: "lazy"}),
      el("figcaption", {}, `${a.name}${a.step !== undefined && a.step !== null ? " · step " + a.step : ""}`)))) : null,
    others.length ? grid(["name", "path", "bytes", "step"], others.map((a) => [el("a", {href: artifactUrl(a)}, a.name), a.path, a.bytes, a.step ?? ""])) : null,
    d.artifacts.length ? null : el("p", {class: "muted"}, "no artifacts"));
  const lastKeys = [...new Set(d.ranks.flatMap((r) => Object.keys(r.last)))].sort();
  const ranks = grid(["", ...d.ranks.map((r) => "rank " + r.rank)], [
    ["records", ...d.ranks.map((r) => r.records)],
    ["torn lines", ...d.ranks.map((r) => r.torn_lines)],
    ["step", ...d.ranks.map((r) => r.step)],
    ...lastKeys.map((k) => [k, ...d.ranks.map((r) => r.last[k] ?? "")]),
  ]);
  const failed = d.attempts.find((a) => a.exc_type);
  view.replaceChildren(
    el("div", {class: "panel"}, el("h1", {}, label), el("div", {class: "muted"}, d.path, " · ",
      el("span", {class: "badge " + d.row.status}, d.row.status), ` · ${d.row.attempts} attempt(s) · step ${fmt(d.row.step)} · ${fmtDuration(d.row.duration_s)}`,
      d.progress.torn_lines ? el("span", {class: "torn"}, `⚠ ${d.progress.torn_lines} torn line(s) skipped`) : null),
      (d.progress.problems || []).map((text) => el("div", {class: "torn problem"}, `⚠ ${text}`))),
    el("div", {class: "grid2"},
      el("div", {class: "panel"}, el("h2", {}, "Config"), kvTable(flatConfig(d.config))),
      el("div", {class: "panel"}, el("h2", {}, "Environment"), kvTable(d.environment))),
    el("div", {class: "panel"}, el("h2", {}, "Attempts"), attempts,
      failed ? el("pre", {class: "trace"}, `${failed.exc_type}: ${failed.exc_message || ""}`) : null),
    el("div", {class: "grid2"},
      el("div", {class: "panel"}, el("h2", {}, "Spans"), spans),
      el("div", {class: "panel"}, el("h2", {}, "Ranks"), ranks)),
    el("div", {class: "panel"}, el("h2", {}, "Artifacts"), artifacts));
}

// --- the diff page ------------------------------------------------------------------------

async function showDiff(a, b) {
  const view = document.getElementById("view-diff");
  view.replaceChildren(el("p", {class: "muted"}, "comparing…"));
  let d;
  try { d = await api(`/api/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`); } catch (err) {
    view.replaceChildren(el("div", {class: "empty"}, String(err.message))); return;
  }
  setCrumbs(["diff", `${a} ↔ ${b}`]);
  // which record of the step differs, by its string fields (split=val), as `runlines diff` says
  const where = (w) => (w && Object.keys(w).length ? ` (${Object.entries(w).map(([k, v]) => `${k}=${v}`).join(", ")})` : "");
  // d is runlines.diff's JSON form, as `runlines diff --json` prints it
  const config = [
    ...Object.entries(d.removed).map(([k, v]) => [el("span", {class: "removed"}, "− " + k), fmt(v), ""]),
    ...Object.entries(d.added).map(([k, v]) => [el("span", {class: "added"}, "+ " + k), "", fmt(v)]),
    ...Object.entries(d.changed).map(([k, [x, y]]) => [el("span", {class: "changed"}, "~ " + k), fmt(x), fmt(y)]),
  ];
  const environment = Object.entries(d.environment).map(([k, [x, y]]) => [k, fmt(x), fmt(y)]);
  const metrics = d.metrics.map((m) => [m.event + "." + m.field,
    m.agrees ? el("span", {class: "added"}, `agree up to step ${fmt(m.last_shared_step)}`) : el("span", {class: "changed"}, `differ from step ${fmt(m.step)}${where(m.where)}`),
    m.agrees ? "" : fmt(m.a), m.agrees ? "" : fmt(m.b)]);
  view.replaceChildren(
    el("div", {class: "panel"}, el("h1", {}, `${a} ↔ ${b}`)),
    el("div", {class: "panel"}, el("h2", {}, "Config"), config.length ? grid(["key", a, b], config) : el("p", {class: "muted"}, "same config")),
    el("div", {class: "panel"}, el("h2", {}, "Environment"), environment.length ? grid(["key", a, b], environment) : el("p", {class: "muted"}, "same environment, as far as both recorded it")),
    el("div", {class: "panel"}, el("h2", {}, "Metrics"), metrics.length ? grid(["metric", "", a, b], metrics) : el("p", {class: "muted"}, "no (event, field) logged by both at the same steps")));
}

// --- routing ------------------------------------------------------------------------------

function currentView() {
  const hash = location.hash;
  if (hash.startsWith("#/run/")) return "run";
  if (hash.startsWith("#/diff/")) return "diff";
  return "runs";
}

function setCrumbs(parts) {
  const crumbs = document.getElementById("crumbs");
  crumbs.replaceChildren(...(parts.length ? [el("a", {href: "#/"}, "runs"), " / ", parts.join(" / ")] : []));
}

function route() {
  const view = currentView();
  for (const name of ["runs", "run", "diff"]) document.getElementById("view-" + name).hidden = name !== view;
  const parts = location.hash.split("/").slice(2).map(decodeURIComponent);
  if (view === "run") showRun(parts[0]);
  else if (view === "diff") showDiff(parts[0], parts[1]);
  else { setCrumbs([]); renderTable(); renderCharts(); poll(); }
}

function init() {
  document.getElementById("filter").addEventListener("input", renderTable);
  document.getElementById("chart-filter").addEventListener("input", renderCharts);
  for (const id of ["x-axis", "log-y"]) document.getElementById(id).addEventListener("change", renderCharts);
  const smoothing = document.getElementById("smoothing");
  smoothing.addEventListener("input", () => {
    document.getElementById("smoothing-value").textContent = Number(smoothing.value).toFixed(2);
    renderCharts();
  });
  document.getElementById("select-none").addEventListener("click", () => {
    state.selected.clear(); renderTable(); renderCharts();
  });
  document.getElementById("diff-selected").addEventListener("click", () => {
    const [a, b] = [...state.selected];
    location.hash = `#/diff/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
  });
  let resize = null;
  window.addEventListener("resize", () => {
    clearTimeout(resize);
    resize = setTimeout(() => { for (const c of state.charts.values()) c.plot?.setSize({width: Math.max(300, c.card.clientWidth - 20), height: 220}); }, 150);
  });
  window.addEventListener("hashchange", route);
  route();
  setInterval(() => { if (currentView() === "runs") poll(); }, POLL_MS);
}

init();
