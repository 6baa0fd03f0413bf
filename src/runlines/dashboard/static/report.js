// runlines report: the run table, the charts and each run's config, from the data in the page.
// No request of any kind: everything it shows is in the JSON block above it.
"use strict";

const DATA = JSON.parse(document.getElementById("runlines-report").textContent);
const COLORS = ["#3559e0", "#e8590c", "#12805c", "#c2255c", "#7048e8", "#0c8599", "#e67700",
  "#5c940d", "#d6336c", "#495057", "#1971c2", "#9c36b5"];
const SELECT_LIMIT = 20;  // runs charted at first: a hundred lines on one chart are a blur
const BASE_COLUMNS = ["run", "status", "attempts", "step", "duration_s", "started"];
const NONFINITE = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"};  // as pandas prints them
const AXIS = {stroke: "#667085", grid: {stroke: "#eef0f3"}, ticks: {stroke: "#e4e7ec"}, font: "12px system-ui"};

const state = {
  selected: new Set(DATA.rows.slice(0, SELECT_LIMIT).map((row) => row.run)),
  sort: {key: null, desc: false},
  plots: [],
};
const colors = new Map(DATA.rows.map((row, i) => [row.run, COLORS[i % COLORS.length]]));

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

function nonfinite(value) { return typeof value === "string" && Object.hasOwn(NONFINITE, value); }

function fmt(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return nonfinite(value) ? NONFINITE[value] : value;
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    const abs = Math.abs(value);
    if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(4);
    return String(Number(value.toPrecision(6)));
  }
  return JSON.stringify(value);
}

function fmtDuration(s) {
  if (typeof s !== "number") return fmt(s);
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " m " + Math.round(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " m";
}

// a time in UTC, to the second: a report is read in other time zones than it was written in
function fmtTime(iso) {
  return typeof iso === "string" ? iso.replace("T", " ").replace(/\.\d+/, "").replace(/\+00:00$/, " UTC") : "";
}

function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${n >> 16},${(n >> 8) & 255},${n & 255},${a})`;
}

// --- the run table (its sorting, filter, head and tag and note cells: static/table.js) ------

function columns() {
  const rest = DATA.columns.filter((c) => !BASE_COLUMNS.includes(c) && !TABLE_NOTE_COLUMNS.includes(c) && c !== "path");
  return [...BASE_COLUMNS, ...noteColumns(DATA.rows), ...rest.filter((c) => !c.startsWith("config.")), ...rest.filter((c) => c.startsWith("config."))];
}

function shownRows() {
  const text = document.getElementById("filter").value.trim();
  return sortRows(DATA.rows.filter((row) => rowMatches(row, text, fmt)), state.sort);
}

function filterByTag(tag) {
  document.getElementById("filter").value = "tag:" + tag;
  renderTable();
}

function renderTable() {
  const table = document.getElementById("runs");
  const cols = columns();
  table.tHead.replaceChildren(tableHead(cols, state.sort, [...BASE_COLUMNS, ...TABLE_NOTE_COLUMNS], (sort) => { state.sort = sort; renderTable(); }));
  const rows = shownRows();
  table.tBodies[0].replaceChildren(...rows.map((row) => el("tr", {"data-run": row.run, class: state.selected.has(row.run) ? "selected" : null},
    el("td", {}, el("input", {type: "checkbox", "aria-label": "chart " + row.run, checked: state.selected.has(row.run),
      onchange: (e) => { if (e.target.checked) state.selected.add(row.run); else state.selected.delete(row.run); renderAll(); }})),
    cols.map((c) => cell(row, c)))));
  document.getElementById("run-count").textContent =
    `${rows.length} of ${DATA.rows.length} runs · ${state.selected.size} charted`;
}

function cell(row, key) {
  const value = row[key];
  // data-value: the value itself, as the report's JSON holds it (a test reads it back)
  const attrs = {"data-key": key, "data-value": value === null || value === undefined ? null : typeof value === "string" ? value : JSON.stringify(value)};
  if (key === "run") {
    return el("td", {...attrs, title: row.path}, el("span", {class: "swatch", style: `background:${colors.get(row.run)}`}),
      el("a", {href: "#run-" + encodeURIComponent(row.run)}, row.run));
  }
  if (key === "status") return el("td", attrs, el("span", {class: "badge " + value, "data-status": value}, value));
  if (key === "tags") return tagsCell(value, attrs, filterByTag);
  if (key === "notes") return notesCell(value, attrs);
  if (key === "duration_s") return el("td", {...attrs, class: "num"}, fmtDuration(value));
  if (key === "started") return el("td", attrs, fmtTime(value));
  if (nonfinite(value)) return el("td", {...attrs, class: "num nonfinite"}, NONFINITE[value]);
  return el("td", {...attrs, class: typeof value === "number" ? "num" : null, title: typeof value === "number" ? String(value) : null}, fmt(value));
}

// --- groups: one row per group, as runs(group_by=...) gives it -------------------------------

function renderGroups() {
  const groups = DATA.groups;
  document.getElementById("groups-section").hidden = !groups;
  if (!groups) return;
  const metrics = [...new Set(groups.rows.flatMap((row) => Object.keys(row).filter((k) => k.endsWith(".mean")).map((k) => k.slice(0, -5))))];
  const table = document.getElementById("groups");
  table.tHead.replaceChildren(el("tr", {}, ["group", ...groups.keys, "n", ...metrics].map((c) =>
    el("th", {"data-key": c, class: metrics.includes(c) ? "group-metric" : groups.keys.includes(c) ? "group-config" : null}, c))));
  table.tBodies[0].replaceChildren(...groups.rows.map((row) => el("tr", {"data-group": row.group},
    el("td", {"data-key": "group", title: row.runs.join(", ")}, row.group),
    groups.keys.map((k) => el("td", {"data-key": k}, fmt(row[k]))),
    el("td", {"data-key": "n", class: "num"}, String(row.n)),
    metrics.map((m) => {
      const mean = row[m + ".mean"], std = row[m + ".std"];
      const shown = mean === null ? "" : std === null ? fmt(mean) : `${fmt(mean)} ± ${fmt(std)}`;
      return el("td", {"data-key": m, class: "num", "data-mean": mean === null ? null : String(mean), "data-std": std === null ? null : String(std),
        title: `min ${fmt(row[m + ".min"])} · max ${fmt(row[m + ".max"])}`}, shown);
    }))));
  document.getElementById("groups-about").textContent =
    `Grouped by ${groups.keys.join(", ") || "nothing (the runs agree)"}: n runs, and the mean ± std (sample, ddof 1) of each metric's last and best values over the runs that have it.`;
}

