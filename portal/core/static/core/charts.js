// Renders every <figure data-chart="SPEC-ID"> from the Vega-Lite spec in <script id="SPEC-ID">.
// vega-embed's menu saves the chart as PNG or SVG; the CSV link saves the spec's own rows, so the
// figure and its numbers always come from the same data. A figure with data-actions="false" (a
// sparkline) has neither. Pages that swap in fresh HTML render its charts with portalCharts.render.
(function () {
  if (window.portalCharts) return;  // a page whose parts each load the chart scripts renders once
  function toCsv(rows) {
    if (!rows.length) return "";
    const columns = Object.keys(rows[0]);
    // As the server's CSV (portal/usage/selectors.py): a text cell a spreadsheet would run as a
    // formula (= + - @, tab, CR) gets a leading quote; run and user names are anybody's text.
    const cell = (v) => {
      let s = v === null || v === undefined ? "" : String(v);
      if (typeof v === "string" && /^[=+\-@\t\r]/.test(s)) s = "'" + s;
      return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
    };
    return [columns.join(",")].concat(rows.map((r) => columns.map((c) => cell(r[c])).join(","))).join("\n") + "\n";
  }
  function rowsOf(spec) {
    if (spec.data && Array.isArray(spec.data.values)) return spec.data.values;
    return (spec.layer || []).flatMap((layer) => rowsOf(layer));
  }
  // The chart's rows as a table under it, folded (WCAG 1.1.1): what a screen reader reads instead of
  // the drawing, and what anybody can copy. Text only (textContent): rows hold users' names.
  const MOST_ROWS = 500;
  function dataTable(figure, rows) {
    if (!rows.length || figure.querySelector(".chart-table")) return;
    const columns = Object.keys(rows[0]);
    const details = document.createElement("details");
    details.className = "chart-table";
    const summary = document.createElement("summary");
    const caption = figure.querySelector("figcaption");
    summary.textContent = "The chart's data as a table" + (rows.length > MOST_ROWS ?
      ` (the first ${MOST_ROWS} of ${rows.length} rows; the CSV has all)` : "");
    const scroll = document.createElement("div");
    scroll.className = "table-scroll";
    const table = document.createElement("table");
    if (caption) table.createCaption().textContent = caption.textContent;
    const head = table.createTHead().insertRow();
    columns.forEach((c) => {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = c;
      head.appendChild(th);
    });
    const body = table.createTBody();
    rows.slice(0, MOST_ROWS).forEach((r) => {
      const tr = body.insertRow();
      columns.forEach((c) => { tr.insertCell().textContent = r[c] === null || r[c] === undefined ? "" : String(r[c]); });
    });
    scroll.appendChild(table);
    details.append(summary, scroll);
    figure.appendChild(details);
  }
  function render(figure) {
    const spec = JSON.parse(document.getElementById(figure.dataset.chart).textContent);
    const view = figure.querySelector(".chart-view");
    const caption = figure.querySelector("figcaption");
    const name = (caption ? caption.textContent : figure.title || spec.description || "Chart") +
      (figure.dataset.actions === "false" ? "" : " (its data is in the table below)");
    // ast: Vega's expressions run in vega-embed's interpreter, not eval (the pages' CSP has no 'unsafe-eval').
    const actions = figure.dataset.actions === "false" ? false :
      { export: true, source: false, compiled: false, editor: false };
    vegaEmbed(view, spec, { ast: true, actions: actions })
      .then(() => {
        // vega-embed's menu button is an icon alone: give it a name (axe's summary-name).
        const menu = view.querySelector("details > summary");
        if (menu) menu.setAttribute("aria-label", "Save the chart as PNG or SVG");
        // The drawing is one image to assistive technology, named by its caption; the table says the rest.
        const drawing = view.querySelector("svg, canvas");
        if (drawing) {
          drawing.setAttribute("role", "img");
          drawing.setAttribute("aria-label", name);
        }
        figure.setAttribute("data-rendered", "true");
      })
      .catch((err) => { view.textContent = "Chart failed to render: " + err; });
    if (figure.dataset.actions !== "false") dataTable(figure, rowsOf(spec));
    const link = figure.querySelector(".chart-csv");
    if (!link) return;
    link.addEventListener("click", (event) => {
      event.preventDefault();
      const blob = new Blob([toCsv(rowsOf(spec))], { type: "text/csv" });
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = figure.dataset.csvName;
      a.click();
      URL.revokeObjectURL(a.href);
    });
  }
  const renderAll = (root) => root.querySelectorAll("figure[data-chart]").forEach(render);
  window.portalCharts = { render: renderAll, csv: toCsv };
  document.addEventListener("DOMContentLoaded", () => renderAll(document));
})();
