// The attention lab's page: ask /api/translate for a translation with some source tokens masked,
// then draw the source tokens, the translation, the attention heatmaps and the beam tree.
// Plain JavaScript, no library: every drawing is a canvas or an SVG built here.
"use strict";

const KINDS = ["encoder self-attention", "decoder self-attention", "cross-attention"];
const state = { text: "", mask: new Set(), result: null, kind: "cross-attention", layer: 0, requests: 0 };
const $ = (id) => document.getElementById(id);
const FONT = '12px system-ui, sans-serif, "TinygradLite CJK"';
// A canvas draws with fonts already loaded: load the CJK one before the first heatmap.
const fontReady = document.fonts.load('12px "TinygradLite CJK"', "苹").catch(() => null);

// ------------------------------------------------------------------ asking the server
async function translate() {
  const request = ++state.requests;
  $("status").textContent = "translating…";
  const response = await fetch("/api/translate", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ text: state.text, mask: [...state.mask].sort((a, b) => a - b) }),
  });
  const payload = await response.json();
  await fontReady;
  if (request !== state.requests) return;             // a newer request has been sent since
  $("status").textContent = "";
  if (!response.ok) {
    clearResult(payload.error);
    return;
  }
  $("error").hidden = true;
  state.result = payload;
  state.layer = Math.min(state.layer, payload.attention[state.kind].weights.length - 1);
  drawAll();
  document.body.dataset.results = Number(document.body.dataset.results || 0) + 1;  // for tests
}

// No translation on screen but `why` (what to do): the old one belonged to other text.
function clearResult(why) {
  state.result = null;
  for (const id of ["source", "translation", "logprob", "attention", "beam"]) $(id).replaceChildren();
  $("error").textContent = why;
  $("error").hidden = false;
}

function drawAll() {
  drawSource();
  drawTranslation();
  drawLayerChoice();
  drawAttention();
  drawBeam();
}

// ------------------------------------------------------------------ source and translation
function drawSource() {
  const box = $("source");
  box.replaceChildren();
  state.result.source_tokens.forEach((token, i) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "token";
    button.dataset.position = i;
    if (state.mask.has(i)) button.classList.add("masked");
    if (state.result.unknown.includes(i)) {
      button.classList.add("unknown");
      button.title = "not in the vocabulary: the model reads <unk>";
    }
    button.textContent = token;
    const sub = document.createElement("sub");
    sub.textContent = i;
    button.append(sub);
    button.addEventListener("click", () => {
      if (state.mask.has(i)) state.mask.delete(i); else state.mask.add(i);
      translate();
    });
    box.append(button);
  });
}

function drawTranslation() {
  const r = state.result;
  $("translation").textContent = r.translation;
  const masked = r.masked.length ? `masked: ${r.masked.map((i) => r.source_tokens[i]).join(" ")}` : "nothing masked";
  $("logprob").textContent = `log-probability ${r.log_prob.toFixed(3)} · ${r.target_tokens.length} tokens · ${masked}`;
}

// ------------------------------------------------------------------ attention heatmaps
function drawKindTabs() {
  const tabs = $("kinds");
  tabs.replaceChildren();
  for (const kind of KINDS) {
    const button = document.createElement("button");
    button.type = "button";
    button.role = "tab";
    button.textContent = kind;
    button.dataset.kind = kind;
    button.setAttribute("aria-selected", kind === state.kind);
    button.addEventListener("click", () => {
      state.kind = kind;
      drawKindTabs();
      if (state.result) { drawLayerChoice(); drawAttention(); }
    });
    tabs.append(button);
  }
}

function drawLayerChoice() {
  const select = $("layer");
  const layers = state.result.attention[state.kind].weights.length;
  if (select.options.length !== layers) {
    select.replaceChildren(...Array.from({ length: layers }, (_, l) => new Option(`${l + 1} of ${layers}`, l)));
  }
  select.value = state.layer;
}

