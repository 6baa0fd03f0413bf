// runlines dashboard: the run table, the charts and the run and diff pages, over /api/*.
"use strict";

const POLL_MS = 1000;
const COLORS = ["#3559e0", "#e8590c", "#12805c", "#c2255c", "#7048e8", "#0c8599", "#e67700",
  "#5c940d", "#d6336c", "#495057", "#1971c2", "#9c36b5"];
const SELECT_LIMIT = 5;  // runs selected on the first load, and by "follow new runs" at most
const BASE_COLUMNS = ["run", "status", "attempts", "step", "duration_s", "started"];
const NOTE_COLUMNS = TABLE_NOTE_COLUMNS;  // static/table.js
const TOKEN = new URLSearchParams(location.search).get("token");
// eval-like events chart after the user's own ones: eval, val_*, test, validation/...
const EVAL_LIKE = /(^|[_\/.-])(eval\w*|val|valid|validation|test|testing)([_\/.-]|$)/i;
const AXIS_FONT = "12px system-ui";

const state = {
  runs: [],            // rows of /api/runs
  progress: {},        // run -> /api/progress entry: still reading, torn lines
  colors: new Map(),   // run -> color
  selected: new Set(),
  series: new Map(),   // run -> last /api/series answer
  units: {},           // run table column -> its unit: "bytes", "s" or "%"
  known: new Set(),    // the runs the page has seen: one beyond them started while it was open
  pins: pinsOfUrl(),   // chart keys pinned to the top, in the URL as ?pin=event:field
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

// a number in *digits* significant digits: exponent form when very large or very small
function fmtDigits(value, digits) {
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(Math.max(0, digits - 1));
  return String(Number(value.toPrecision(digits)));
}

const BYTE_PREFIXES = ["B", "kB", "MB", "GB", "TB", "PB"];

// the scale of *unit* that shows *magnitude* best: [divisor, suffix]
function unitScale(unit, magnitude) {
  const abs = Math.abs(magnitude);
  if (unit === "bytes") {
    let i = 0;
    while (i < BYTE_PREFIXES.length - 1 && abs >= 1000 ** (i + 1)) i++;
    return [1000 ** i, " " + BYTE_PREFIXES[i]];
  }
  if (unit === "s") {
    if (abs === 0 || abs >= 1) return abs >= 3600 ? [3600, " h"] : abs >= 60 ? [60, " min"] : [1, " s"];
    if (abs >= 1e-3) return [1e-3, " ms"];
    return abs >= 1e-6 ? [1e-6, " µs"] : [1e-9, " ns"];
  }
  if (unit === "%") return [1, " %"];
  return [1, ""];
}

// a value in its unit: 25.3 GB, 1.2 ms, 45 %; a plain number without a unit
function fmtUnit(value, unit) {
  if (!unit || typeof value !== "number" || !Number.isFinite(value)) return fmt(value);
  const [divisor, suffix] = unitScale(unit, value);
  return fmtDigits(value / divisor, 3) + suffix;
}

// tick labels: one scale for the axis, and as many digits as say each tick exactly (1250, not
// 1300), which keeps every label distinct
function fmtTicks(values, unit, increment) {
  const finite = values.filter((v) => v !== null && v !== undefined && Number.isFinite(v));
  if (!finite.length) return values.map(() => "");
  const [divisor, suffix] = unitScale(unit, Math.max(...finite.map(Math.abs)));
  const gaps = finite.slice(1).map((v, i) => Math.abs(v - finite[i])).filter((g) => g > 0);
  const step = increment > 0 ? increment : gaps.length ? Math.min(...gaps) : Math.abs(finite[0]) || 1;
  const label = (v, digits) => v === null || v === undefined ? "" : fmtDigits(v / divisor, digits) + suffix;
  for (let digits = 1; digits < 17; digits++) {
    const labels = values.map((v) => label(v, digits));
    // exact to a millionth of the step, and of the value itself (log scales step by a factor)
    const exact = finite.every((v) => Math.abs(parseFloat(label(v, digits)) * divisor - v) <= Math.min(step, Math.abs(v) || step) * 1e-6);
    if (exact && new Set(labels).size === labels.length) return labels;
  }
  return values.map((v) => label(v, 17));
}

let measurer = null;
function textWidth(text) {
  measurer = measurer || document.createElement("canvas").getContext("2d");
  measurer.font = AXIS_FONT;
  return measurer.measureText(text).width;
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
      if (key.startsWith("_") || BASE_COLUMNS.includes(key) || NOTE_COLUMNS.includes(key) || key === "path") continue;
      (key.startsWith("config.") ? config : metrics).add(key);
    }
  }
  // the metrics first, the user's events' before eval-like, system and span ones: they are what
  // a sweep is compared by, and are seen without scrolling
  const group = (key) => groupOf(key.split(".")[0]);
  const byGroup = (a, b) => group(a) - group(b) || (a < b ? -1 : a > b ? 1 : 0);
  return [...BASE_COLUMNS, ...noteColumns(state.runs), ...[...metrics].sort(byGroup), ...[...config].sort()];
}

