// The backward stepper: walks DATA.steps (node indices in the order backward visits them),
// highlights each node in the Graphviz SVG of the current view and shows the engine's numbers.
"use strict";
const DATA = JSON.parse(document.getElementById("explorer-data").textContent);
const $ = (id) => document.getElementById(id);
const state = { view: DATA.start, step: 0, shown: {} };  // shown: svg key -> <g>

// ------------------------------------------------------------ numbers
function fmt(x) {
  return typeof x === "number" ? x.toPrecision(6) : String(x);  // "nan", "inf" come as text
}

function nums(summary, cls) {
  const box = document.createElement("div");
  box.className = "nums " + (cls || "");
  summary.head.forEach((x, k) => {
    const span = document.createElement("span");
    span.className = "num";
    span.dataset.i = k;
    span.textContent = fmt(x);
    box.appendChild(span);
  });
  return box;
}

function stats(summary) {
  const p = document.createElement("div");
  p.className = "stats";
  const shape = summary.shape.length ? "(" + summary.shape.join(", ") + ")" : "scalar";
  p.append("shape " + shape + " · norm ");
  const norm = document.createElement("span");
  norm.className = "norm";
  norm.textContent = fmt(summary.norm);
  p.append(norm);
  if (summary.n > 1) p.append(" · min " + fmt(summary.min) + " · max " + fmt(summary.max) + " · mean " + fmt(summary.mean));
  if (summary.truncated) p.append(" · showing the first " + summary.head.length + " of " + summary.n + " values");
  return p;
}

function describe(summary, target, cls) {
  target.replaceChildren();
  if (!summary) {
    target.textContent = "not kept (see the notes below)";
    return;
  }
  target.append(nums(summary, cls), stats(summary));
}

// ------------------------------------------------------------ small pictures
function short(x) {
  return typeof x === "number" ? Number(x.toPrecision(3)).toString() : String(x);
}

function span(cls, text) {
  const el = document.createElement("span");
  el.className = cls;
  el.textContent = text;
  return el;
}

function figure(cls, caption, ...parts) {
  const fig = document.createElement("figure"), cap = document.createElement("figcaption");
  fig.className = "pic " + cls;
  cap.textContent = caption;
  fig.append(cap, ...parts);
  return fig;
}

function heatmap(summary, what) {
  const grid = summary.grid, rows = grid.length, cols = grid[0].length;
  const cell = Math.max(4, Math.floor(120 / Math.max(rows, cols)));
  const canvas = document.createElement("canvas");
  canvas.width = cols * cell; canvas.height = rows * cell;
  const ctx = canvas.getContext("2d");
  const big = Math.max(1e-30, ...grid.flat().filter((x) => typeof x === "number").map(Math.abs));
  const colour = (t) => {  // t in [-1, 1]: blue negative, white 0, red positive
    const a = Math.round(255 * (1 - Math.abs(t)));
    return t >= 0 ? `rgb(255,${a},${a})` : `rgb(${a},${a},255)`;
  };
  grid.forEach((row, r) => row.forEach((x, c) => {
    ctx.fillStyle = colour(typeof x === "number" ? x / big : 0);
    ctx.fillRect(c * cell, r * cell, cell, cell);
  }));
  const last = summary.shape.length ? summary.shape[summary.shape.length - 1] : 1;
  const all = summary.shape.length < 2 ? [1, summary.n] : [summary.n / last, last];
  const bar = document.createElement("canvas");
  bar.width = 100; bar.height = 8;
  const bctx = bar.getContext("2d");
  for (let x = 0; x < bar.width; x++) { bctx.fillStyle = colour(2 * x / (bar.width - 1) - 1); bctx.fillRect(x, 0, 1, 8); }
  const scale = document.createElement("div");
  scale.className = "scale";
  scale.append(span("scale-lo", short(-big)), bar, span("scale-hi", short(big)), span("scale-mid", "(white: 0)"));
  return figure("heatmap", `${what}, heatmap: rows 1–${rows} × columns 1–${cols} of ${all[0]} × ${all[1]} ` +
                `(rows: the leading axes, columns: the last); colour: the value`, canvas, scale);
}