function drawAttention() {
  const panel = $("attention");
  const { queries, keys, weights } = state.result.attention[state.kind];
  panel.replaceChildren();
  weights[state.layer].forEach((matrix, head) => {
    const figure = document.createElement("figure");
    const canvas = document.createElement("canvas");
    Object.assign(canvas.dataset, { kind: state.kind, layer: state.layer, head });
    heatmap(canvas, matrix, queries, keys, maskedKeys());
    const caption = document.createElement("figcaption");
    caption.textContent = `head ${head + 1}`;
    figure.append(canvas, caption);
    panel.append(figure);
  });
  panel.dataset.drawn = Number(panel.dataset.drawn) + 1;
}

function maskedKeys() {
  return state.kind === "decoder self-attention" ? new Set() : new Set(state.result.masked);
}

// One matrix (queries x keys) as a grid of squares, darker for more weight, the tokens as labels.
function heatmap(canvas, matrix, queries, keys, masked) {
  const cell = Math.max(10, Math.min(26, Math.floor(360 / Math.max(queries.length, keys.length))));
  const ctx = canvas.getContext("2d");
  ctx.font = FONT;
  const labels = keys.map((t, k) => keyLabel(t, masked.has(k)));
  const left = Math.max(...queries.map((t) => ctx.measureText(t).width)) + 8;
  const top = Math.max(...labels.map((l) => (l.chars ? l.chars.length * LINE : ctx.measureText(l.text).width))) + 8;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = (left + cell * keys.length + 4) * ratio;
  canvas.height = (top + cell * queries.length + 4) * ratio;
  canvas.style.width = `${canvas.width / ratio}px`;
  canvas.style.height = `${canvas.height / ratio}px`;
  Object.assign(canvas.dataset, { left, top, cell });   // where the cells are: tests read them
  ctx.scale(ratio, ratio);
  ctx.font = FONT;
  matrix.forEach((row, q) => row.forEach((w, k) => {
    ctx.fillStyle = shade(w);
    ctx.fillRect(left + k * cell, top + q * cell, cell - 1, cell - 1);
  }));
  ctx.fillStyle = "#1d2330";
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  queries.forEach((t, q) => ctx.fillText(t, left - 4, top + q * cell + cell / 2));
  labels.forEach((l, k) => drawKeyLabel(ctx, l, left + k * cell + cell / 2, top - 4));
  canvas.addEventListener("mousemove", (event) => {
    const k = Math.floor((event.offsetX - left) / cell), q = Math.floor((event.offsetY - top) / cell);
    const inside = q >= 0 && q < queries.length && k >= 0 && k < keys.length;
    canvas.title = inside ? `${queries[q]} → ${keys[k]}: ${matrix[q][k].toFixed(3)}` : "";
  });
}

// A key's column label: Chinese stands upright, one character under the other (as it is written
// in columns); anything else (English tokens, <unk>) is turned to read upwards.
const LINE = 14;                                        // px from one upright character to the next
const UPRIGHT = /^[\u2E80-\u9FFF\uF900-\uFAFF\uFF00-\uFFEF]+$/;
function keyLabel(token, masked) {
  return { text: masked ? `✕ ${token}` : token, masked,
           chars: UPRIGHT.test(token) ? [...(masked ? ["✕"] : []), ...token] : null };
}

// The label ends at (x, bottom), centred on its column.
function drawKeyLabel(ctx, label, x, bottom) {
  ctx.save();
  ctx.fillStyle = label.masked ? "#b02020" : "#1d2330";
  if (label.chars) {
    ctx.textAlign = "center";
    label.chars.forEach((c, i) => ctx.fillText(c, x, bottom - (label.chars.length - i - 0.5) * LINE));
  } else {
    ctx.translate(x, bottom);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left";
    ctx.fillText(label.text, 0, 0);
  }
  ctx.restore();
}

