// runlines dashboard: a run page's captured console (console_capture=True) over /api/console.
// Loaded before app.js; it uses app.js's helpers (api, el, fmtTime) only when called.
// The tail shows the last lines ("earlier lines" pages back by byte offset) and grows as the
// run prints (polled while the page shows it); the search box
// asks the server, case-insensitive, as text or a regular expression. Every printed byte is
// put on the page as text (never as HTML); colour escapes become styled spans, every other
// escape or control character is dropped.

const CONSOLE_PAGE = 200;
const CONSOLE_POLL_MS = 2000;  // a shown tail asks for new lines this often
// the 16 colours of SGR 30-37 and 90-97 (and their backgrounds)
const ANSI_COLORS = ["#000000", "#c23621", "#25bc24", "#adad27", "#492ee1", "#d338d3", "#33bbc8", "#cbcccd",
  "#818383", "#fc391f", "#31e722", "#eaec23", "#5833ff", "#f935f8", "#14f0f0", "#e9ebeb"];
// CSI (SGR m and the rest), OSC (to BEL or ESC \), other two-byte escapes
const ANSI_ESCAPE = /\x1b\[([0-?]*)[ -\/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?/g;
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/g;  // tabs are kept

// the spans of one printed line: text nodes, coloured where SGR escapes asked
function ansiSpans(text) {
  const out = [];
  let style = {};
  let at = 0;
  const push = (piece) => {
    piece = piece.replace(CONTROL, "");
    if (!piece) return;
    const css = {};
    if (style.fg !== undefined) css.color = ANSI_COLORS[style.fg];
    if (style.bg !== undefined) css.background = ANSI_COLORS[style.bg];
    if (style.bold) css.fontWeight = "bold";
    if (style.dim) css.opacity = "0.7";
    if (style.italic) css.fontStyle = "italic";
    if (style.underline) css.textDecoration = "underline";
    if (!Object.keys(css).length) { out.push(piece); return; }
    const span = el("span", {class: "ansi"}, piece);  // a text node inside: never parsed as HTML
    Object.assign(span.style, css);
    out.push(span);
  };
  for (const m of text.matchAll(ANSI_ESCAPE)) {
    push(text.slice(at, m.index));
    at = m.index + m[0].length;
    if (m[2] === "m") style = sgr(style, m[1]);
  }
  push(text.slice(at));
  return out;
}

// the style after SGR parameters *params* ("1;31", "" = reset)
function sgr(style, params) {
  const codes = params === "" ? [0] : params.split(";").map((p) => (p === "" ? 0 : Number(p)));
  const next = {...style};
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (c === 0) { for (const k of Object.keys(next)) delete next[k]; }
    else if (c === 1) next.bold = true;
    else if (c === 2) next.dim = true;
    else if (c === 3) next.italic = true;
    else if (c === 4) next.underline = true;
    else if (c === 22) { delete next.bold; delete next.dim; }
    else if (c === 23) delete next.italic;
    else if (c === 24) delete next.underline;
    else if (c >= 30 && c <= 37) next.fg = c - 30;
    else if (c >= 90 && c <= 97) next.fg = c - 90 + 8;
    else if (c === 39) delete next.fg;
    else if (c >= 40 && c <= 47) next.bg = c - 40;
    else if (c >= 100 && c <= 107) next.bg = c - 100 + 8;
    else if (c === 49) delete next.bg;
    else if (c === 38 || c === 48) {  // 256 colours or RGB: their parameters are skipped
      const kind = codes[i + 1];
      i += kind === 5 ? 2 : kind === 2 ? 4 : 1;
    }
  }
  return next;
}

function consoleLine(line) {
  const time = line.ts === null ? "" : fmtTime(line.ts);
  return el("div", {class: "console-line" + (line.stream === "err" ? " err" : ""), "data-stream": line.stream, "data-offset": line.offset},
    el("span", {class: "console-ts", title: line.ts === null ? "" : String(line.ts)}, time),
    el("span", {class: "console-stream"}, line.stream === "err" ? "!" : " "),
    el("span", {class: "console-text"}, ansiSpans(line.text)));
}

// the console panel of run *label*: its tail, and a search over the whole file
async function showConsole(label, container) {
  const base = "/api/console?run=" + encodeURIComponent(label) + "&limit=" + CONSOLE_PAGE;
  const input = el("input", {type: "search", class: "console-search", placeholder: "Search the console…", "aria-label": "search the console"});
  const regex = el("input", {type: "checkbox", class: "console-regex"});
  const errOnly = el("input", {type: "checkbox", class: "console-err"});
  const status = el("span", {class: "console-status muted"});
  const earlier = el("button", {type: "button", class: "console-more", hidden: true}, "earlier lines");
  const lines = el("div", {class: "console-lines"});
  let query = "";  // the request's search part; "" for the tail
  let start = 0;  // the offset of the first line shown: "earlier lines" asks before it
  let end = -1;  // the offset of the last line of the tail shown: the poll appends after it
  let asked = 0;  // an answer to an older request than the last is dropped

  // new lines of the tail: appended when they follow the last one shown, else the tail anew
  async function poll() {
    if (!container.isConnected) return;  // another page: stop
    setTimeout(poll, CONSOLE_POLL_MS);
    if (query || document.visibilityState !== "visible") return;
    const mine = asked;
    let answer;
    try { answer = await api(base); } catch (err) { return; }
    if (mine !== asked || query || !answer.captured) return;
    if (!lines.isConnected) { load(false); return; }  // capture began since: the panel anew
    const fresh = answer.lines.filter((line) => line.offset > end);
    if (!fresh.length) return;
    const follows = answer.lines.some((line) => line.offset === end) || end < 0;
    if (!follows) { load(false); return; }
    const atBottom = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 4;
    lines.append(...fresh.map(consoleLine));
    end = fresh.at(-1).offset;
    status.textContent = `last ${lines.childElementCount} line(s) of ${answer.path}`;
    if (atBottom) lines.scrollTop = lines.scrollHeight;
  }

  async function load(more) {
    let answer;
    const mine = ++asked;
    const url = base + query + (more ? "&before=" + start : "");
    try { answer = await api(url); } catch (err) {
      if (mine !== asked) return;
      status.textContent = String(err.message);
      if (!more) lines.replaceChildren();
      earlier.hidden = true;
      return;
    }
    if (mine !== asked) return;
    if (!answer.captured) {
      container.replaceChildren(el("p", {class: "muted"}, "no console captured (Run(..., console_capture=True) keeps one)"));
      return;
    }
    if (!lines.isConnected) container.replaceChildren(toolbar, earlier, lines);
    const nodes = answer.lines.map(consoleLine);
    if (more) lines.prepend(...nodes); else lines.replaceChildren(...nodes);
    start = answer.start;
    end = more ? end : answer.lines.length ? answer.lines.at(-1).offset : -1;
    earlier.hidden = !answer.more;
    const shown = lines.childElementCount;
    status.textContent = answer.matches === undefined
      ? `last ${shown} line(s) of ${answer.path}`
      : `${answer.matches} matching line(s)${answer.matches > shown ? `, the last ${shown} shown` : ""}`;
    if (!more && answer.matches === undefined) lines.scrollTop = lines.scrollHeight;
  }

  function search() {
    const text = input.value;
    query = (text ? "&q=" + encodeURIComponent(text) + (regex.checked ? "&regex=1" : "") : "") + (errOnly.checked ? "&stream=err" : "");
    load(false);
  }

  input.addEventListener("keydown", (e) => { if (e.key === "Enter") search(); });
  input.addEventListener("input", () => { if (!input.value && query.includes("&q=")) search(); });  // cleared: the tail again
  regex.addEventListener("change", () => { if (input.value) search(); });
  errOnly.addEventListener("change", search);
  earlier.addEventListener("click", () => load(true));
  const toolbar = el("div", {class: "toolbar console-toolbar"}, input,
    el("label", {}, regex, " regex"), el("label", {}, errOnly, " stderr only"), status);
  container.replaceChildren(toolbar, earlier, lines);
  await load(false);
  setTimeout(poll, CONSOLE_POLL_MS);
}