function histogram(summary, what) {
  const hist = summary.hist, canvas = document.createElement("canvas");
  canvas.width = 160; canvas.height = 48;
  const ctx = canvas.getContext("2d"), top = Math.max(...hist.counts), w = canvas.width / hist.counts.length;
  ctx.fillStyle = "#2a7ae2";
  hist.counts.forEach((n, k) => {
    const h = top ? (n / top) * (canvas.height - 2) : 0;
    ctx.fillRect(k * w + 1, canvas.height - h, w - 2, h);
  });
  const axis = document.createElement("div");
  axis.className = "axis";
  axis.append(span("axis-lo", short(hist.lo)), span("axis-name", "value →"), span("axis-hi", short(hist.hi)));
  return figure("histogram", `${what}, histogram of all ${summary.n} values in ${hist.counts.length} bins; ` +
                `bar height: how many (the tallest: ${top})`, canvas, axis);
}

// ------------------------------------------------------------ the graph
function view() { return DATA.views[state.view]; }

function showView(id) {
  if (!DATA.views[id]) return;
  drawView(id);
  showStep(state.step);
}

function drawView(id) {
  state.view = id;
  $("tip").hidden = true;  // its box is gone: no mouseleave will come
  const graph = $("graph");
  graph.innerHTML = view().svg;
  graph.dataset.view = id;
  state.shown = {};
  graph.querySelectorAll("g.node, g.cluster").forEach((g) => {
    const title = g.querySelector("title");
    if (!title) return;
    const key = title.textContent;
    g.dataset.key = key;
    if (g.classList.contains("node")) state.shown[key] = g;
    const target = view().clicks[key];
    if (target && DATA.views[target]) {
      g.classList.add("clickable");
      g.dataset.opens = target;
      g.addEventListener("click", (event) => { event.stopPropagation(); showView(target); });
    }
    if (g.classList.contains("node")) {
      g.addEventListener("mouseenter", (event) => showTip(key, event));
      g.addEventListener("mousemove", moveTip);
      g.addEventListener("mouseleave", () => { $("tip").hidden = true; });
    }
  });
}

// Stepping onto a node folded into a module box opens that box (and any box inside it that
// still folds the node), so the highlight is on the node itself, not on the whole module.
function reveal(i) {
  for (let opened = 0; opened < 16; opened++) {
    const box = keysOf(i).find((key) => view().boxes[key]), target = box && view().clicks[box];
    if (!target || !DATA.views[target] || target === state.view) return;
    drawView(target);
  }
}

function keysOf(node) { return view().keys[node] || []; }

function highlight() {
  const graph = $("graph"), node = DATA.steps[state.step];
  graph.querySelectorAll(".current, .visited, .grad-in").forEach((g) => g.classList.remove("current", "visited", "grad-in"));
  DATA.steps.slice(0, state.step).forEach((i) => keysOf(i).forEach((k) => state.shown[k] && state.shown[k].classList.add("visited")));
  const mine = keysOf(node);
  mine.forEach((k) => state.shown[k] && state.shown[k].classList.add("current"));
  graph.querySelectorAll("g.edge").forEach((g) => {
    const [from, to] = g.querySelector("title").textContent.split("->");
    if (mine.includes(from) && !mine.includes(to)) g.classList.add("grad-in");
  });
  const first = state.shown[mine[0]];
  if (first) first.scrollIntoView({ block: "center", inline: "center" });
}

// ------------------------------------------------------------ the panel
function label(i) {
  const n = DATA.nodes[i];
  return n.label + (n.op && !n.label.startsWith(n.op) ? " [" + n.op + "]" : "");
}