function shade(weight) {  // 0 = white, 1 = dark blue
  const t = Math.sqrt(Math.max(0, Math.min(1, weight)));
  const mix = (from, to) => Math.round(from + (to - from) * t);
  return `rgb(${mix(255, 20)}, ${mix(255, 60)}, ${mix(255, 140)})`;
}

// ------------------------------------------------------------------ the beam tree
const SVG = "http://www.w3.org/2000/svg";
const STEP_X = 96, ROW_Y = 30, BOX_W = 84, BOX_H = 24;

function svg(name, attributes, parent) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  parent.append(element);
  return element;
}

// Each node gets a row: leaves in depth-first order, a parent in the middle of its children.
function layoutTree(nodes) {
  const children = nodes.map(() => []);
  nodes.forEach((n) => { if (n.parent !== null) children[n.parent].push(n.id); });
  const row = new Array(nodes.length);
  let next = 0;
  const place = (id) => {
    if (!children[id].length) { row[id] = next++; return; }
    children[id].forEach(place);
    row[id] = (row[children[id][0]] + row[children[id].at(-1)]) / 2;
  };
  place(0);
  return { row, rows: next };
}

function bestPath(nodes, best) {
  const path = new Set();
  for (let id = best; id !== null && id !== undefined; id = nodes[id].parent) path.add(id);
  return path;
}

function drawBeam() {
  const { nodes, best } = state.result.beam;
  const tree = $("beam");
  tree.replaceChildren();
  const { row, rows } = layoutTree(nodes);
  const onBest = bestPath(nodes, best);
  const depth = Math.max(...nodes.map((n) => n.step));
  tree.setAttribute("width", (depth + 1) * STEP_X + 20);
  tree.setAttribute("height", rows * ROW_Y + 20);
  const x = (n) => 10 + n.step * STEP_X, y = (n) => 10 + row[n.id] * ROW_Y;
  const view = tree.parentElement;                      // a new tree opens at its root, not where the last was scrolled
  view.scrollLeft = 0;
  view.scrollTop = Math.max(0, y(nodes[0]) + BOX_H / 2 - view.clientHeight / 2);
  for (const n of nodes) {
    if (n.parent === null) continue;
    const p = nodes[n.parent];
    svg("path", { class: onBest.has(n.id) ? "edge best" : "edge",
                  d: `M${x(p) + BOX_W},${y(p) + BOX_H / 2} C${x(n) - 6},${y(p) + BOX_H / 2} ` +
                     `${x(p) + BOX_W + 6},${y(n) + BOX_H / 2} ${x(n)},${y(n) + BOX_H / 2}` }, tree);
  }
  for (const n of nodes) {
    const classes = [n.finished ? "finished" : "", n.greedy ? "greedy" : "", n.id === best ? "best" : ""]
      .join(" ").trim();
    const group = svg("g", { class: `node ${classes}`, "data-id": n.id }, tree);
    svg("rect", { x: x(n), y: y(n), width: BOX_W, height: BOX_H, rx: 4 }, group);
    svg("text", { x: x(n) + 5, y: y(n) + 11 }, group).textContent = n.text;
    const logp = n.logp === null ? "—" : n.logp.toFixed(2);
    svg("text", { x: x(n) + 5, y: y(n) + 21, class: "logp" }, group).textContent = logp;
    svg("title", {}, group).textContent =
      `step ${n.step}: ${n.text}, cumulative log-prob ${logp}${n.finished ? " (finished)" : ""}` +
      (n.greedy ? "; the greedy translation's path, which the beam had pruned" : "");
  }
}

// ------------------------------------------------------------------ wiring
$("form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.text = $("text").value;
  state.mask.clear();
  if (state.text.trim()) { translate(); return; }
  state.requests++;                                     // an answer still on its way is for other text
  $("status").textContent = "";
  clearResult("Nothing to translate: type some Chinese in the box, for example 我喜欢猫, then press Translate.");
  $("text").focus();
});
$("layer").addEventListener("change", () => {
  state.layer = Number($("layer").value);
  drawAttention();
});
drawKindTabs();
state.text = $("text").value;
translate();