// "tag:NAME" in the filter keeps the runs tagged NAME; other words match any column's text
function matchesFilter(row, text) { return rowMatches(row, text, fmt); }  // static/table.js

function sortedRows() {
  const text = document.getElementById("filter").value.trim();
  return sortRows(state.runs.filter((r) => matchesFilter(r, text)), state.sort);
}

function renderTable() {
  const table = document.getElementById("runs");
  const cols = columns();
  table.tHead.replaceChildren(tableHead(cols, state.sort, [...BASE_COLUMNS, ...NOTE_COLUMNS], (sort) => { state.sort = sort; renderTable(); }));
  table.dataset.columns = cols.join("|");
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
  if (key === "tags") return tagsCell(value, {}, filterByTag);
  if (key === "notes") return notesCell(value, {});
  if (key === "duration_s") return el("td", {class: "num"}, fmtDuration(value));
  if (key === "started") return el("td", {}, fmtTime(value));
  if (isNonfinite(value)) return el("td", {class: "num nonfinite"}, value);
  const unit = state.units[key];
  return el("td", {class: typeof value === "number" ? "num" : null, title: unit && typeof value === "number" ? String(value) : null},
    fmtUnit(value, unit));
}

function filterByTag(tag) {
  const box = document.getElementById("filter");
  box.value = "tag:" + tag;
  renderTable();
  refreshCharts();
}

function toggleRun(run, on) {
  if (on) state.selected.add(run); else state.selected.delete(run);
  renderTable();
  refreshCharts();
}

// --- charts -------------------------------------------------------------------------------
// A board is a set of charts over some runs: the runs page's (the selected runs the table
// filter lets through), and a run page's (that run only).

function newBoard(container, runs, pinnable) {
  return {container, runs, pinnable, charts: new Map()};  // chart key -> {card, plot, structure}
}

const mainBoard = newBoard(null, shownRuns, true);
let runBoard = null;

function shownRuns() {
  const text = document.getElementById("filter").value.trim();
  const rows = new Map(state.runs.map((r) => [r.run, r]));
  return [...state.selected].filter((run) => rows.has(run) && matchesFilter(rows.get(run), text)).sort();
}

function chartKey(event, field) { return event + ":" + field; }

function pinsOfUrl() {
  return new URLSearchParams(location.search).getAll("pin");
}

function togglePin(key) {
  const at = state.pins.indexOf(key);
  if (at >= 0) state.pins.splice(at, 1); else state.pins.push(key);
  const params = new URLSearchParams(location.search);
  params.delete("pin");
  for (const pin of state.pins) params.append("pin", pin);
  const query = params.toString();
  history.replaceState(null, "", location.pathname + (query ? "?" + query : "") + location.hash);
  renderCharts();
}

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

// which group an event's charts are in: the user's own events, eval-like, system, spans
function groupOf(event) {
  if (event === "span") return 3;
  if (event === "system") return 2;
  return EVAL_LIKE.test(event) ? 1 : 0;
}

const GROUP_TITLES = ["", "", "system", "span durations"];

