// runlines: the run table's sorting, filtering, head and tag and note cells, shared by the
// dashboard (served as /static/table.js before app.js) and the report (inlined before
// report.js). Each page's script defines el() and fmt(), which these call when they run.
"use strict";

const TABLE_NOTE_COLUMNS = ["tags", "notes"];  // from runlines tag / note: shown when a run has some

// the order of two cells: numbers by value, anything else as text; no value last, either way
function compareCells(x, y, desc) {
  if (x === y) return 0;
  if (x === null || x === undefined) return 1;
  if (y === null || y === undefined) return -1;
  const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
  return desc ? -c : c;
}

// *rows* sorted in place by sort.key (none: as they are), sort.desc the other way
function sortRows(rows, sort) {
  if (sort.key) rows.sort((a, b) => compareCells(a[sort.key], b[sort.key], sort.desc));
  return rows;
}

// "tag:NAME" keeps the runs tagged NAME; any other word must be in a column's text as
// *format* writes it (key=value)
function rowMatches(row, text, format) {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const hay = Object.entries(row).map(([k, v]) => k + "=" + format(v)).join(" ").toLowerCase();
  return words.every((w) => (w.startsWith("tag:")
    ? (row.tags || []).some((tag) => tag.toLowerCase() === w.slice(4)) : hay.includes(w)));
}

// the tag and note columns some run of *rows* has a value in
function noteColumns(rows) {
  return TABLE_NOTE_COLUMNS.filter((key) => rows.some((row) => (row[key] || []).length));
}

// the head of a run table: a header per column that sorts by it when clicked (again: the other
// way); *plain* are the columns neither config nor metric
function tableHead(cols, sort, plain, onSort) {
  return el("tr", {}, el("th", {}, ""), cols.map((c) => el("th", {
    "data-key": c, title: c,
    class: [c.startsWith("config.") ? "group-config" : !plain.includes(c) ? "group-metric" : "",
      sort.key === c ? (sort.desc ? "sorted-desc" : "sorted-asc") : ""].join(" ").trim() || null,
    onclick: () => onSort({key: c, desc: sort.key === c ? !sort.desc : false}),
  }, c === "duration_s" ? "duration" : c.replace(/^config\./, ""))));
}

// a run's tags, each a button that shows the runs tagged so (*onTag*)
function tagsCell(tags, attrs, onTag) {
  return el("td", attrs, (tags || []).map((tag) => el("button", {class: "tag", title: "show the runs tagged " + tag, onclick: () => onTag(tag)}, tag)));
}

// a run's notes: the last one, "+2" for the earlier ones, all of them in its title
function notesCell(notes, attrs) {
  const all = notes || [];
  return el("td", {...attrs, class: "notes", title: all.join("\n\n") || null}, all.length ? all[all.length - 1] : "",
    all.length > 1 ? el("span", {class: "more"}, ` +${all.length - 1}`) : null);
}
