// runlines dashboard: media (images, histograms, text, audio, tables) over /api/media, on a run's
// page, the diff page and the runs page (the selected runs side by side).
// Loaded before app.js; it uses app.js's helpers (api, el, fmt, withToken) only when called.
// One step slider drives every panel; a name without a record at that step shows its nearest
// step, labelled. Only the chosen step's files are fetched (lazy <img>, <audio preload=none>),
// so a run with thousands of images stays responsive.

const MEDIA_KINDS = ["image", "histogram", "text", "audio", "table"];
const HEAT_ROWS = 64;  // a heatmap's value axis: the bins of every step spread onto these

function mediaUrl(label, path) {
  return withToken("/api/artifact?run=" + encodeURIComponent(label) + "&path=" + encodeURIComponent(path));
}

// the step of *steps* (sorted) nearest to *wanted*; the lower one on a tie
function nearestStep(steps, wanted) {
  let best = steps[0];
  for (const s of steps) if (Math.abs(s - wanted) < Math.abs(best - wanted)) best = s;
  return best;
}

// "step 40", or "step 40 (nearest to 45)" when the name has no record at the chosen step
function stepLabel(shown, wanted) {
  return shown === wanted ? `step ${shown}` : `step ${shown} (nearest to ${wanted})`;
}

// {kind: Map(name -> Map(step -> [records]))}, steps in order
function groupMedia(records) {
  const out = {};
  for (const r of records) {
    if (typeof r.step !== "number" || !MEDIA_KINDS.includes(r.event)) continue;
    const names = out[r.event] ??= new Map();
    const steps = names.get(r.name) ?? names.set(r.name, new Map()).get(r.name);
    (steps.get(r.step) ?? steps.set(r.step, []).get(r.step)).push(r);
  }
  for (const names of Object.values(out)) {
    for (const [name, steps] of names) names.set(name, new Map([...steps].sort((a, b) => a[0] - b[0])));
  }
  return out;
}

// container -> its board: the runs shown, each run's records so far, the step the slider is at
const mediaBoards = new Map();

// the media of one run (a run page) or of several side by side at the same step (the diff page,
// the runs page's selection). Called again (refreshMedia, on each poll) it asks each run only for
// its new records, and draws again only when some came: the slider's range grows, and a slider
// at the last step moves on to the newest one.
async function showMedia(labels, container) {
  labels = Array.isArray(labels) ? labels : [labels];
  const key = JSON.stringify(labels);
  let board = mediaBoards.get(container);
  if (!board || board.key !== key) {
    board = {key, labels, runs: new Map(labels.map((l) => [l, {epoch: null, media: []}])), step: null, atLast: true, drawn: null};
    mediaBoards.set(container, board);
  }
  if (board.busy) return;
  board.busy = true;
  try {
    await Promise.all(labels.map((label) => fetchMedia(label, board.runs.get(label))));
  } catch (err) {
    if (mediaBoards.get(container) === board) container.replaceChildren(el("p", {class: "muted"}, String(err.message)));
    board.drawn = null;
    return;
  } finally { board.busy = false; }
  const drawn = labels.map((l) => `${board.runs.get(l).epoch}:${board.runs.get(l).media.length}`).join(",");
  if (mediaBoards.get(container) !== board || drawn === board.drawn) return;
  board.drawn = drawn;
  drawMedia(board, container);
}

// a run's records: the new ones appended, or all of them when its log started over
async function fetchMedia(label, have) {
  const since = have.epoch === null ? "" : `&since=${have.media.length}&epoch=${have.epoch}`;
  const answer = await api("/api/media?run=" + encodeURIComponent(label) + since);
  have.media = answer.from ? have.media.concat(answer.media) : answer.media;
  have.epoch = answer.epoch;
}