function chartKeys(board) {
  const keys = new Map(), order = new Map();  // event -> when first logged, over the runs
  const filter = document.getElementById("chart-filter").value.trim().toLowerCase();
  for (const run of board.runs()) {
    const answer = state.series.get(run);
    for (const event of answer?.events || []) if (!order.has(event)) order.set(event, order.size);
    for (const s of answer?.series || []) {
      const key = chartKey(s.event, s.field);
      if (filter && !(s.event + "." + s.field).toLowerCase().includes(filter)) continue;
      if (!order.has(s.event)) order.set(s.event, order.size);
      if (!keys.has(key)) keys.set(key, {event: s.event, field: s.field, unit: s.unit});
    }
  }
  const pins = board.pinnable ? state.pins : [];
  const rank = ([key, info]) => [pins.includes(key) ? pins.indexOf(key) - pins.length : groupOf(info.event), order.get(info.event)];
  return [...keys.entries()].sort((a, b) => {
    const [ga, oa] = rank(a), [gb, ob] = rank(b);
    return ga - gb || oa - ob || a[1].field.localeCompare(b[1].field);
  });
}

function chartData(board, event, field) {
  const weight = Number(document.getElementById("smoothing").value);
  const logY = document.getElementById("log-y").checked;
  const tables = [], runs = [], marks = [];
  let nonfinite = 0;
  for (const run of board.runs()) {
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
    for (const m of s.marks) marks.push({run, x: markX(answer, m), step: m.step, value: m.value});
    nonfinite += s.nonfinite;
  }
  // the marks' x join the data (with no value): the x range holds every mark, past the last point too
  const markXs = [...new Set(marks.map((m) => m.x).filter(Number.isFinite))].sort((a, b) => a - b);
  if (markXs.length && tables.length) tables.push([markXs]);
  return {data: tables.length ? uPlot.join(tables) : [[]], runs, marks, nonfinite};
}

function markName(value) { return value === "NaN" ? "NaN" : value === "Infinity" ? "+inf" : "-inf"; }

function drawMarks(u, marks) {
  const ctx = u.ctx;
  const top = u.bbox.top;
  ctx.save();
  ctx.font = `${10 * devicePixelRatio}px system-ui`;
  ctx.textAlign = "center";
  const labelled = new Set();  // one label per run and value: a run of inf is one label
  for (const m of marks) {
    const x = u.valToPos(m.x, "x", true);
    if (!Number.isFinite(x) || x < u.bbox.left - 1 || x > u.bbox.left + u.bbox.width + 1) continue;
    const color = m.color || colorOf(m.run);  // a group's mark (groups.js) has its group's colour
    ctx.strokeStyle = alpha(color, 0.35);
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + u.bbox.height);
    ctx.stroke();
    ctx.setLineDash([]);
    const size = 5 * devicePixelRatio;
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.moveTo(x - size, top);
    ctx.lineTo(x + size, top);
    ctx.lineTo(x, top + size * 1.6);
    ctx.closePath();
    ctx.fill();
    const label = m.run + "\u0000" + m.value;
    if (labelled.has(label)) continue;
    labelled.add(label);
    ctx.textAlign = x > u.bbox.left + u.bbox.width * 0.8 ? "right" : "center";
    ctx.fillText(`${markName(m.value)} · ${m.run}`, x, top + size * 4);
  }
  ctx.restore();
}

// the marks near the cursor, named with their run: the chart's tooltip
function markTooltip(u, marks) {
  const left = u.cursor.left;
  if (left === undefined || left < 0) { u.over.title = ""; return; }
  const near = marks.filter((m) => Math.abs(u.valToPos(m.x, "x") - left) <= 6);
  u.over.title = near.map((m) => `${m.run}: ${m.value} at step ${fmt(m.step)}`).join("\n");
}

// "nan: NaN ×1 from step 3 · inf: Infinity ×10 from step 91": each run's non-finite values
function marksSummary(marks) {
  const groups = new Map();
  for (const m of marks) {
    const key = m.run + "\u0000" + m.value;
    if (!groups.has(key)) groups.set(key, {run: m.run, value: m.value, count: 0, step: m.step});
    groups.get(key).count++;
  }
  return [...groups.values()].map((g) => `${g.run}: ${g.value} ×${g.count} from step ${fmt(g.step)}`);
}

function seriesOf(run, event, field) {
  return state.series.get(run)?.series?.find((x) => x.event === event && x.field === field);
}

// an axis as wide as its widest label: none is ever cut off
function axisSize(u, values) {
  return Math.ceil(Math.max(24, ...(values || []).map(textWidth))) + 14;
}

