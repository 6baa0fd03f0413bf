// runlines dashboard: the study page (#/study), over /api/study: parallel coordinates of the
// config keys against a metric, a scatter of one key against it, and each key's rank
// correlation with it. Loaded after app.js; app.js's route() calls studyView.show().
// The page's state (metric, stat, the scatter's key) is kept in the URL.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const STUDY_LOW = [53, 89, 224], STUDY_HIGH = [232, 89, 12];  // the metric's colours: low, high
const STUDY_NONE = "none";  // the slot of a run whose config lacks the key
const STUDY_POLL_MS = 3000;  // a sweep that goes on: the page asks again this often

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) node.setAttribute(k, v);
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

// an axis of /api/study as a map from a value to [0, 1] (bottom to top); null: no value
function axisScale(axis) {
  if (axis.kind === "categorical") {
    const n = axis.categories.length;
    return (v) => {
      if (v === null || v === undefined) return null;
      const at = axis.categories.indexOf(v);  // the server gives a categorical value as its text
      return at < 0 ? null : n === 1 ? 0.5 : at / (n - 1);
    };
  }
  const log = axis.scale === "log";
  const f = log ? Math.log10 : (x) => x;
  const lo = f(axis.min), hi = f(axis.max);
  return (v) => (typeof v !== "number" ? null : hi === lo ? 0.5 : (f(v) - lo) / (hi - lo));
}