// app.js's poll and chart refresh: the runs page shows the selected runs' media; every board on
// the page grows with its runs' logs
function refreshMedia(selected) {
  const page = document.getElementById("runs-media");
  if (page && currentView() === "runs") {
    if (selected.length) showMedia(selected, page);
    else page.closest(".panel").hidden = true;
  }
  for (const [container, board] of mediaBoards) {
    if (!container.isConnected) mediaBoards.delete(container);
    else if (container !== page && container.offsetParent !== null) showMedia(board.labels, container);
  }
}

function drawMedia(board, container) {
  const labels = board.labels;
  const answers = labels.map((l) => board.runs.get(l));
  const records = answers.flatMap((a) => a.media);
  const allSteps = [...new Set(records.filter((r) => typeof r.step === "number").map((r) => r.step))].sort((a, b) => a - b);
  const panel = container.closest(".runs-media-panel");  // the runs page's: shown when there are media
  if (panel) panel.hidden = !allSteps.length;
  if (!allSteps.length) { container.replaceChildren(el("p", {class: "muted"}, "no media")); return; }
  const groups = answers.map((a) => groupMedia(a.media));
  const makers = {image: imagePanel, histogram: histogramPanel, text: textPanel, audio: audioPanel, table: tablePanel};
  const panels = [];
  for (const kind of MEDIA_KINDS) {
    const names = [...new Set(groups.flatMap((g) => [...(g[kind] || new Map()).keys()]))];
    for (const name of names) {
      const parts = labels.map((label, i) => groups[i][kind]?.has(name) ? makers[kind](label, name, groups[i][kind].get(name)) : null).filter(Boolean);
      // histograms of several runs: their distributions at the step, overlaid, above each run's own
      const overlay = kind === "histogram" && parts.length > 1 ? el("canvas", {class: "overlay", width: 480, height: 120, "aria-label": `${name} of each run at the chosen step`}) : null;
      const card = mediaCard(kind, name, overlay, el("div", {class: labels.length > 1 ? "media-runs" : null}, parts.map((p) => p.node)));
      panels.push({node: card, show(step) {
        for (const p of parts) p.show(step);
        card.dataset.step = parts[0].node.dataset.step;
        if (overlay) drawOverlay(overlay, parts.map((p) => [p.label, p.shown()]).filter(([, h]) => h && Array.isArray(h.edges)));
      }});
    }
  }
  container.classList.toggle("several", labels.length > 1);
  const last = allSteps.length - 1;
  const at = board.atLast || board.step === null ? last : allSteps.indexOf(nearestStep(allSteps, board.step));
  const slider = el("input", {type: "range", id: container.dataset.slider || "media-step", min: 0, max: last, step: 1, value: at, "aria-label": "media step"});
  const shown = el("output", {id: (container.dataset.slider || "media-step") + "-value"});
  const show = () => {
    const step = allSteps[Number(slider.value)];
    board.step = step;
    board.atLast = Number(slider.value) === last;
    shown.textContent = String(step);
    for (const p of panels) p.show(step);
  };
  slider.addEventListener("input", show);
  container.replaceChildren(
    el("div", {class: "toolbar media-bar"}, el("label", {}, "step ", slider, " ", shown),
      el("span", {class: "muted"}, `${allSteps.length} step(s) with media`)),
    el("div", {class: "media-grid"}, panels.map((p) => p.node)));
  show();
}

function mediaCard(kind, name, ...body) {
  return el("div", {class: "media-card", "data-kind": kind, "data-name": name},
    el("div", {class: "title"}, el("span", {class: "event"}, kind), " ", name), ...body);
}

// one run's part of a card: its name shown where the card holds several runs
function mediaPart(label, ...body) {
  return el("div", {class: "media-run", "data-run": label}, el("div", {class: "run-name"}, label), ...body);
}

// --- images -------------------------------------------------------------------------------

// a card that shows, for the slider's step, its nearest step's records drawn by *render*
function steppedPanel(label, byStep, bodyClass, render) {
  const steps = [...byStep.keys()];
  const caption = el("div", {class: "media-step"});
  const body = el("div", bodyClass ? {class: bodyClass} : {});
  const node = mediaPart(label, caption, body);
  let current = null;
  return {node, show(wanted) {
    const step = nearestStep(steps, wanted);
    caption.textContent = stepLabel(step, wanted);
    node.dataset.step = step;
    if (step === current) return;
    current = step;
    body.replaceChildren(...byStep.get(step).map((r) => render(r, step)));
  }};
}

