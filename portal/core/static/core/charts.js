// Renders every <figure data-chart="SPEC-ID"> from the Vega-Lite spec in <script id="SPEC-ID">.
// vega-embed's menu saves the chart as PNG or SVG; the CSV link saves the spec's own rows, so the
// figure and its numbers always come from the same data. A figure with data-actions="false" (a
// sparkline) has neither. Pages that swap in fresh HTML render its charts with portalCharts.render.
(function () {
  if (window.portalCharts) return;  // a page whose parts each load the chart scripts renders once
  function toCsv(rows) {
    if (!rows.length) return "";
    const columns = Object.keys(rows[0]);
    // As the server's CSV (portal/benchmarks/usage.py): a text cell a spreadsheet would run as a
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
  function render(figure) {
    const spec = JSON.parse(document.getElementById(figure.dataset.chart).textContent);
    const view = figure.querySelector(".chart-view");
    // ast: Vega's expressions run in vega-embed's interpreter, not eval (the pages' CSP has no 'unsafe-eval').
    const actions = figure.dataset.actions === "false" ? false :
      { export: true, source: false, compiled: false, editor: false };
    vegaEmbed(view, spec, { ast: true, actions: actions })
      .then(() => figure.setAttribute("data-rendered", "true"))
      .catch((err) => { view.textContent = "Chart failed to render: " + err; });
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