function plotOptions(board, width, runs, marks, info) {
  const {event, field, unit} = info;
  const mode = document.getElementById("x-axis").value;
  const smoothing = Number(document.getElementById("smoothing").value) > 0;
  const xUnit = mode === "relative" ? "s" : null;
  const series = [{label: mode === "step" ? "step" : mode === "wall" ? "time" : "seconds",
    value: (u, v) => v === null ? "" : mode === "wall" ? fmtTime(v) : fmtUnit(v, xUnit)}];
  for (const run of runs) {
    const color = colorOf(run);
    const few = (seriesOf(run, event, field)?.y.length || 0) < 30;  // a line of 1 point is invisible
    series.push({label: smoothing ? run + " (raw)" : run, stroke: smoothing ? alpha(color, 0.22) : color, width: 1,
      spanGaps: true, points: {show: few, fill: color}, value: (u, v) => fmtUnit(v, unit)});
    series.push({label: run, stroke: color, width: 1.6, spanGaps: true, points: {show: false},
      value: (u, v) => fmtUnit(v, unit), show: smoothing});
  }
  const chart = () => board.charts.get(chartKey(event, field));
  const axis = {stroke: "#667085", grid: {stroke: "#eef0f3"}, ticks: {stroke: "#e4e7ec"}, font: AXIS_FONT};
  return {
    width, height: 220,
    padding: [12, 28, 0, 0],  // room for the last x label, centred on the right edge
    scales: {x: {time: mode === "wall"}, y: {distr: document.getElementById("log-y").checked ? 3 : 1}},
    axes: [
      mode === "wall" ? axis : {...axis, space: 64, values: (u, vals, i, space, incr) => {  // 64 px: room for 1.25e+6
        const labels = fmtTicks(vals, xUnit, incr);
        const c = chart();
        if (c) c.card.dataset.xTicks = labels.join("|");
        return labels;
      }},
      {...axis, size: axisSize, values: (u, vals, i, space, incr) => {
        const labels = fmtTicks(vals, unit, incr);
        const c = chart();
        if (c) c.card.dataset.yTicks = labels.join("|");
        return labels;
      }},
    ],
    series,
    legend: {live: true},
    cursor: {drag: {x: true, y: false}},
    hooks: {
      draw: [(u) => drawMarks(u, chart()?.marks || marks), (u) => {
        const c = chart();
        if (!c) return;
        c.card.dataset.xMin = String(u.scales.x.min);
        c.card.dataset.xMax = String(u.scales.x.max);
        c.card.dataset.yAxisWidth = String(u.axes[1]._size);
      }],
      setCursor: [(u) => markTooltip(u, chart()?.marks || marks)],
    },
  };
}

function renderCharts() {
  // groups.js draws the runs page's charts when grouped, on a field's x axis or on log x
  if (typeof groupView === "undefined" || !groupView.renderMain()) renderBoard(mainBoard);
  if (runBoard && currentView() === "run") renderBoard(runBoard);
}

function renderBoard(board) {
  const container = board.container;
  if (!container) return;
  const keys = chartKeys(board);
  const runs = board.runs();
  if (!runs.length || !keys.length) {
    for (const c of board.charts.values()) c.plot?.destroy();
    board.charts.clear();
    container.replaceChildren(el("div", {class: "empty"}, !board.pinnable ? "This run has no numeric fields yet."
      : runs.length ? "The selected runs have no numeric fields yet."
        : state.selected.size ? "The table filter hides every selected run." : "Select runs in the table to chart them."));
    return;
  }
  const wanted = new Set(keys.map(([k]) => k));
  for (const [key, chart] of board.charts) {
    if (!wanted.has(key)) { chart.plot?.destroy(); board.charts.delete(key); }
  }
  const groups = new Map();
  for (const [key, info] of keys) {
    const group = board.pinnable && state.pins.includes(key) ? "pinned" : groupOf(info.event) >= 2 ? GROUP_TITLES[groupOf(info.event)] : info.event;
    if (!groups.has(group)) groups.set(group, []);
    groups.get(group).push([key, info]);
  }
  const sections = [];
  for (const [group, items] of groups) {
    const grid = el("div", {class: "chart-grid"});
    for (const [key, info] of items) grid.append(chartCard(board, key, info));
    sections.push(el("h2", {}, group), grid);
  }
  container.replaceChildren(...sections);
  for (const [key, info] of keys) updateChart(board, key, info);
}