function imagePanel(label, name, byStep) {
  return steppedPanel(label, byStep, "images", (r, step) => el("figure", {},
    el("img", {src: mediaUrl(label, r.path), alt: `${name} step ${step}`, loading: "lazy", width: r.width, height: r.height}),
    r.caption ? el("figcaption", {}, r.caption) : null));
}

// --- histograms ---------------------------------------------------------------------------

// one histogram per step: the first rank's record where several ranks logged
function histogramsOf(byStep) {
  return [...byStep].map(([step, records]) => ({step, ...records[0]})).filter((h) => Array.isArray(h.counts));
}

// the heatmap's grid: each step's counts spread onto HEAT_ROWS rows of one common value range
function heatGrid(hists) {
  const edged = hists.filter((h) => Array.isArray(h.edges) && h.edges.length === h.counts.length + 1);
  const lo = Math.min(...edged.map((h) => h.edges[0]));
  const hi = Math.max(...edged.map((h) => h.edges[h.edges.length - 1]));
  const width = hi > lo ? hi - lo : 1;
  const cells = hists.map((h) => {
    const col = new Float64Array(HEAT_ROWS);
    if (!edged.includes(h)) return col;
    h.counts.forEach((c, i) => {
      const mid = (h.edges[i] + h.edges[i + 1]) / 2;
      col[Math.min(HEAT_ROWS - 1, Math.max(0, Math.floor((mid - lo) / width * HEAT_ROWS)))] += c;
    });
    return col;
  });
  return {cells, lo, hi: lo + width, max: Math.max(1, ...cells.map((c) => Math.max(...c)))};
}

function heatColor(t) {  // 0 → pale, 1 → deep blue
  const s = Math.sqrt(t);
  return `rgb(${Math.round(246 - 200 * s)}, ${Math.round(247 - 160 * s)}, ${Math.round(249 - 25 * s)})`;
}

// the cells are painted once, off screen; each slider move copies them and marks its step
function drawHeatmap(canvas, hists, grid, stepIndex) {
  const w = canvas.width, h = canvas.height;
  const cw = w / hists.length, rh = h / HEAT_ROWS;
  if (!grid.painted) {
    grid.painted = document.createElement("canvas");
    grid.painted.width = w; grid.painted.height = h;
    const off = grid.painted.getContext("2d");
    grid.cells.forEach((col, x) => col.forEach((v, y) => {
      if (!v) return;
      off.fillStyle = heatColor(v / grid.max);
      off.fillRect(x * cw, h - (y + 1) * rh, Math.ceil(cw), Math.ceil(rh));
    }));
  }
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, w, h);
  ctx.drawImage(grid.painted, 0, 0);
  ctx.strokeStyle = "#c4321c";
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  ctx.moveTo((stepIndex + 0.5) * cw, 0); ctx.lineTo((stepIndex + 0.5) * cw, h);
  ctx.stroke();
}

function drawDistribution(canvas, hist) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height;
  ctx.clearRect(0, 0, w, h);
  const max = Math.max(1, ...hist.counts);
  const bw = w / Math.max(1, hist.counts.length);
  ctx.fillStyle = "#3559e0";
  hist.counts.forEach((c, i) => {
    const bh = (c / max) * (h - 2);
    ctx.fillRect(i * bw, h - bh, Math.max(1, bw - 1), bh);
  });
}