// --- charts ---------------------------------------------------------------------------------

function markName(value) { return nonfinite(value) ? NONFINITE[value] : value; }

function drawMarks(u, marks) {
  const ctx = u.ctx, top = u.bbox.top, size = 5 * devicePixelRatio;
  ctx.save();
  ctx.font = `${10 * devicePixelRatio}px system-ui`;
  ctx.textAlign = "center";
  const labelled = new Set();
  for (const m of marks) {
    const x = u.valToPos(m.x, "x", true);
    if (!Number.isFinite(x) || x < u.bbox.left - 1 || x > u.bbox.left + u.bbox.width + 1) continue;
    ctx.strokeStyle = alpha(m.color, 0.35);
    ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + u.bbox.height); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = m.color;
    ctx.beginPath(); ctx.moveTo(x - size, top); ctx.lineTo(x + size, top); ctx.lineTo(x, top + size * 1.6); ctx.closePath(); ctx.fill();
    const label = m.name + "\u0000" + m.value;
    if (labelled.has(label)) continue;
    labelled.add(label);
    ctx.fillText(`${markName(m.value)} · ${m.name}`, x, top + size * 4);
  }
  ctx.restore();
}

// one line per charted run: uPlot joins their x
function runData(chart) {
  const lines = chart.lines.filter((line) => state.selected.has(line.run));
  const logY = document.getElementById("log-y").checked;
  const tables = lines.map((line) => [line.x, logY ? line.y.map((v) => (v > 0 ? v : null)) : line.y]);
  const marks = lines.flatMap((line) => line.marks.map(([x, value]) => ({x, value, name: line.run, color: colors.get(line.run)})));
  const series = lines.map((line) => ({label: line.run, stroke: colors.get(line.run), width: 1.4, spanGaps: true,
    points: {show: line.x.length < 30}, value: (u, v) => fmt(v)}));
  return {data: tables.length ? uPlot.join(tables) : [[]], series, marks, count: lines.length,
    nonfinite: lines.reduce((n, line) => n + line.nonfinite, 0), points: lines.reduce((n, line) => n + line.x.length, 0)};
}

