// irqlab serve: charts (uPlot, served by irqlab) and the live page's polling.
// Data comes from <script type="application/json"> blocks the server escaped; this file
// never builds HTML from data: text goes in with textContent only.
"use strict";

const WIDTH = (el) => Math.min(1200, (el && el.clientWidth) ||
                                     document.querySelector("main").clientWidth - 20);

// A log axis of fractions: 0.1, 0.01, then 1e-3, 1e-4 (uPlot's default rounds them to 0).
const fractions = (u, ticks) => ticks.map((v) => (v == null ? "" : v >= 0.01 ? String(v)
                                                  : "1e" + Math.round(Math.log10(v))));

function readJson(id) {
  const el = document.getElementById(id);
  return el ? JSON.parse(el.textContent) : null;
}

const COLOURS = ["#c33", "#36c", "#3a3", "#a3a", "#e80", "#099", "#555", "#b66"];

// Latencies arrive in the chart's unit (d.unit, chosen by the server); the axis label
// names it. The legend lists the series only (live: false): the page's tables carry
// every figure, formatted by the server as the CLI formats it.
function latencyAxis(d) {
  return {label: "latency (" + d.unit + ")", size: 70};
}

function windowsChart(el, d) {
  const step = uPlot.paths.stepped({align: 1});
  const opts = {
    width: WIDTH(el), height: 280, legend: {live: false},
    scales: {x: {time: false, range: [0, d.x_max]}, y: {distr: 3}},
    axes: [{label: "time into the run (s)"}, latencyAxis(d)],
    series: [{label: "time (s)"},
             {label: "window max", stroke: "#c33", paths: step},
             {label: "window mean", stroke: "#36c", paths: step},
             {label: "window min", stroke: "#3a3", paths: step}],
  };
  return new uPlot(opts, [d.x, d.series.max_ns, d.series.mean_ns, d.series.min_ns], el);
}

function joined(d, xKey, yKey) {
  const names = Object.keys(d.series);
  const tables = names.map((n) => [d.series[n][xKey], d.series[n][yKey]]);
  return [names, tables.length === 1 ? tables[0] : uPlot.join(tables)];
}

function distributionChart(el, d) {
  const [names, data] = joined(d, "x", "count");
  const opts = {
    width: WIDTH(el), height: 300, legend: {live: false},
    scales: {x: {time: false, distr: 3}, y: {distr: 3}},
    axes: [latencyAxis(d), {label: "samples per " + d.bin_text + " bin",
                            size: 70}],
    series: [{label: "latency (" + d.unit + ")"}].concat(names.map((n, i) => ({
      label: n, stroke: COLOURS[i % COLOURS.length], spanGaps: false,
      paths: uPlot.paths.stepped({align: 1}), points: {show: false}}))),
  };
  return new uPlot(opts, data, el);
}

function tailChart(el, d) {
  const [names, data] = joined(d, "x", "y");
  const opts = {
    width: WIDTH(el), height: 300, legend: {live: false},
    scales: {x: {time: false, distr: 3}, y: {distr: 3}},
    axes: [latencyAxis(d), {label: "fraction of samples ≥ latency", size: 70,
                            values: fractions}],
    series: [{label: "latency (" + d.unit + ")"}].concat(names.map((n, i) => ({
      label: n, stroke: COLOURS[i % COLOURS.length], spanGaps: true,
      paths: uPlot.paths.stepped({align: 1}), points: {show: false}}))),
  };
  return new uPlot(opts, data, el);
}

function trendChart(el, d) {
  const marks = new Set(d.marks);
  const marked = d.y.map((v, i) => (marks.has(i) ? v : null));
  const opts = {
    width: WIDTH(el), height: 300, legend: {live: false},
    scales: {x: {time: d.dated}},
    axes: [{label: "run started (UTC)"}, {label: d.metric + " (" + d.unit + ")", size: 70}],
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    series: [{label: "started"},
             {label: d.metric, stroke: "#36c", points: {show: true}},
             {label: "change point", stroke: "transparent",
              points: {show: true, size: 12, stroke: "#c00", fill: "#c00"}}],
  };
  return new uPlot(opts, [d.x, d.y, marked], el);
}

const CHARTS = {windows: windowsChart, distribution: distributionChart, tail: tailChart,
                trend: trendChart};

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
    width: WIDTH(document.getElementById("live-chart")), height: 260, legend: {live: false},
    scales: {x: {time: false}, y: {distr: 3}},
    axes: [{label: "time into the run (s)"}, {label: "latency (µs)", size: 70}],
    series: [{label: "start (s)"}, {label: "window max", stroke: "#c33"},
             {label: "window mean", stroke: "#36c"}],
  }, data, document.getElementById("live-chart"));
  let after = 0;
  async function poll() {
    let stop = false;
    try {
      const r = await fetch(`/api/runs/${cfg.run_id}/windows?after=${after}`,
                            {credentials: "same-origin"});
      if (r.ok) {
        const got = await r.json();
        got.windows.forEach((w, i) => {
          const tr = document.createElement("tr");
          tr.dataset.window = String(w.index);
          // The cells as the server formatted them (the CLI's formatters).
          got.cells[i].forEach((text) => cell(tr, text));
          body.appendChild(tr);
          data[0].push(w.start_s);
          data[1].push(w.max_ns == null ? null : w.max_ns / 1e3);
          data[2].push(w.mean_ns == null ? null : w.mean_ns / 1e3);
          after = w.index + 1;
        });
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