// each run's distribution as a line of its colour, on the value range they span together
function drawOverlay(canvas, shown) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height;
  ctx.clearRect(0, 0, w, h);
  if (!shown.length) return;
  const lo = Math.min(...shown.map(([, x]) => x.edges[0])), hi = Math.max(...shown.map(([, x]) => x.edges[x.edges.length - 1]));
  const span = hi > lo ? hi - lo : 1;
  const top = Math.max(1, ...shown.map(([, x]) => Math.max(...x.counts)));
  for (const [label, x] of shown) {
    ctx.strokeStyle = colorOf(label);
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    x.counts.forEach((c, i) => {
      const y = h - (c / top) * (h - 4);
      const x0 = ((x.edges[i] - lo) / span) * w, x1 = ((x.edges[i + 1] - lo) / span) * w;
      if (i === 0) ctx.moveTo(x0, h);
      ctx.lineTo(x0, y); ctx.lineTo(x1, y);
    });
    ctx.lineTo(((x.edges[x.edges.length - 1] - lo) / span) * w, h);
    ctx.stroke();
  }
  canvas.dataset.runs = String(shown.length);
}

function histogramPanel(label, name, byStep) {
  const hists = histogramsOf(byStep);
  const steps = hists.map((h) => h.step);
  const grid = heatGrid(hists);
  const heat = el("canvas", {class: "heatmap", width: 480, height: 160, "aria-label": `${name} over steps`});
  const dist = el("canvas", {class: "distribution", width: 480, height: 110, "aria-label": `${name} at the chosen step`});
  const axis = el("div", {class: "media-axis muted"}, `steps ${steps[0]}–${steps[steps.length - 1]} → · values ${fmt(grid.lo)} … ${fmt(grid.hi)} ↑`);
  const caption = el("div", {class: "media-step"});
  const stats = el("div", {class: "muted media-stats"});
  const node = mediaPart(label, heat, axis, caption, dist, stats);
  let shown = null;
  return {node, label, shown: () => shown, show(wanted) {
    if (!hists.length) { caption.textContent = "no bins"; return; }
    const step = nearestStep(steps, wanted);
    const i = steps.indexOf(step), hist = hists[i];
    shown = hist;
    drawHeatmap(heat, hists, grid, i);
    drawDistribution(dist, hist);
    node.dataset.step = step;
    heat.dataset.drawn = String(hists.length);
    caption.textContent = stepLabel(step, wanted);
    const edges = Array.isArray(hist.edges) ? `${fmt(hist.edges[0])} … ${fmt(hist.edges[hist.edges.length - 1])}` : "no finite value";
    const odd = ["nan", "posinf", "neginf"].filter((k) => hist[k]).map((k) => `${k} ${hist[k]}`);
    stats.textContent = [`count ${fmt(hist.count)}`, hist.mean === null || hist.mean === undefined ? null : `mean ${fmt(hist.mean)}`,
      hist.std === null || hist.std === undefined ? null : `std ${fmt(hist.std)}`, edges, ...odd].filter(Boolean).join(" · ");
  }};
}

// --- text, audio, tables ------------------------------------------------------------------

const DIFF_MAX_WORDS = 4000;  // a longer pair of samples is shown without its diff

// a sample's text: inline in its record, or fetched once from its side file
function textOf(label, r, cache) {
  if (typeof r.text === "string") return Promise.resolve(r.text);
  if (!cache.has(r.path)) {
    cache.set(r.path, fetch(mediaUrl(label, r.path), {cache: "no-store"})
      .then((a) => a.ok ? a.text() : Promise.reject(new Error(`${a.status} ${a.statusText}`))));
  }
  return cache.get(r.path);
}

// a word diff of *before* and *after* (longest common subsequence): [[op, word]], op "=", "+", "-"
function wordDiff(before, after) {
  const a = before.split(/(\s+)/), b = after.split(/(\s+)/);
  if (a.length + b.length > 2 * DIFF_MAX_WORDS) return null;
  const n = a.length, m = b.length, len = Array.from({length: n + 1}, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) {
    len[i][j] = a[i] === b[j] ? len[i + 1][j + 1] + 1 : Math.max(len[i + 1][j], len[i][j + 1]);
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push(["=", a[i]]); i++; j++; } else if (len[i + 1][j] >= len[i][j + 1]) out.push(["-", a[i++]]); else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}

