// Small canvas charts for the live page: lineChart (series of [x, y] points) and heatmap (a matrix
// with row and column labels). No library: each draws the whole canvas again from its data.
"use strict";

const PALETTE = ["#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#ad1457", "#5d4037",
                 "#9e9d24", "#283593", "#c62828", "#00695c", "#4e342e"];

// A canvas sized for the screen's pixels; returns its 2D context in CSS pixels.
function prepare(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth, height = canvas.clientHeight;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.font = "11px system-ui, sans-serif";
  return { ctx, width, height };
}

// Five round tick values covering [lo, hi].
function ticks(lo, hi) {
  const step = Math.pow(10, Math.floor(Math.log10((hi - lo) / 4 || 1)));
  const nice = [1, 2, 5, 10].map(m => m * step).find(s => (hi - lo) / s <= 5) || 10 * step;
  const out = [];
  for (let v = Math.ceil(lo / nice) * nice; v <= hi + 1e-12; v += nice) out.push(v);
  return out;
}

// Ticks of a log axis (lo, hi are powers of ten): whole powers when the range spans one or more.
function logTicks(lo, hi) {
  const whole = [];
  for (let v = Math.ceil(lo); v <= hi + 1e-12; v++) whole.push(v);
  return whole.length >= 2 ? whole : ticks(lo, hi);
}

function label(v) {
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(0) : String(+v.toPrecision(3));
}

// [smallest, largest] of an array (a long run has too many values to spread into Math.min).
function extent(values) {
  return values.reduce(([lo, hi], v) => [Math.min(lo, v), Math.max(hi, v)], [Infinity, -Infinity]);
}

// At most `most` points of a series, evenly picked (a long run still draws quickly).
function thin(points, most) {
  if (points.length <= most) return points;
  const stride = points.length / most, out = [];
  for (let i = 0; i < most; i++) out.push(points[Math.floor(i * stride)]);
  out.push(points[points.length - 1]);
  return out;
}

// The trailing geometric mean of up to `window` points of a positive series: its typical level on a
// log axis, without the step-to-step noise.
function smooth(points, window) {
  let sum = 0;
  return points.map(([x, y], i) => {
    sum += Math.log(y);
    if (i >= window) sum -= Math.log(points[i - window][1]);
    return [x, Math.exp(sum / Math.min(i + 1, window))];
  });
}

// series: [{name, color, points: [[x, y], ...], dots, width}],
// options: {logY, marks: [x, ...], yRange: [lo, hi] (shared by small multiples), compact}
function lineChart(canvas, series, options = {}) {
  const { ctx, width, height } = prepare(canvas);
  const pad = options.compact ? { left: 40, right: 16, top: 6, bottom: 16 } : { left: 52, right: 20, top: 8, bottom: 22 };
  const shown = series.map(s => ({ ...s, points: s.points.filter(([x, y]) =>
    Number.isFinite(x) && Number.isFinite(y) && (!options.logY || y > 0)) }));
  const all = shown.flatMap(s => s.points);
  if (!all.length) {
    ctx.fillStyle = "#999";
    ctx.fillText("no data yet", width / 2 - 25, height / 2);
    return;
  }
  const f = options.logY ? Math.log10 : (v => v);
  let [x0, x1] = extent(all.map(p => p[0]));
  let [y0, y1] = (options.yRange || extent(all.map(p => p[1]))).map(f);
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const X = x => pad.left + (x - x0) / (x1 - x0) * (width - pad.left - pad.right);
  const Y = y => height - pad.bottom - (f(y) - y0) / (y1 - y0) * (height - pad.top - pad.bottom);
  drawAxes(ctx, { x0, x1, y0, y1, X, width, height, pad, logY: options.logY, compact: options.compact });
  for (const x of options.marks || []) {
    ctx.strokeStyle = "#c62828";
    ctx.beginPath(); ctx.moveTo(X(x), pad.top); ctx.lineTo(X(x), height - pad.bottom); ctx.stroke();
  }
  for (const s of shown) {
    ctx.strokeStyle = ctx.fillStyle = s.color;
    ctx.lineWidth = s.width || 1.5;
    ctx.beginPath();
    thin(s.points, 2 * width).forEach(([x, y], i) => (i ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
    ctx.stroke();
    if (s.dots) for (const [x, y] of s.points) { ctx.beginPath(); ctx.arc(X(x), Y(y), 3, 0, 7); ctx.fill(); }
  }
}

function drawAxes(ctx, a) {
  const { x0, x1, y0, y1, X, width, height, pad } = a;
  ctx.strokeStyle = "#ccc"; ctx.fillStyle = "#555"; ctx.lineWidth = 1;
  const yAt = v => height - pad.bottom - (v - y0) / (y1 - y0) * (height - pad.top - pad.bottom);
  for (const v of a.logY ? logTicks(y0, y1) : ticks(y0, y1)) {
    ctx.beginPath(); ctx.moveTo(pad.left, yAt(v)); ctx.lineTo(width - pad.right, yAt(v)); ctx.stroke();
    ctx.fillText(label(a.logY ? Math.pow(10, v) : v), 4, yAt(v) + 4);
  }
  for (const v of ticks(x0, x1)) ctx.fillText(label(v), X(v) - 8, height - (a.compact ? 3 : 6));
  if (!a.compact) ctx.fillText("step", 4, height - 6);
}

// matrix: rows x cols in [0, 1]; rowLabels down the left, colLabels along the top.
function heatmap(canvas, matrix, rowLabels, colLabels) {
  const { ctx, width, height } = prepare(canvas);
  if (!matrix.length) return;
  const left = 70, top = 24;
  const cell = Math.max(4, Math.min(36, (width - left) / colLabels.length, (height - top) / rowLabels.length));
  ctx.font = '13px system-ui, sans-serif, "TinygradLite CJK"';
  matrix.forEach((row, i) => row.forEach((v, j) => {
    const shade = Math.round(255 * (1 - Math.min(1, Math.max(0, v))));
    ctx.fillStyle = `rgb(${shade}, ${Math.round(0.6 * shade + 100)}, 255)`;
    ctx.fillRect(left + j * cell, top + i * cell, cell - 1, cell - 1);
  }));
  ctx.fillStyle = "#222";
  rowLabels.forEach((t, i) => ctx.fillText(t, 4, top + i * cell + cell / 2 + 4));
  colLabels.forEach((t, j) => ctx.fillText(t, left + j * cell + 2, top - 8));
}