// tick values of an axis: its categories, powers of ten (log), or about five round numbers
function axisTicks(axis) {
  if (axis.kind === "categorical") return axis.categories.map((c) => [c, c]);
  if (axis.min === axis.max) return [[axis.min, fmt(axis.min)]];
  if (axis.scale === "log") {
    const ticks = [];
    for (let e = Math.ceil(Math.log10(axis.min)); e <= Math.floor(Math.log10(axis.max)); e++) ticks.push(10 ** e);
    if (ticks.length < 2) ticks.unshift(axis.min), ticks.push(axis.max);
    return ticks.map((t) => [t, fmt(t)]);
  }
  const raw = (axis.max - axis.min) / 4, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const ticks = [];
  for (let t = Math.ceil(axis.min / step) * step; t <= axis.max + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks.map((t) => [t, fmt(t)]);
}

function studyColor(t) {
  const c = STUDY_LOW.map((lo, i) => Math.round(lo + (STUDY_HIGH[i] - lo) * t));
  return `rgb(${c.join(",")})`;
}

const studyView = {
  answer: null,
  brushes: new Map(),  // axis index -> [low, high] in [0, 1]
  view: null,

  params() {
    const u = new URLSearchParams(location.search);
    return {metric: u.get("metric") || "", stat: u.get("stat") === "best" ? "best" : "last", key: u.get("key") || ""};
  },

  saveUrl(changes) {
    const params = new URLSearchParams(location.search);
    for (const [name, value] of Object.entries(changes)) {
      if (value && !(name === "stat" && value === "last")) params.set(name, value); else params.delete(name);
    }
    const query = params.toString();
    history.replaceState(null, "", location.pathname + (query ? "?" + query : "") + location.hash);
  },

  query() {
    const {metric, stat} = this.params();
    const query = new URLSearchParams({stat});
    if (metric) query.set("metric", metric);
    return "/api/study?" + query.toString();
  },

  async show() {
    setCrumbs(["study"]);
    this.view = document.getElementById("view-study");
    let answer;
    try {
      answer = await api(this.query());
    } catch (err) {
      this.view.replaceChildren(el("div", {class: "empty"}, String(err.message || err)));
      return;
    }
    if (currentView() !== "study") return;
    this.answer = answer;
    this.brushes.clear();
    this.render();
  },

  // asked again while the page is open: new runs and values are drawn; the brushes stay while
  // the axes are the same
  async refresh() {
    if (currentView() !== "study" || !this.answer || this.refreshing || document.hidden) return;
    this.refreshing = true;
    try {
      const answer = await api(this.query());
      if (currentView() !== "study" || JSON.stringify(answer) === JSON.stringify(this.answer)) return;
      const axes = (x) => JSON.stringify([x.keys, x.axis, x.metric, x.stat]);
      if (axes(answer) !== axes(this.answer)) this.brushes.clear();
      this.answer = answer;
      this.render();
    } catch (err) {
      // the next turn asks again; the page keeps what it drew
    } finally {
      this.refreshing = false;
    }
  },

  render() {
    const a = this.answer;
    const {key} = this.params();
    const metricSelect = el("select", {id: "study-metric", "aria-label": "metric"},
      a.metrics.map((m) => el("option", {value: m, selected: m === a.metric}, m)));
    const statSelect = el("select", {id: "study-stat", "aria-label": "statistic"},
      ["last", "best"].map((s) => el("option", {value: s, selected: s === a.stat}, s)));
    const keys = a.keys.map((k) => k.key);
    const shownKey = keys.includes(key) ? key : (a.importance.find((row) => row.value !== null)?.key || keys[0] || "");
    const keySelect = el("select", {id: "study-key", "aria-label": "key of the scatter"}, keys.map((k) => el("option", {value: k, selected: k === shownKey}, k)));
    metricSelect.addEventListener("change", () => { this.saveUrl({metric: metricSelect.value}); this.show(); });
    statSelect.addEventListener("change", () => { this.saveUrl({stat: statSelect.value}); this.show(); });
    keySelect.addEventListener("change", () => { this.saveUrl({key: keySelect.value}); this.drawScatter(); });
    const left = a.left_out.length ? `${a.left_out.length} run(s) with no finite ${a.column || "value"} not drawn: ${a.left_out.join(", ")}` : "";
    const parallel = el("div", {class: "study-plot", id: "study-parallel"});
    const scatter = el("div", {class: "study-plot", id: "study-scatter"});
    this.view.replaceChildren(...[
      el("div", {class: "toolbar"}, el("label", {}, "metric ", metricSelect), el("label", {}, "value ", statSelect),
        el("span", {class: "count", id: "study-count"}), el("span", {class: "spacer"}),
        el("button", {type: "button", id: "study-clear", onclick: () => { this.brushes.clear(); this.applyBrushes(); }}, "Clear brushes")),
      left ? el("p", {class: "muted", id: "study-left-out"}, left) : null,
      !a.runs.length ? el("div", {class: "empty"}, a.metric ? `No run has a finite ${a.column}.` : "No run has a numeric metric yet.") : null,
      el("div", {class: "panel"}, el("h2", {}, `Parallel coordinates: the config keys and ${a.column || "the metric"}`),
        el("p", {class: "muted"}, "One line per run, coloured by the metric. Drag along an axis to keep the runs in a range; click an axis to clear it."), parallel),
      el("div", {class: "grid2"},
        el("div", {class: "panel"}, el("h2", {}, "Scatter ", keySelect), scatter),
        el("div", {class: "panel"}, el("h2", {}, "Importance: rank correlation with ", a.column || "the metric"),
          el("p", {class: "muted caveat"}, "Correlation, not causation: a key that varied together with another looks important too, and few runs give noisy numbers."),
          this.importanceTable(a),
          el("p", {class: "muted"}, "Numeric keys: Spearman's ρ (−1 to 1). Categorical keys: the correlation ratio η of the metric's ranks (0 to 1, no sign). See docs/dashboard.md.")))].filter(Boolean));
    if (!a.runs.length) return;
    this.drawParallel();
    this.drawScatter();
  },

  importanceTable(a) {
    const rows = a.importance.map((row) => {
      const value = row.value;
      const bar = value === null ? el("span", {class: "muted"}, row.n < 2 ? "too few runs" : "does not vary")
        : el("span", {class: "bar-wrap"}, el("span", {class: "bar " + (value < 0 ? "neg" : "pos"), style: `width:${Math.round(Math.abs(value) * 100)}%`}));
      return el("tr", {"data-key": row.key}, el("td", {}, row.key), el("td", {}, row.measure === "spearman" ? "Spearman ρ" : "correlation ratio η"),
        el("td", {class: "num"}, value === null ? "" : value.toFixed(3)), el("td", {}, bar), el("td", {class: "num"}, String(row.n)));
    });
    return el("table", {id: "study-importance"}, el("thead", {}, el("tr", {}, ["key", "measure", "value", "", "runs"].map((h) => el("th", {}, h)))), el("tbody", {}, rows));
  },

  // the axes of the parallel plot: each key's, then the metric's
  axes() {
    const a = this.answer;
    return [...a.keys.map((k) => ({...k, label: k.key, of: (run) => run.config[k.key]})),
      {...a.axis, key: a.column, label: a.column, metric: true, of: (run) => run.value}];
  },

  drawParallel() {
    const box = document.getElementById("study-parallel");
    const a = this.answer, axes = this.axes();
    const width = Math.max(500, box.clientWidth), height = 380, top = 36, bottom = height - 48;
    const pad = 70, gap = axes.length > 1 ? (width - 2 * pad) / (axes.length - 1) : 0;
    const anyMissing = axes.map((axis) => a.runs.some((run) => axis.of(run) === null || axis.of(run) === undefined));
    const scales = axes.map(axisScale);
    const y = (t, i) => (t === null ? (anyMissing[i] ? bottom + 22 : null) : bottom - t * (bottom - top));
    const metricT = scales[axes.length - 1];
    const plot = svg("svg", {width, height, class: "parallel", "data-axes": String(axes.length)});
    const lines = svg("g", {class: "lines"});
    for (const run of a.runs) {
      const points = axes.map((axis, i) => [pad + i * gap, y(scales[i](axis.of(run)), i)]);
      const d = points.map(([px, py], i) => `${i ? "L" : "M"}${px.toFixed(1)},${py.toFixed(1)}`).join("");
      const line = svg("path", {d, class: "study-line", "data-run": run.run, stroke: studyColor(metricT(run.value) ?? 0.5)},
        svg("title", {}, `${run.run}: ${a.column} ${fmt(run.value)}`));
      line.addEventListener("click", () => { location.hash = "#/run/" + encodeURIComponent(run.run); });
      lines.append(line);
    }
    plot.append(lines);
    axes.forEach((axis, i) => {
      const x = pad + i * gap;
      const g = svg("g", {class: "axis" + (axis.metric ? " metric" : ""), "data-key": axis.key, transform: `translate(${x},0)`});
      g.append(svg("line", {x1: 0, x2: 0, y1: top, y2: bottom}), svg("text", {class: "label", y: top - 16, "text-anchor": "middle"}, axis.label));
      const side = axis.metric ? 1 : -1;  // the metric's ticks on its right: the lines come from the left
      const anchor = axis.metric ? "start" : "end";
      for (const [value, text] of axisTicks(axis)) {
        const ty = y(scales[i](value), i);
        g.append(svg("line", {class: "tick", x1: 4 * side, x2: 0, y1: ty, y2: ty}), svg("text", {x: 7 * side, y: ty + 4, "text-anchor": anchor}, text));
      }
      if (anyMissing[i]) g.append(svg("text", {x: 7 * side, y: bottom + 26, "text-anchor": anchor, class: "none"}, STUDY_NONE));
      const brush = svg("rect", {class: "brush", x: -6, width: 12, y: top, height: 0, hidden: ""});
      const hit = svg("rect", {class: "hit", x: -14, width: 28, y: top - 4, height: bottom - top + 8});
      g.append(brush, hit);
      this.brushable(hit, brush, i, top, bottom);
      plot.append(g);
    });
    this.plotY = (run, i) => scales[i](axes[i].of(run));
    box.replaceChildren(plot);
    box.dataset.lines = String(a.runs.length);
    this.applyBrushes();
  },

  // drag along an axis: keep the runs whose value lies in the range; a click clears it
  brushable(hit, rect, i, top, bottom) {
    const at = (event) => {
      const bounds = hit.ownerSVGElement.getBoundingClientRect();
      return Math.min(1, Math.max(0, (bottom - (event.clientY - bounds.top)) / (bottom - top)));
    };
    hit.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      const start = at(event);
      let moved = false;
      hit.setPointerCapture(event.pointerId);
      const move = (e) => {
        const now = at(e);
        moved = moved || Math.abs(now - start) > 0.01;
        if (moved) { this.brushes.set(i, [Math.min(start, now), Math.max(start, now)]); this.applyBrushes(); }
      };
      const up = () => {
        hit.removeEventListener("pointermove", move);
        hit.removeEventListener("pointerup", up);
        if (!moved) { this.brushes.delete(i); this.applyBrushes(); }
      };
      hit.addEventListener("pointermove", move);
      hit.addEventListener("pointerup", up);
    });
    rect.dataset.top = String(top);
    rect.dataset.bottom = String(bottom);
  },

  kept(run) {
    for (const [i, [lo, hi]] of this.brushes) {
      const t = this.plotY(run, i);
      if (t === null || t < lo || t > hi) return false;
    }
    return true;
  },

  applyBrushes() {
    const a = this.answer;
    if (!a || !this.plotY) return;
    const kept = new Set(a.runs.filter((run) => this.kept(run)).map((run) => run.run));
    for (const node of this.view.querySelectorAll("[data-run]")) {
      if (node.classList.contains("study-line") || node.classList.contains("study-point")) node.classList.toggle("dim", !kept.has(node.dataset.run));
    }
    this.view.querySelectorAll("#study-parallel .axis").forEach((g, i) => {
      const rect = g.querySelector(".brush"), range = this.brushes.get(i);
      const top = Number(rect.dataset.top), bottom = Number(rect.dataset.bottom);
      if (!range) { rect.setAttribute("hidden", ""); return; }
      rect.removeAttribute("hidden");
      rect.setAttribute("y", String(bottom - range[1] * (bottom - top)));
      rect.setAttribute("height", String(Math.max(1, (range[1] - range[0]) * (bottom - top))));
    });
    const box = document.getElementById("study-parallel");
    if (box) box.dataset.kept = String(kept.size);
    document.getElementById("study-count").textContent = this.brushes.size
      ? `${kept.size} of ${a.runs.length} runs in the brushed ranges` : `${a.runs.length} runs`;
  },

  drawScatter() {
    const box = document.getElementById("study-scatter");
    const a = this.answer;
    const key = document.getElementById("study-key")?.value;
    const keyAxis = a.keys.find((k) => k.key === key);
    if (!box || !keyAxis) { box?.replaceChildren(el("p", {class: "muted"}, "The runs have no config key.")); return; }
    const width = Math.max(360, box.clientWidth), height = 320, left = 70, right = 20, top = 14, bottom = height - 44;
    const xs = axisScale(keyAxis), ys = axisScale(a.axis);
    const px = (v) => { const t = xs(v); return t === null ? null : left + (keyAxis.kind === "categorical" ? 0.1 + 0.8 * t : t) * (width - left - right); };
    const py = (v) => bottom - ys(v) * (bottom - top);
    const plot = svg("svg", {width, height, class: "scatter", "data-key": key});
    plot.append(svg("line", {class: "frame", x1: left, x2: width - right, y1: bottom, y2: bottom}), svg("line", {class: "frame", x1: left, x2: left, y1: top, y2: bottom}));
    for (const [value, text] of axisTicks(keyAxis)) {
      const x = px(value);
      plot.append(svg("line", {class: "tick", x1: x, x2: x, y1: bottom, y2: bottom + 4}), svg("text", {x, y: bottom + 16, "text-anchor": "middle"}, text));
    }
    for (const [value, text] of axisTicks(a.axis)) {
      const y = py(value);
      plot.append(svg("line", {class: "tick", x1: left - 4, x2: left, y1: y, y2: y}), svg("text", {x: left - 7, y: y + 4, "text-anchor": "end"}, text));
    }
    plot.append(svg("text", {class: "label", x: (left + width - right) / 2, y: height - 6, "text-anchor": "middle"}, key + (keyAxis.scale === "log" ? " (log)" : "")),
      svg("text", {class: "label", x: 12, y: top + (bottom - top) / 2, transform: `rotate(-90 12 ${top + (bottom - top) / 2})`, "text-anchor": "middle"}, a.column));
    let drawn = 0;
    for (const run of a.runs) {
      const x = px(run.config[key]);
      if (x === null) continue;
      const jitter = keyAxis.kind === "categorical" ? ((drawn * 7919) % 17 - 8) * 0.6 : 0;  // same category: side by side
      const point = svg("circle", {class: "study-point", "data-run": run.run, cx: x + jitter, cy: py(run.value), r: 5, fill: studyColor(ys(run.value) ?? 0.5)},
        svg("title", {}, `${run.run}: ${key} ${fmt(run.config[key])}, ${a.column} ${fmt(run.value)}`));
      point.addEventListener("click", () => { location.hash = "#/run/" + encodeURIComponent(run.run); });
      plot.append(point);
      drawn++;
    }
    box.replaceChildren(plot);
    box.dataset.points = String(drawn);
    this.applyBrushes();
  },
};

window.addEventListener("resize", () => { if (currentView() === "study" && studyView.answer) { studyView.drawParallel(); studyView.drawScatter(); } });
setInterval(() => studyView.refresh(), STUDY_POLL_MS);
if (currentView() === "study") studyView.show();  // app.js routed before this file loaded