function textPanel(label, name, byStep) {
  const steps = [...byStep.keys()];
  const cache = new Map();
  const caption = el("div", {class: "media-step"});
  const body = el("div", {class: "texts"});
  const toggle = el("input", {type: "checkbox", class: "diff-toggle"});
  const node = mediaPart(label, el("label", {class: "muted diff-label"}, toggle, " diff to the previous step"), caption, body);
  let current = null;
  const render = () => {
    const step = current, i = steps.indexOf(step), before = i > 0 ? byStep.get(steps[i - 1]) : [];
    const diffing = toggle.checked && i > 0;
    caption.textContent = caption.dataset.label + (diffing ? ` · diff to step ${steps[i - 1]}` : "");
    body.replaceChildren(...byStep.get(step).map((r, k) => {
      const pre = el("pre", {class: "text-sample"}, "loading…");
      const old = before[k];
      Promise.all([textOf(label, r, cache), diffing && old ? textOf(label, old, cache) : null]).then(([now, was]) => {
        if (current !== step) return;
        const diff = was === null ? null : wordDiff(was, now);
        if (diff === null) { pre.textContent = now + (was === null ? "" : "\n\n(too long to diff)"); return; }
        pre.replaceChildren(...diff.map(([op, w]) => op === "=" ? w : el(op === "+" ? "ins" : "del", {class: op === "+" ? "added" : "removed"}, w)));
      }, (err) => { pre.textContent = `cannot read ${r.path}: ${err.message}`; });
      return pre;
    }));
  };
  toggle.addEventListener("change", render);
  return {node, show(wanted) {
    const step = nearestStep(steps, wanted);
    caption.dataset.label = stepLabel(step, wanted);
    node.dataset.step = step;
    if (step === current) { render(); return; }
    current = step;
    render();
  }};
}

function audioPanel(label, name, byStep) {
  return steppedPanel(label, byStep, null, (r) => el("div", {class: "audio"},
    el("audio", {controls: true, preload: "none", src: mediaUrl(label, r.path)}),
    el("span", {class: "muted"}, ` ${r.sample_rate} Hz · ${r.channels} ch · ${(r.frames / r.sample_rate).toFixed(2)} s`)));
}

const TABLE_PAGE = 20;  // rows a table card shows at once, from /api/table

// a table's columns and row count, and its rows a page at a time (/api/table reads that page only)
function tablePanel(label, name, byStep) {
  return steppedPanel(label, byStep, null, (r) => tableRecord(label, r));
}

function tableRecord(label, r) {
  const rows = el("div", {class: "table-rows"});
  const pager = el("span", {class: "pager muted"});
  const node = el("div", {class: "table-record"},
    el("div", {class: "table-info"},
      el("span", {}, `${fmt(r.rows)} row(s) · ${(r.columns || []).length} column(s): `),
      el("span", {class: "columns"}, (r.columns || []).join(", ")), " · ",
      el("a", {href: mediaUrl(label, r.path)}, "parquet"), " ", pager),
    rows);
  const load = (offset) => {
    api(`/api/table?run=${encodeURIComponent(label)}&path=${encodeURIComponent(r.path)}&offset=${offset}&limit=${TABLE_PAGE}`).then((page) => {
      const end = offset + page.rows.length;
      rows.replaceChildren(el("div", {class: "table-wrap media-table"}, grid(page.columns, page.rows.map((row) => row.map((v) => v !== null && typeof v === "object" ? JSON.stringify(v) : v)))));
      node.dataset.offset = offset;
      pager.replaceChildren(
        el("button", {type: "button", class: "prev", disabled: offset <= 0, onclick: () => load(Math.max(0, offset - TABLE_PAGE))}, "‹"),
        ` rows ${page.rows.length ? offset + 1 : 0}-${end} of ${fmt(page.total)} `,
        el("button", {type: "button", class: "next", disabled: end >= page.total, onclick: () => load(end)}, "›"));
    }, (err) => { rows.replaceChildren(el("p", {class: "muted"}, `rows not shown: ${err.message}`)); });
  };
  load(0);
  return node;
}
