// runlines dashboard: groups of runs and any x axis on the runs page, over /api/groups.
// Loaded after app.js; app.js asks `groupView` whether it draws the runs page's charts.
// The runs page's state is kept in the URL: the selected runs (?run=), the x axis, log axes,
// grouping, band, faint runs, smoothing, the table's and the charts' filters (app.js keeps ?pin=).
"use strict";

const BAND_MODES = {std: "± std", minmax: "min–max", sem: "± standard error"};
const BUILTIN_X = {step: "step", wall: "ts", relative: "elapsed_s"};  // the x-axis select's own modes

const groupView = {
  url: new URLSearchParams(location.search),
  answers: new Map(),   // chart key -> last /api/groups answer
  charts: new Map(),    // chart key -> {card, body, plot, structure}
  container: null,
  pending: new Set(),
  wantedX: null,        // ?x= until the select has that field among its options

  runsOfUrl() { return this.url.getAll("run"); },

  // the x field /api/groups reads: a numeric field, or step, ts, elapsed_s
  xField() {
    const mode = document.getElementById("x-axis").value;
    return mode.startsWith("field:") ? mode.slice(6) : BUILTIN_X[mode] || "step";
  },
  groupBy() { return document.getElementById("group-by").value; },
  active() {
    return Boolean(this.groupBy()) || document.getElementById("x-axis").value.startsWith("field:")
      || document.getElementById("log-x").checked;
  },

  // called by app.js's renderCharts: true when this view drew the runs page's charts
  renderMain() {
    this.fillOptions();
    this.saveUrl();
    const on = this.active() && currentView() === "runs";
    document.getElementById("charts").hidden = on;
    this.container.hidden = !on;
    if (!on) return false;
    this.render();
    return true;
  },

  fillOptions() {
    const xs = document.getElementById("x-axis");
    const fields = new Set();
    for (const run of shownRuns()) {
      for (const s of state.series.get(run)?.series || []) if (s.event !== "span" && s.event !== "system") fields.add(s.field);
    }
    if (this.wantedX && this.wantedX.startsWith("field:")) fields.add(this.wantedX.slice(6));
    for (const field of [...fields].sort()) {
      if (!xs.querySelector(`option[value="${CSS.escape("field:" + field)}"]`)) xs.append(el("option", {value: "field:" + field}, field));
    }
    if (this.wantedX && [...xs.options].some((o) => o.value === this.wantedX)) { xs.value = this.wantedX; this.wantedX = null; }
    const group = document.getElementById("group-by");
    const keys = new Set(state.runs.flatMap((row) => Object.keys(row).filter((k) => k.startsWith("config.")).map((k) => k.slice(7))));
    const want = group.dataset.wanted;
    if (want) keys.add(want);
    for (const key of [...keys].sort()) {
      if (!group.querySelector(`option[value="${CSS.escape(key)}"]`)) group.append(el("option", {value: key}, key));
    }
    if (want && [...group.options].some((o) => o.value === want)) { group.value = want; delete group.dataset.wanted; }
  },

  loadUrl() {
    const u = this.url;
    if (u.get("x")) this.wantedX = BUILTIN_X[u.get("x")] ? u.get("x") : "field:" + u.get("x");
    document.getElementById("log-x").checked = u.get("logx") === "1";
    document.getElementById("log-y").checked = u.get("logy") === "1";
    if (u.get("group")) document.getElementById("group-by").dataset.wanted = u.get("group");
    if (BAND_MODES[u.get("band")]) document.getElementById("band").value = u.get("band");
    document.getElementById("faint").checked = u.get("faint") === "1";
    if (u.has("filter")) document.getElementById("filter").value = u.get("filter");
    if (u.has("charts")) document.getElementById("chart-filter").value = u.get("charts");
    if (u.has("smoothing")) {
      document.getElementById("smoothing").value = u.get("smoothing");
      document.getElementById("smoothing-value").textContent = Number(u.get("smoothing")).toFixed(2);
    }
  },

  saveUrl() {
    if (state.firstLoad) return;  // the selection is not known yet: keep the URL's
    const params = new URLSearchParams(location.search);
    for (const name of ["run", "x", "logx", "logy", "group", "band", "faint", "smoothing", "filter", "charts"]) params.delete(name);
    for (const run of [...state.selected].sort()) params.append("run", run);
    const mode = this.wantedX || document.getElementById("x-axis").value;
    if (mode !== "step") params.set("x", mode.startsWith("field:") ? mode.slice(6) : mode);
    if (document.getElementById("log-x").checked) params.set("logx", "1");
    if (document.getElementById("log-y").checked) params.set("logy", "1");
    const group = document.getElementById("group-by").dataset.wanted || this.groupBy();
    if (group) params.set("group", group);
    if (document.getElementById("band").value !== "std") params.set("band", document.getElementById("band").value);
    if (document.getElementById("faint").checked) params.set("faint", "1");
    const smoothing = document.getElementById("smoothing").value;
    if (Number(smoothing) !== 0.6) params.set("smoothing", smoothing);
    const filter = document.getElementById("filter").value.trim(), charts = document.getElementById("chart-filter").value.trim();
    if (filter) params.set("filter", filter);  // the run table's filter
    if (charts) params.set("charts", charts);  // the charts' filter
    const query = params.toString();
    const next = location.pathname + (query ? "?" + query : "") + location.hash;
    if (next !== location.pathname + location.search + location.hash) history.replaceState(null, "", next);
  },

  render() {
    const x = this.xField();  // the x field itself is no chart against itself
    const keys = chartKeys(mainBoard).filter(([, info]) => info.event !== "span" && info.event !== "system" && info.field !== x);
    const runs = shownRuns();
    if (!runs.length || !keys.length) {
      this.container.replaceChildren(el("div", {class: "empty"}, "Select runs in the table to chart them."));
      return;
    }
    const wanted = new Set(keys.map(([k]) => k));
    for (const [key, chart] of this.charts) if (!wanted.has(key)) { chart.plot?.destroy(); this.charts.delete(key); }
    const grid = el("div", {class: "chart-grid"});
    for (const [key, info] of keys) grid.append(this.card(key, info));
    this.container.replaceChildren(grid);
    // read again when a run gained records: the groups are computed from every record
    const versions = runs.map((run) => state.series.get(run)?.version ?? "").join(",");
    const query = [runs.join(","), versions, this.xField(), this.groupBy(), document.getElementById("faint").checked].join("|");
    for (const [key, info] of keys) this.fetch(key, info, runs, query);
  },

  card(key, info) {
    let chart = this.charts.get(key);
    if (!chart) {
      const body = el("div", {class: "plot"});
      const marksLabel = el("span", {class: "marks nonfinite"});
      const card = el("div", {class: "chart group-chart", "data-event": info.event, "data-field": info.field},
        el("div", {class: "title"}, el("span", {class: "event"}, info.event + " ·"), info.field, marksLabel), body);
      chart = {card, body, marksLabel, plot: null, structure: "", query: "", marks: []};
      this.charts.set(key, chart);
    }
    return chart.card;
  },

  async fetch(key, info, runs, query) {
    const chart = this.charts.get(key);
    const grouping = this.groupBy();
    const faint = document.getElementById("faint").checked || !grouping;
    let answer = this.answers.get(key);
    if (!answer || chart.query !== query) {
      if (this.pending.has(key + query)) return;
      this.pending.add(key + query);
      const params = new URLSearchParams({event: info.event, field: info.field, x: this.xField(),
        group_by: grouping, runs: runs.join(","), with_runs: faint ? "1" : "0"});
      try {
        answer = await api("/api/groups?" + params.toString());
      } catch (err) {
        chart.body.replaceChildren(el("div", {class: "empty"}, String(err.message || err)));
        return;
      } finally {
        this.pending.delete(key + query);
      }
      this.answers.set(key, answer);
      chart.query = query;
    }
    this.draw(chart, info, answer, Boolean(grouping));
  },

  draw(chart, info, answer, grouping) {
    const logX = document.getElementById("log-x").checked, logY = document.getElementById("log-y").checked;
    const band = document.getElementById("band").value;
    const weight = Number(document.getElementById("smoothing").value);  // as app.js smooths a run's line
    const drawn = [logX, logY, band, weight, chart.card.clientWidth].join("|");
    if (chart.drawn === answer && chart.drawnAs === drawn && chart.plot) return;  // nothing new
    chart.drawn = answer;
    chart.drawnAs = drawn;
    const keep = (x, y) => !(logX && x <= 0) && !(logY && y !== null && y <= 0);
    const tables = [], series = [{label: answer.x, value: (u, v) => v === null ? "" : fmt(v)}], bands = [];
    const means = [];  // (the mean's column, its n's column) in the joined table
    const marks = [];  // each NaN or infinity at its x, as app.js marks a run's
    const raw = new Set();  // no legend row: a band's edges, the raw lines behind the smoothed ones
    let column = 1;
    answer.groups.forEach((g, i) => {
      const color = COLORS[i % COLORS.length];
      let lo = [], hi = [], mean = [];
      const xs = [], n = [];
      g.x.forEach((x, j) => {
        const m = g.mean[j];
        if (!keep(x, m)) return;
        const std = g.std[j] ?? 0;  // of one run: none, and the band is the line
        const spread = band === "sem" ? std / Math.sqrt(g.n[j] || 1) : std;
        xs.push(x); mean.push(m); n.push(g.n[j]);
        lo.push(m === null ? null : band === "minmax" ? g.min[j] : m - spread);
        hi.push(m === null ? null : band === "minmax" ? g.max[j] : m + spread);
      });
      const rawMean = mean;
      if (weight > 0) [lo, hi, mean] = [ema(lo, weight), ema(hi, weight), ema(mean, weight)];
      tables.push([xs, lo, hi, mean, ...(weight > 0 ? [rawMean] : []), n]);
      const edge = {stroke: alpha(color, 0.35), width: 0.5, spanGaps: true, points: {show: false}, value: (u, v) => fmt(v)};
      raw.add(series.length).add(series.length + 1);  // a band's edges need no legend row
      series.push({...edge, label: g.group + " low"}, {...edge, label: g.group + " high"});
      series.push({label: g.group, stroke: color, width: 2, spanGaps: true, points: {show: xs.length < 30 && weight === 0, fill: color},
        value: (u, v, si, idx) => v === null ? "" : `${fmt(v)} (n=${fmt(chart.nOf[si]?.[idx] ?? null)})`});
      bands.push({series: [column + 1, column], fill: alpha(color, 0.18)});
      if (weight > 0) {
        raw.add(series.length);
        series.push({label: g.group + " (raw)", stroke: alpha(color, 0.3), width: 1, spanGaps: true, points: {show: xs.length < 30, fill: color}, value: (u, v) => fmt(v)});
      }
      means.push([column + 2, column + (weight > 0 ? 4 : 3)]);
      column += weight > 0 ? 5 : 4;
      for (const [x, value] of g.marks || []) marks.push({run: g.group, color, x, step: x, value});
    });
    for (const r of answer.runs) {
      const xs = [], ys = [];
      r.x.forEach((x, j) => { if (keep(x, r.y[j])) { xs.push(x); ys.push(r.y[j]); } });
      const color = colorOf(r.run.split(" · ")[0]);
      const smooth = weight > 0 && !grouping;  // a run alone is smoothed as app.js smooths it
      tables.push(smooth ? [xs, ys, ema(ys, weight)] : [xs, ys]);
      if (smooth) raw.add(series.length);
      series.push({label: smooth ? r.run + " (raw)" : r.run, stroke: grouping ? alpha(color, 0.25) : smooth ? alpha(color, 0.22) : color,
        width: grouping || smooth ? 1 : 1.6, spanGaps: true, points: {show: !grouping && xs.length < 30, fill: color}, value: (u, v) => fmt(v)});
      if (smooth) series.push({label: r.run, stroke: color, width: 1.6, spanGaps: true, points: {show: false}, value: (u, v) => fmt(v)});
      if (!grouping) for (const [x, value] of r.marks || []) marks.push({run: r.run.split(" · ")[0], x, step: x, value});
      column += smooth ? 2 : 1;
    }
    if (!tables.length) { chart.body.replaceChildren(el("div", {class: "empty"}, "no values")); return; }
    const markXs = [...new Set(marks.map((m) => m.x).filter(Number.isFinite))].sort((a, b) => a - b);
    if (markXs.length) tables.push([markXs]);  // the x range holds every mark
    const joined = uPlot.join(tables);
    const nColumns = new Set(means.map(([, at]) => at));
    const shift = (i) => i - [...nColumns].filter((at) => at < i).length;  // a column's index once the n's are out
    const data = joined.filter((_, i) => !nColumns.has(i));
    chart.nOf = {};
    for (const [mean, at] of means) chart.nOf[shift(mean)] = joined[at];
    const shownBands = bands.map((b) => ({...b, series: b.series.map(shift)}));
    chart.marks = marks;
    const nonfinite = answer.groups.reduce((t, g) => t + (g.nonfinite || 0), 0) + (grouping ? 0 : answer.runs.reduce((t, r) => t + (r.nonfinite || 0), 0));
    const values = [...new Set(marks.map((m) => m.value))].join(", ");
    chart.marksLabel.textContent = nonfinite ? `⚠ ${nonfinite} non-finite (${values})` : "";
    chart.marksLabel.title = marksSummary(marks).join("\n");
    const width = Math.max(300, chart.card.clientWidth - 20);
    const axis = {stroke: "#667085", grid: {stroke: "#eef0f3"}, ticks: {stroke: "#e4e7ec"}, font: AXIS_FONT};
    chart.plot?.destroy();
    chart.body.replaceChildren();
    chart.plot = new uPlot({
      width, height: 220, padding: [12, 28, 0, 0],
      scales: {x: {time: false, distr: logX ? 3 : 1}, y: {distr: logY ? 3 : 1}},
      axes: [{...axis, space: 64}, {...axis, size: axisSize}],
      series, bands: shownBands, legend: {live: true}, cursor: {drag: {x: true, y: false}},
      hooks: {draw: [(u) => drawMarks(u, chart.marks)], setCursor: [(u) => markTooltip(u, chart.marks)]},
    }, data, chart.body);
    chart.body.querySelectorAll(".u-legend .u-series").forEach((row, i) => row.classList.toggle("raw", raw.has(i)));
    chart.card.dataset.groups = String(answer.groups.length);
    chart.card.dataset.bands = String(shownBands.length);
    chart.card.dataset.runs = String(answer.runs.length);
    chart.card.dataset.x = answer.x;
    chart.card.dataset.groupBy = (answer.group_by || []).join(",");
    chart.card.dataset.axes = [logX, logY, band].join("|");
    chart.card.dataset.smoothed = String(weight > 0);
    chart.card.dataset.nonfinite = String(nonfinite);
  },

  init() {
    const bar = document.querySelector(".charts-bar");
    const spacer = bar.querySelector(".spacer");
    const bandSelect = el("select", {id: "band"}, ...Object.entries(BAND_MODES).map(([v, t]) => el("option", {value: v}, t)));
    bar.insertBefore(el("label", {}, el("input", {id: "log-x", type: "checkbox"}), " log x"), bar.querySelector("#log-y").closest("label"));
    bar.insertBefore(el("label", {}, "group by ", el("select", {id: "group-by"}, el("option", {value: ""}, "none"), el("option", {value: "auto"}, "auto"))), spacer);
    bar.insertBefore(el("label", {}, "band ", bandSelect), spacer);
    bar.insertBefore(el("label", {title: "draw each run faintly behind its group"}, el("input", {id: "faint", type: "checkbox"}), " runs"), spacer);
    this.container = el("div", {id: "group-charts", hidden: ""});
    document.getElementById("charts").after(this.container);
    this.loadUrl();
    for (const id of ["log-x", "group-by", "band", "faint", "x-axis", "log-y"]) {
      document.getElementById(id).addEventListener("change", () => {
        if (id === "group-by") delete document.getElementById("group-by").dataset.wanted;
        if (id === "x-axis") this.wantedX = null;
        renderCharts();
      });
    }
  },
};

groupView.init();