// each group: its mean, and its band's two edges filled between; the legend gives n
function groupData(chart) {
  const band = document.getElementById("band").value;
  const logY = document.getElementById("log-y").checked;
  const keep = (v) => (v === null || (logY && v <= 0) ? null : v);
  const data = [chart.groups.length ? [...new Set(chart.groups.flatMap((g) => g.x))].sort((a, b) => a - b) : []];
  const series = [], bands = [], marks = [];
  chart.groups.forEach((g, i) => {
    const color = COLORS[i % COLORS.length];
    const at = new Map(g.x.map((x, j) => [x, j]));
    const column = (f) => data[0].map((x) => (at.has(x) ? keep(f(at.get(x))) : null));
    const spread = (j) => (band === "sem" ? g.std[j] / Math.sqrt(g.n[j]) : g.std[j]);
    const low = (j) => (band === "minmax" ? g.min[j] : g.std[j] === null ? null : g.mean[j] - spread(j));
    const high = (j) => (band === "minmax" ? g.max[j] : g.std[j] === null ? null : g.mean[j] + spread(j));
    const base = data.length;
    data.push(column((j) => g.mean[j]), column(low), column(high));
    const n = data[0].map((x) => (at.has(x) ? g.n[at.get(x)] : null));
    series.push({label: g.group, stroke: color, width: 1.8, spanGaps: true, points: {show: false},
      value: (u, v, s, idx) => (v === null ? "" : `${fmt(v)} (n=${fmt(n[idx])})`)},
    {label: g.group + " low", stroke: alpha(color, 0.3), width: 0.5, spanGaps: true, points: {show: false}, class: "edge"},
    {label: g.group + " high", stroke: alpha(color, 0.3), width: 0.5, spanGaps: true, points: {show: false}, class: "edge"});
    bands.push({series: [base + 2, base + 1], fill: alpha(color, 0.15)});
    for (const [x, value] of g.marks) marks.push({x, value, name: g.group, color});
  });
  return {data, series, bands, marks, count: chart.groups.length,
    nonfinite: chart.groups.reduce((n, g) => n + g.nonfinite, 0), points: chart.groups.reduce((n, g) => n + g.x.length, 0)};
}

function renderCharts() {
  for (const plot of state.plots) plot.destroy();
  state.plots = [];
  const filter = document.getElementById("chart-filter").value.trim().toLowerCase();
  const grid = el("div", {class: "chart-grid"});
  const grouped = DATA.group_by !== null;
  const pending = [];
  for (const chart of DATA.charts) {
    if (filter && !(chart.event + "." + chart.field).toLowerCase().includes(filter)) continue;
    const shown = grouped ? groupData(chart) : runData(chart);
    const marksLabel = el("span", {class: "marks nonfinite"}, shown.nonfinite ? `⚠ ${shown.nonfinite} non-finite` : "");
    const body = el("div", {class: "plot"});
    const card = el("div", {class: "chart", "data-event": chart.event, "data-field": chart.field,
      [grouped ? "data-groups" : "data-runs"]: String(shown.count), "data-points": String(shown.points),
      "data-nonfinite": String(shown.nonfinite), "data-bands": String((shown.bands || []).length)},
    el("div", {class: "title"}, el("span", {class: "event"}, chart.event + " ·"), chart.field,
      chart.unit ? el("span", {class: "unit"}, `(${chart.unit})`) : null, marksLabel), body);
    grid.append(card);
    if (shown.count) pending.push([card, body, shown]);
    else body.append(el("p", {class: "muted"}, "no run charted"));
  }
  const container = document.getElementById("charts");
  container.replaceChildren(DATA.charts.length ? grid : el("div", {class: "empty"}, "No chart: the runs have no numeric field to draw by " + DATA.x + "."));
  for (const [card, body, shown] of pending) {  // sized to their card, once it is laid out
    const opts = {
      width: Math.max(300, card.clientWidth - 20), height: 220, padding: [12, 28, 0, 0],
      scales: {x: {time: DATA.x === "ts"}, y: {distr: document.getElementById("log-y").checked ? 3 : 1}},
      axes: [{...AXIS}, {...AXIS, size: 60}],
      series: [{label: DATA.x, value: (u, v) => fmt(v)}, ...shown.series],
      bands: shown.bands,
      legend: {live: true},
      cursor: {drag: {x: true, y: false}},
      hooks: {draw: [(u) => drawMarks(u, shown.marks)]},
    };
    state.plots.push(new uPlot(opts, shown.data, body));
    body.querySelectorAll(".u-legend .u-series").forEach((row, i) => {
      if (grouped && i > 0 && i % 3 !== 1) row.hidden = true;  // a band's edges need no row
    });
  }
  const skipped = document.getElementById("skipped");
  skipped.replaceChildren(...DATA.skipped.map((text) => el("div", {}, "not charted: " + text)));
}

