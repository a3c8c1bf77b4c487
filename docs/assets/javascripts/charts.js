// Draw every claim chart on the page. Figures are JSON built from data/ at build time.

// A legend entry is one line in Plotly, cut at the chart's edge: on a phone a long one lost the part that tells the
// series apart. Entries break at their " · " separators, and a part still too wide between words (or, in Chinese,
// between characters). The names carry no markup of their own (the build turned < > & into full-width forms), so the
// <br> added here is the only tag in them.
var legendCanvas;
function textWidth(text) {
  legendCanvas = legendCanvas || document.createElement("canvas");
  var context = legendCanvas.getContext("2d");
  context.font = '12px "Open Sans", verdana, arial, sans-serif';
  return context.measureText(text).width;
}
function wrapLine(line, room) {
  if (textWidth(line) <= room) return [line];
  var words = /\s/.test(line) ? line.split(/(\s+)/) : Array.from(line);
  var lines = [], current = "";
  words.forEach(function (word) {
    if (current && textWidth(current + word) > room) {
      lines.push(current.trim());
      current = word.trim() ? word : "";
    } else {
      current += word;
    }
  });
  if (current.trim()) lines.push(current.trim());
  return lines;
}
function wrapLegend(data, room) {
  data.forEach(function (trace) {
    if (typeof trace.name !== "string") return;
    var lines = [];
    trace.name.split(" · ").forEach(function (part) { lines = lines.concat(wrapLine(part, room)); });
    trace.name = lines.join("<br>");
  });
}
// After drawing: where an entry runs past the chart's right edge, every entry is broken to the room its text has
// (from where Plotly placed the entries' text to the edge), so the entries still read alike, and the chart redrawn.
function fitLegend(div, fig, config) {
  var svg = div.querySelector("svg.main-svg");
  var texts = Array.from(div.querySelectorAll(".legend .traces text.legendtext"));
  var edge = svg ? svg.getBoundingClientRect().right : 0;
  if (!texts.some(function (t) { return t.getBoundingClientRect().right > edge; })) return Promise.resolve();
  var start = Math.min.apply(null, texts.map(function (t) { return t.getBoundingClientRect().left; }));
  wrapLegend(fig.data, edge - start - 8);
  return Plotly.react(div, fig.data, fig.layout, config);
}

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
    var config = { responsive: true, displaylogo: false };
    Plotly.newPlot(div, fig.data, fig.layout, config)
      .then(function () { return fitLegend(div, fig, config); })
      .then(function () { div.dataset.legendFitted = "1"; }); // the browser tests wait for this
    div.dataset.drawn = "1";
  });
}
// Material's instant navigation swaps pages without a reload; document$ tells us when.
if (typeof document$ !== "undefined") {
  document$.subscribe(drawClaimCharts);
} else {
  document.addEventListener("DOMContentLoaded", drawClaimCharts);
}
