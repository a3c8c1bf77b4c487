// Draw every claim chart on the page. Figures are JSON built from data/ at build time.
function drawClaimCharts() {
  if (typeof Plotly === "undefined") return;
  document.querySelectorAll("script[data-chart-for]").forEach(function (node) {
    var div = document.getElementById(node.getAttribute("data-chart-for"));
    if (!div || div.dataset.drawn) return;
    // A chart folded under "All data" is drawn when it is opened: drawn hidden, Plotly would size it to nothing.
    var folded = div.closest("details:not([open])");
    if (folded) {
      if (!folded.dataset.chartsWait) {
        folded.dataset.chartsWait = "1";
        folded.addEventListener("toggle", drawClaimCharts);
      }
      return;
    }
    var fig = JSON.parse(node.textContent);
    Plotly.newPlot(div, fig.data, fig.layout, { responsive: true, displaylogo: false });
    div.dataset.drawn = "1";
  });
}
// Material's instant navigation swaps pages without a reload; document$ tells us when.
if (typeof document$ !== "undefined") {
  document$.subscribe(drawClaimCharts);
} else {
  document.addEventListener("DOMContentLoaded", drawClaimCharts);
}