function chartCard(board, key, info) {
  let chart = board.charts.get(key);
  if (!chart) {
    const marks = el("span", {class: "marks nonfinite"});
    const body = el("div", {class: "plot"});
    const pin = board.pinnable ? el("button", {type: "button", class: "pin", title: "pin this chart to the top",
      "aria-label": "pin " + info.event + "." + info.field, onclick: () => togglePin(key)}, "pin") : null;
    const card = el("div", {class: "chart", "data-event": info.event, "data-field": info.field},
      el("div", {class: "title"}, el("span", {class: "event"}, info.event + " ·"), info.field,
        info.unit ? el("span", {class: "unit"}, `(${info.unit === "bytes" ? "bytes" : info.unit})`) : null, marks, pin), body);
    chart = {card, body, marksLabel: marks, pin, plot: null, structure: "", marks: []};
    board.charts.set(key, chart);
  }
  const pinned = board.pinnable && state.pins.includes(key);
  chart.card.classList.toggle("pinned", pinned);
  if (chart.pin) {
    chart.pin.textContent = pinned ? "unpin" : "pin";
    chart.pin.setAttribute("aria-pressed", pinned ? "true" : "false");
  }
  return chart.card;
}

function updateChart(board, key, info) {
  const chart = board.charts.get(key);
  const {data, runs, marks, nonfinite} = chartData(board, info.event, info.field);
  chart.marks = marks;
  const structure = [runs.join(","), document.getElementById("x-axis").value,
    document.getElementById("log-y").checked, Number(document.getElementById("smoothing").value) > 0].join("|");
  const width = Math.max(300, chart.card.clientWidth - 20);
  if (!chart.plot || chart.structure !== structure) {
    chart.plot?.destroy();
    chart.body.replaceChildren();
    chart.plot = new uPlot(plotOptions(board, width, runs, marks, info), data, chart.body);
    chart.structure = structure;
    // the legend names each run once: with smoothing on, the faint raw line needs no row
    const smoothing = Number(document.getElementById("smoothing").value) > 0;
    chart.body.querySelectorAll(".u-legend .u-series").forEach((row, i) => {
      if (i > 0 && i % 2 === (smoothing ? 1 : 0)) row.classList.add("raw");
    });
  } else {
    chart.plot.setData(data);
  }
  chart.card.dataset.runs = String(runs.length);
  chart.card.dataset.axes = structure.split("|").slice(1).join("|");  // x mode | log y | smoothed
  chart.card.dataset.points = String(data[0].length);
  chart.card.dataset.nonfinite = String(nonfinite);
  const values = [...new Set(marks.map((m) => m.value))].join(", ");
  chart.marksLabel.textContent = nonfinite ? `⚠ ${nonfinite} non-finite (${values})` : "";
  chart.marksLabel.title = marksSummary(marks).join("\n") + (nonfinite > marks.length ? `\n(the first ${marks.length} are marked)` : "");
  chart.marksLabel.dataset.runs = [...new Set(marks.map((m) => m.run))].join(",");
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
  refreshMedia(mainBoard.runs());  // static/media.js: the selected runs' media
  await Promise.all(mainBoard.runs().map((run) => fetchSeries(run).catch(() => false)));
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
      const linked = typeof groupView === "undefined" ? [] : groupView.runsOfUrl();  // ?run= of a shared link
      if (linked.length) for (const run of linked) state.selected.add(run);
      else for (const row of recent.slice(0, SELECT_LIMIT)) state.selected.add(row.run);
    } else {
      // a run that started while the page is open is drawn: when following, or while there is room
      const follow = document.getElementById("follow").checked;
      for (const row of state.runs) {
        if (!state.known.has(row.run) && (follow || state.selected.size < SELECT_LIMIT)) state.selected.add(row.run);
      }
    }
    for (const row of state.runs) state.known.add(row.run);
    await fetchUnits();
    for (const run of [...state.selected]) if (!state.runs.some((r) => r.run === run)) state.selected.delete(run);
    const live = document.getElementById("live");
    live.classList.remove("off");
    const behind = progress.bytes_behind;
    live.textContent = behind > 0 ? `reading logs · ${Math.max(1, Math.round(behind / 1048576))} MB to go` : "live";
    if (currentView() === "runs") {
      renderTableIfIdle();
      const changed = await Promise.all(mainBoard.runs().map((run) => fetchSeries(run).catch(() => false)));
      if (changed.some(Boolean) || mainBoard.charts.size === 0) renderCharts();
    } else if (currentView() === "run" && runBoard) {
      const changed = await Promise.all(runBoard.runs().map((run) => fetchSeries(run).catch(() => false)));
      if (changed.some(Boolean) || runBoard.charts.size === 0) renderBoard(runBoard);
    }
    refreshMedia(mainBoard.runs());  // static/media.js: new media records, without a reload
  } catch (err) {
    document.getElementById("live").classList.add("off");
    document.getElementById("live").title = String(err);
  } finally {
    state.polling = false;
  }
}