// --- each run's config and attempts, and the input logs ---------------------------------------

function kv(object) {
  const rows = Object.entries(object || {}).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, fmt(v))));
  return rows.length ? el("table", {class: "kv"}, el("tbody", {}, rows)) : el("p", {class: "muted"}, "none recorded");
}

function grid(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => (c instanceof Node ? el("td", {}, c) : el("td", {}, fmt(c))))))));
}

function renderDetails() {
  const hashes = new Map(DATA.inputs.map((input) => [input.path, input]));
  document.getElementById("details").replaceChildren(...DATA.runs.map((run) => {
    const input = hashes.get(run.path);
    const attempts = grid(["attempt", "started", "status", "duration", "error"], run.attempts.map((a) => [
      a.attempt, fmtTime(a.started), el("span", {class: "badge " + a.status, "data-status": a.status}, a.status), fmtDuration(a.duration_s), a.error || ""]));
    const notes = (run.tags.length || run.notes.length) ? el("div", {class: "panel notes-panel"}, el("h2", {}, "Tags and notes"),
      el("div", {class: "tags"}, run.tags.map((tag) => el("span", {class: "tag"}, tag))),
      run.notes.map((text) => el("p", {class: "note"}, text))) : null;
    return el("details", {id: "run-" + run.run, "data-run": run.run},
      el("summary", {}, el("span", {class: "swatch", style: `background:${colors.get(run.run)}`}), run.run,
        el("span", {class: "muted"}, run.path + (input ? ` · sha256 ${input.sha256.slice(0, 12)}…` : ""))),
      el("div", {class: "grid2"},
        el("div", {class: "panel config"}, el("h2", {}, "Config"), kv(run.config)),
        el("div", {class: "panel attempts"}, el("h2", {}, "Attempts"), attempts)), notes);
  }));
  document.getElementById("inputs").tBodies[0].replaceChildren(...DATA.inputs.map((input) =>
    el("tr", {}, el("td", {}, input.path), el("td", {class: "num"}, String(input.size_bytes)), el("td", {class: "sha"}, input.sha256))));
}

function renderAll() { renderTable(); renderCharts(); }

function init() {
  const group = DATA.group_by ? ` · grouped by ${DATA.group_by.join(", ")}` : "";
  document.getElementById("about").textContent =
    `${DATA.rows.length} runs from ${DATA.sources.join(", ")} · written ${fmtTime(DATA.created)} by runlines ${DATA.version}`;
  document.getElementById("x-name").textContent = `x axis: ${DATA.x}${group}`;
  document.getElementById("band-choice").hidden = !DATA.group_by;
  document.getElementById("filter").addEventListener("input", renderTable);
  document.getElementById("chart-filter").addEventListener("input", renderCharts);
  for (const id of ["log-y", "band"]) document.getElementById(id).addEventListener("change", renderCharts);
  document.getElementById("select-all").addEventListener("click", () => { for (const row of shownRows()) state.selected.add(row.run); renderAll(); });
  document.getElementById("select-none").addEventListener("click", () => { state.selected.clear(); renderAll(); });
  document.addEventListener("click", (e) => {  // a run's name opens its config below
    const link = e.target.closest && e.target.closest('a[href^="#run-"]');
    const details = link && document.getElementById(decodeURIComponent(link.getAttribute("href").slice(1)));
    if (details) details.open = true;
  });
  renderDetails();
  renderGroups();
  renderAll();
  document.body.dataset.ready = "true";
}

init();