function showArrivals(i) {
  const box = $("arrivals"), node = DATA.nodes[i];
  box.replaceChildren();
  if (state.step === 0) {
    box.textContent = "This is the output L: backward starts here with ∂L/∂L = 1.";
    return;
  }
  if (!node.from.length) {
    box.textContent = "no consumer's contribution was kept (see the notes below)";
    return;
  }
  node.from.forEach((c) => {
    const div = document.createElement("div");
    div.className = "arrival";
    div.dataset.from = c.node;
    div.append("from " + label(c.node) + ", its input " + c.arg + (c.local !== undefined ? " (local derivative " + fmt(c.local) + ")" : ""));
    div.append(nums(c.grad), stats(c.grad));
    box.appendChild(div);
  });
  if (node.from.length > 1) {
    const sum = document.createElement("p");
    sum.className = "sum";
    const parts = node.from.map((c) => (c.grad.n === 1 ? fmt(c.grad.head[0]) : "g" + (node.from.indexOf(c) + 1)));
    const total = node.grad ? (node.grad.n === 1 ? fmt(node.grad.head[0]) : "the gradient below") : "?";
    sum.textContent = `it feeds ${node.from.length} consumers, so backward adds (+=): ∂L/∂node = ${parts.join(" + ")} = ${total}`;
    box.appendChild(sum);
  }
}

function stepTo(k) {
  state.step = Math.max(0, Math.min(DATA.steps.length - 1, k));
  reveal(DATA.steps[state.step]);
  showStep(state.step);
}

function showStep(k) {
  state.step = Math.max(0, Math.min(DATA.steps.length - 1, k));
  const i = DATA.steps[state.step], node = DATA.nodes[i];
  $("counter").textContent = `step ${state.step + 1} / ${DATA.steps.length}`;
  $("node-title").textContent = label(i);
  const box = keysOf(i).find((key) => view().boxes[key]);
  const where = box ? " · inside the module box " + view().boxes[box] +
    (view().clicks[box] ? " (click it to open)" : " (its inside was not laid out: see the notes below)") : "";
  $("node-meta").textContent = (node.op ? "made by op " + node.op : node.kind) + (node.dtype ? " · " + node.dtype : "") + where;
  $("rule").textContent = node.rule;
  const grad = $("grad-view");
  grad.dataset.node = i;
  grad.dataset.step = state.step;
  describe(node.grad, grad);
  describe(node.value, $("value-view"));
  showArrivals(i);
  highlight();
}

// ------------------------------------------------------------ hover
function showTip(key, event) {
  const tip = $("tip"), nodes = Object.keys(view().keys).filter((i) => keysOf(i).includes(key)).map(Number);
  tip.replaceChildren();
  if (view().boxes[key]) {
    tip.append(`module ${view().boxes[key]}: ${nodes.length} node${nodes.length === 1 ? "" : "s"} inside` +
               (view().clicks[key] ? " · click to open" : " · not laid out (see the notes)"));
  } else if (nodes.length) {
    const node = DATA.nodes[nodes[0]];
    tip.dataset.node = nodes[0];
    const title = document.createElement("b");
    title.textContent = label(nodes[0]);
    tip.append(title, document.createElement("br"), "value");
    tip.append(nums(node.value, "tip-value"), stats(node.value), "grad");
    if (node.grad) tip.append(nums(node.grad, "tip-grad"), stats(node.grad)); else tip.append(" not kept");
    const pic = node.grad || node.value, what = node.grad ? "its gradient" : "its value";
    if (pic.grid && pic.n > 1) tip.append(heatmap(pic, what));
    if (pic.hist && pic.n > 1) tip.append(histogram(pic, what));
  } else {
    return;
  }
  tip.hidden = false;
  moveTip(event);
}

function moveTip(event) {
  const tip = $("tip");
  tip.style.left = Math.min(event.clientX + 14, window.innerWidth - 370) + "px";
  tip.style.top = Math.min(event.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + "px";
}

// ------------------------------------------------------------ controls
$("start").addEventListener("click", () => stepTo(0));
$("prev").addEventListener("click", () => stepTo(state.step - 1));
$("next").addEventListener("click", () => stepTo(state.step + 1));
$("end").addEventListener("click", () => stepTo(DATA.steps.length - 1));
document.addEventListener("keydown", (event) => {
  const moves = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
  if (event.key in moves) stepTo(state.step + moves[event.key]);
  else if (event.key === "Home") stepTo(0);
  else if (event.key === "End") stepTo(DATA.steps.length - 1);
  else return;
  event.preventDefault();
});
DATA.notes.forEach((text) => { const li = document.createElement("li"); li.textContent = text; $("notes").appendChild(li); });
showView(state.view);