// the unit of each column, asked for again only when a column is new
async function fetchUnits() {
  const keys = new Set(state.runs.flatMap((row) => Object.keys(row)));
  if ([...keys].every((k) => state.unitsAsked?.has(k))) return;
  state.units = await api("/api/units");
  state.unitsAsked = keys;
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
  // each attempt's own status and duration, as the API gives them: died where it has no run_end
  const attempts = grid(["attempt", "started", "status", "duration", "resume step", "config", "error"], d.attempts.map((a, i) => [
    a.attempt, fmtTime(a.started), el("span", {class: "badge " + a.status, "data-status": a.status}, a.status),
    fmtDuration(a.duration_s), a.resume_step ?? "", configChange(a, i),
    a.exc_type ? `${a.exc_type}: ${a.exc_message || ""}` : a.signal || (a.exit_code ?? "")]));
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
    ...lastKeys.map((k) => [k, ...d.ranks.map((r) => r.last[k] === undefined ? "" : fmtUnit(r.last[k], unitOfKey(k)))]),
  ]);
  // the full traceback of each attempt that failed, as its run_end holds it
  const traces = d.attempts.filter((a) => a.exc_type || a.traceback).map((a) => el("div", {class: "failure"},
    el("h3", {}, `attempt ${a.attempt}: ${a.exc_type || "failed"}${a.exc_message ? ": " + a.exc_message : ""}`),
    el("pre", {class: "trace"}, a.traceback || `${a.exc_type}: ${a.exc_message || ""}`)));
  const charts = el("div", {class: "run-charts"});
  const media = el("div", {class: "run-media"}, el("p", {class: "muted"}, "loading…"));
  const consoleBox = el("div", {class: "run-console"}, el("p", {class: "muted"}, "loading…"));
  view.replaceChildren(
    el("div", {class: "panel"}, el("h1", {}, label), el("div", {class: "muted"}, d.path, " · ",
      el("span", {class: "badge " + d.row.status}, d.row.status), ` · ${d.row.attempts} attempt(s) · step ${fmt(d.row.step)} · ${fmtDuration(d.row.duration_s)}`,
      d.progress.torn_lines ? el("span", {class: "torn"}, `⚠ ${d.progress.torn_lines} torn line(s) skipped`) : null),
      (d.progress.problems || []).map((text) => el("div", {class: "torn problem"}, `⚠ ${text}`))),
    el("div", {class: "grid2"},
      el("div", {class: "panel"}, el("h2", {}, "Config"), kvTable(flatConfig(d.config))),
      el("div", {class: "panel"}, el("h2", {}, "Environment"), kvTable(d.environment))),
    el("div", {class: "panel"}, el("h2", {}, "Attempts"), attempts, traces),
    el("div", {class: "panel"}, el("h2", {}, "Charts"), charts),
    el("div", {class: "grid2"},
      el("div", {class: "panel"}, el("h2", {}, "Spans"), spans),
      el("div", {class: "panel"}, el("h2", {}, "Ranks"), ranks)),
    el("div", {class: "panel", id: "media"}, el("h2", {}, "Media"), media),
    el("div", {class: "panel", id: "console"}, el("h2", {}, "Console"), consoleBox),
    el("div", {class: "panel"}, el("h2", {}, "Artifacts"), artifacts));
  showMedia(label, media);  // static/media.js
  showConsole(label, consoleBox);  // static/console.js
  for (const c of runBoard?.charts.values() || []) c.plot?.destroy();
  runBoard = newBoard(charts, () => [label], false);
  colorOf(label);
  await fetchSeries(label).catch(() => false);
  if (currentView() === "run") renderBoard(runBoard);
}

