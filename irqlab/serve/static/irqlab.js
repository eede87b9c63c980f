// irqlab serve: charts (uPlot, served by irqlab) and the live page's polling.
// Data comes from <script type="application/json"> blocks the server escaped; this file
// never builds HTML from data: text goes in with textContent only.
"use strict";

const WIDTH = () => Math.min(1200, document.querySelector("main").clientWidth - 20);

function readJson(id) {
  const el = document.getElementById(id);
  return el ? JSON.parse(el.textContent) : null;
}

function windowsChart(el, d) {
  const opts = {
    width: WIDTH(), height: 280, scales: {x: {time: false}},
    axes: [{label: "time into the run (s)"}, {label: "latency (ns)", size: 70}],
    series: [{label: "start (s)"},
             {label: "max (ns)", stroke: "#c33"},
             {label: "mean (ns)", stroke: "#36c"},
             {label: "min (ns)", stroke: "#3a3"}],
  };
  return new uPlot(opts, [d.x, d.series.max_ns, d.series.mean_ns, d.series.min_ns], el);
}

const COLOURS = ["#c33", "#36c", "#3a3", "#a3a", "#e80", "#099", "#555", "#b66"];

function ccdfChart(el, d) {
  const names = Object.keys(d.series);
  const tables = names.map((n) => [d.series[n].map((p) => p[0]), d.series[n].map((p) => p[1])]);
  const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
  const opts = {
    width: WIDTH(), height: 300,
    scales: {x: {time: false, distr: 3}, y: {distr: 3}},
    axes: [{label: "latency (ns)"}, {label: "fraction of samples above", size: 70}],
    series: [{label: "latency (ns)"}].concat(names.map((n, i) => ({
      label: n, stroke: COLOURS[i % COLOURS.length], spanGaps: true,
      points: {show: true}}))),
  };
  return new uPlot(opts, data, el);
}

function trendChart(el, d) {
  const marks = new Set(d.marks);
  const marked = d.y.map((v, i) => (marks.has(i) ? v : null));
  const opts = {
    width: WIDTH(), height: 300, scales: {x: {time: false}},
    axes: [{label: "run (in order)"}, {label: d.metric + " (ns)", size: 70}],
    series: [{label: "run", value: (u, i) => (i == null ? "" : d.labels[i] || i)},
             {label: d.metric + " (ns)", stroke: "#36c", points: {show: true}},
             {label: "change point", stroke: "transparent",
              points: {show: true, size: 12, stroke: "#c00", fill: "#c00"}}],
  };
  return new uPlot(opts, [d.x, d.y, marked], el);
}

function barsChart(el, d) {
  const opts = {
    width: WIDTH(), height: 280, scales: {x: {time: false}},
    axes: [{label: "bucket from (ns)", values: (u, ticks) => ticks.map((i) => d.labels[i] || "")},
           {label: "samples", size: 70}],
    series: [{label: "bucket", value: (u, i) => (i == null ? "" : d.labels[i])},
             {label: "samples", stroke: "#36c", fill: "rgba(51,102,204,0.4)",
              paths: uPlot.paths.bars({size: [0.8]})}],
  };
  return new uPlot(opts, [d.x, d.y], el);
}

const CHARTS = {windows: windowsChart, ccdf: ccdfChart, trend: trendChart, bars: barsChart};

function drawCharts() {
  for (const el of document.querySelectorAll("[data-chart]")) {
    const d = readJson(el.dataset.chart);
    if (d && CHARTS[d.kind]) CHARTS[d.kind](el, d);
  }
}

function cell(tr, text) {
  const td = document.createElement("td");
  td.className = "num";
  td.textContent = text == null ? "—" : String(text);
  tr.appendChild(td);
}

function startLive(cfg) {
  const body = document.querySelector("#live-windows tbody");
  const data = [[], [], []];
  const plot = new uPlot({
    width: WIDTH(), height: 260, scales: {x: {time: false}},
    axes: [{label: "time into the run (s)"}, {label: "latency (ns)", size: 70}],
    series: [{label: "start (s)"}, {label: "max (ns)", stroke: "#c33"},
             {label: "mean (ns)", stroke: "#36c"}],
  }, data, document.getElementById("live-chart"));
  let after = 0;
  async function poll() {
    let stop = false;
    try {
      const r = await fetch(`/api/runs/${cfg.run_id}/windows?after=${after}`,
                            {credentials: "same-origin"});
      if (r.ok) {
        const got = await r.json();
        for (const w of got.windows) {
          const tr = document.createElement("tr");
          tr.dataset.window = String(w.index);
          [w.index, w.start_s, w.samples, w.mean_ns, w.max_ns].forEach((v) => cell(tr, v));
          body.appendChild(tr);
          data[0].push(w.start_s); data[1].push(w.max_ns); data[2].push(w.mean_ns);
          after = w.index + 1;
        }
        if (got.windows.length) plot.setData(data);
        document.getElementById("live-status").textContent = got.status;
        document.getElementById("live-count").textContent = String(data[0].length);
        stop = got.status !== "running";
      }
    } finally {
      if (!stop) setTimeout(poll, cfg.poll_ms);
    }
  }
  poll();
}

document.addEventListener("DOMContentLoaded", () => {
  drawCharts();
  const live = readJson("live-config");
  if (live) startLive(live);
});