// what an attempt's config changed: "lr 0.1 → 0.2", or that it passed none and kept the run's
function configChange(a, i) {
  if (!i) return "";
  if (!a.config_given) return el("span", {class: "muted"}, "kept (none passed)");
  const changes = Object.entries(a.config_changes || {});
  if (!changes.length) return el("span", {class: "muted"}, "same");
  return el("span", {class: "changed config-change"}, changes.map(([k, [x, y]]) => `${k} ${fmtConfig(x)} → ${fmtConfig(y)}`).join(", "));
}

function fmtConfig(v) { return v === null || v === undefined ? "-" : typeof v === "object" ? JSON.stringify(v) : fmt(v); }

// the unit of a `<event>.<field>` key: the table's, or the one its series gives
function unitOfKey(key) {
  if (state.units[key]) return state.units[key];
  for (const answer of state.series.values()) {
    const s = answer.series?.find((x) => x.event + "." + x.field === key);
    if (s) return s.unit;
  }
  return null;
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
  const media = el("div", {class: "run-media"}, el("p", {class: "muted"}, "loading…"));
  const metrics = d.metrics.map((m) => [m.event + "." + m.field,
    m.agrees ? el("span", {class: "added"}, `agree up to step ${fmt(m.last_shared_step)}`) : el("span", {class: "changed"}, `differ from step ${fmt(m.step)}${where(m.where)}`),
    m.agrees ? "" : fmt(m.a), m.agrees ? "" : fmt(m.b)]);
  view.replaceChildren(
    el("div", {class: "panel"}, el("h1", {}, `${a} ↔ ${b}`)),
    el("div", {class: "panel"}, el("h2", {}, "Config"), config.length ? grid(["key", a, b], config) : el("p", {class: "muted"}, "same config")),
    el("div", {class: "panel"}, el("h2", {}, "Environment"), environment.length ? grid(["key", a, b], environment) : el("p", {class: "muted"}, "same environment, as far as both recorded it")),
    el("div", {class: "panel"}, el("h2", {}, "Metrics"), metrics.length ? grid(["metric", "", a, b], metrics) : el("p", {class: "muted"}, "no (event, field) logged by both at the same steps")),
    el("div", {class: "panel", id: "media"}, el("h2", {}, "Media"), media));
  showMedia([a, b], media);  // static/media.js: both runs side by side at one step
}

// --- routing ------------------------------------------------------------------------------

function currentView() {
  const hash = location.hash;
  if (hash.startsWith("#/run/")) return "run";
  if (hash.startsWith("#/diff/")) return "diff";
  if (hash.startsWith("#/study")) return "study";
  return "runs";
}

function setCrumbs(parts) {
  const crumbs = document.getElementById("crumbs");
  crumbs.replaceChildren(...(parts.length ? [el("a", {href: "#/"}, "runs"), " / ", parts.join(" / ")] : []));
}

function route() {
  const view = currentView();
  for (const name of ["runs", "run", "diff", "study"]) document.getElementById("view-" + name).hidden = name !== view;
  const parts = location.hash.split("/").slice(2).map(decodeURIComponent);
  if (view === "run") showRun(parts[0]);
  else if (view === "diff") showDiff(parts[0], parts[1]);
  else if (view === "study") { if (typeof studyView !== "undefined") studyView.show(); }  // static/study.js
  else { setCrumbs([]); renderTable(); refreshCharts(); poll(); }  // the series of runs ticked meanwhile too
}

function init() {
  mainBoard.container = document.getElementById("charts");
  document.getElementById("filter").addEventListener("input", () => { renderTable(); refreshCharts(); });
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
  document.getElementById("follow").addEventListener("change", (e) => {
    document.getElementById("follow").closest("label").classList.toggle("on", e.target.checked);
  });
  document.getElementById("diff-selected").addEventListener("click", () => {
    const [a, b] = [...state.selected];
    location.hash = `#/diff/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
  });
  let resize = null;
  window.addEventListener("resize", () => {
    clearTimeout(resize);
    const boards = runBoard ? [mainBoard, runBoard] : [mainBoard];
    resize = setTimeout(() => {
      for (const c of boards.flatMap((b) => [...b.charts.values()])) c.plot?.setSize({width: Math.max(300, c.card.clientWidth - 20), height: 220});
    }, 150);
  });
  window.addEventListener("hashchange", route);
  route();
  setInterval(() => { if (currentView() !== "diff") poll(); }, POLL_MS);
}

init();
