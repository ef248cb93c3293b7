// The live page: polls /events?since=N every second, folds the new events into `run`, and redraws
// what changed. Event types are described in transformer/events.py.
"use strict";

const POLL_MS = 1000;
const SMOOTH = 20;  // steps in the gradient norms' dark line (the page says so)
const run = { since: 0, updates: 0, events: 0, steps: [], evals: [], modules: [], probes: [],
              probeStep: null, alerts: [], status: "", ended: false, end: null, start: null, chosen: 0 };

const $ = id => document.getElementById(id);
const num = v => (typeof v === "number" ? v : /inf/i.test(v) ? (String(v)[0] === "-" ? -Infinity : Infinity) : NaN);

function apply(event) {
  switch (event.type) {
    case "start": run.start = event; run.modules = event.modules; describeTask(event); break;
    case "step": run.steps.push(event); break;
    case "eval": run.evals.push(event); break;
    case "probe": run.probes = event.probes.map(shown); run.probeStep = event.step; break;
    case "alert": run.alerts.push(event); break;
    case "status": run.status = event.text; break;
    case "end": run.ended = true; run.end = event; run.status = event.error ? "stopped on an error" : "done"; break;
  }
}

// A probe as the page shows it: the translator's (zh, en, cross) or a GPT's (input, output, attention).
const shown = p => ({ zh: p.input ?? p.zh, en: p.output ?? p.en, cross: p.attention ?? p.cross,
                      source: p.source, target: p.target });
const heldOut = e => e.dev_loss ?? e.val_loss;  // the translator's dev split, a GPT's val split

function drawCurves() {
  const steps = run.steps, evals = run.evals.filter(e => heldOut(e) !== undefined || e.train_loss != null);
  lineChart($("loss-chart"), [
    { name: "train", color: PALETTE[0], points: steps.map(s => [s.step, num(s.loss)]) },
    { name: run.start?.task === "language model" ? "val" : "dev", color: PALETTE[3], dots: true,
      points: evals.map(e => [e.step, num(heldOut(e))]) }]);
  lineChart($("bleu-chart"), [{ name: "BLEU", color: PALETTE[1], dots: true,
                                points: evals.map(e => [e.step, num(e.dev_bleu)]) }]);
  lineChart($("lr-chart"), [{ name: "lr", color: PALETTE[2], points: steps.map(s => [s.step, num(s.lr)]) }]);
  drawNorms();
}

// One small chart a module (the total first), all on the same log scale: every step light, its
// trailing geometric mean dark, the spikes as red lines.
function drawNorms() {
  const names = ["total", ...run.modules];
  const norm = (s, name) => num(name === "total" ? s.grad_norm : s.norms[name]);
  const series = names.map(name => run.steps.map(s => [s.step, norm(s, name)]).filter(([, y]) => y > 0 && y < Infinity));
  const all = series.flat().map(p => p[1]);
  const yRange = all.length ? extent(all) : undefined;
  const spikes = run.alerts.filter(a => a.kind === "spike").map(a => a.step);
  const box = $("norms");
  if (box.dataset.modules !== names.join(" ")) {
    box.replaceChildren(...names.map(name => {
      const figure = document.createElement("figure");
      figure.dataset.module = name;
      const caption = document.createElement("figcaption");
      caption.textContent = name;
      figure.append(caption, document.createElement("canvas"));
      return figure;
    }));
    box.dataset.modules = names.join(" ");
  }
  names.forEach((name, i) => lineChart(box.children[i].querySelector("canvas"), [
    { name, color: i ? "#9bb8dd" : "#bbb", width: 1, points: series[i] },
    { name: `${name}, smoothed`, color: i ? PALETTE[0] : "#222", points: smooth(series[i], SMOOTH) }],
  { logY: true, marks: spikes, yRange, compact: true }));
}

function drawAlerts() {
  $("alerts").replaceChildren(...run.alerts.map(a => {
    const div = document.createElement("div");
    div.className = `alert ${a.kind}`;
    const kind = document.createElement("b");
    kind.textContent = { spike: "gradient spike", nonfinite: "NaN / Inf", diverged: "diverged" }[a.kind] || a.kind;
    div.append(kind, a.message);
    return div;
  }));
}

function drawProbes() {
  $("probe-step").textContent = run.probeStep === null ? "none yet" : `step ${run.probeStep}`;
  $("probes").replaceChildren(...run.probes.map((p, i) => {
    const div = document.createElement("div");
    div.className = "probe" + (i === run.chosen ? " chosen" : "");
    div.innerHTML = "<span class=zh></span> → <span class=en></span>";
    div.querySelector(".zh").textContent = p.zh;
    div.querySelector(".en").textContent = p.en || "(empty)";
    div.onclick = () => { run.chosen = i; drawProbes(); };
    return div;
  }));
  drawAttention();
}

function fillSelect(select, count, first) {
  const options = [...(first ? [first] : []), ...Array.from({ length: count }, (_, i) => String(i))];
  if (select.options.length === options.length) return;
  const keep = select.value;
  select.replaceChildren(...options.map(text => new Option(text, text)));
  if (options.includes(keep)) select.value = keep;
}

// The chosen probe's cross-attention: one head of one layer, or the mean of the layer's heads.
function drawAttention() {
  const p = run.probes[run.chosen];
  if (!p) return;
  fillSelect($("layer"), p.cross.length, null);
  fillSelect($("head"), p.cross[0].length, "mean");
  const heads = p.cross[Number($("layer").value) || 0];
  const head = $("head").value;
  const matrix = head === "mean" || head === ""
    ? heads[0].map((row, i) => row.map((_, j) => heads.reduce((sum, h) => sum + h[i][j], 0) / heads.length))
    : heads[Number(head)];
  heatmap($("attention"), matrix, p.target, p.source);
}

function drawSummary() {
  const last = run.steps[run.steps.length - 1], start = run.start;
  const size = start ? `d_model ${start.config.d_model}, ${start.config.layers} layer(s), ` +
    `${start.config.heads} heads, ${start.parameters.toLocaleString()} parameters` : "";
  const now = last ? `step ${last.step}: loss ${num(last.loss).toFixed(3)}, lr ${num(last.lr).toExponential(2)}, ` +
    `${Math.round(last.tokens_per_s)} tok/s` : "no step yet";
  $("summary").textContent = [size, now].filter(Boolean).join(" · ");
  $("state").textContent = run.ended ? run.status : run.status ? `training (${run.status})` : "training";
  if (run.ended) finished(run.end.error
    ? `Training stopped on an error at step ${run.end.step}: ${run.end.error}`
    : `Training is done: it ended at step ${run.end.step} after ${duration(run.end.t)}.`, run.end.error ? "error" : "done");
}

// The run is over, or the page can no longer follow it: say so in the title, the heading and a line.
function finished(text, kind) {
  const title = { done: "Training, done", error: "Training, stopped", lost: "Training, not followed" }[kind];
  document.title = $("heading").textContent = title;
  $("finished").textContent = `${/[.!?]$/.test(text) ? text : `${text}.`} The page has stopped updating` +
    (kind === "lost" ? ": reload it to try again." : "; it shows the whole run.");
  $("finished").className = kind;
  $("finished").hidden = false;
}

function duration(seconds) {
  const s = Math.round(num(seconds)), m = Math.floor(s / 60);
  return m ? `${m} min ${s % 60} s` : `${s} s`;
}

// What the run is: a translator (the page's own words) or a GPT, whose held-out split is "val",
// which has no BLEU, whose schedule is warm-up then cosine, and whose probes are continued prompts.
function describeTask(start) {
  explainLoss(start.config || {});
  if (start.task !== "language model") return;
  $("bleu").hidden = true;
  $("loss-caption").textContent = "train (blue, every step) and val (orange, at each evaluation)";
  $("loss-explain").textContent = $("loss-explain").textContent.replace("Dev: the whole dev split",
    "Val: the same random batches of the val split").replaceAll("dev", "val");
  $("lr-caption").textContent = "linear warm-up, then cosine decay";
  $("lr-explain").textContent = "The step size the optimizer takes: it rises linearly over the warm-up " +
    "iterations, then falls along a cosine to its minimum at the run's end.";
  $("probe-title").textContent = "Probe prompts";
  $("probe-caption").textContent = "greedy continuation (after →) and self-attention over prompt and continuation";
}

// The loss chart's line: why dev can sit below train, from this run's own settings.
function explainLoss(config) {
  const on = [config.dropout > 0 && `dropout (p = ${config.dropout})`,
    config.label_smoothing === undefined ? "label smoothing (if set)"
      : config.label_smoothing > 0 && `label smoothing (ε = ${config.label_smoothing})`].filter(Boolean);
  $("loss-explain").textContent = on.length
    ? `Train: each step's batch, with ${on.join(" and ")} on, which raise it. ` +
      `Dev: the whole dev split at each evaluation, with ${on.length > 1 ? "both" : "it"} off: so dev can sit below train.`
    : "Train: each step's batch (noisy: every batch differs). Dev: the whole dev split at each evaluation.";
}

function redraw(kinds) {
  if (kinds.has("step") || kinds.has("eval") || kinds.has("alert") || kinds.has("start")) drawCurves();
  if (kinds.has("alert")) drawAlerts();
  if (kinds.has("probe")) drawProbes();
  drawSummary();
}

function count(id, value, unit) {
  $(id).dataset.count = value;
  $(id).textContent = `${value} ${unit}`;
}

async function poll() {
  let data;
  try {
    const response = await fetch(`/events?since=${run.since}`, { cache: "no-store" });
    data = await response.json();
  } catch (error) {
    $("state").textContent = "the server has stopped (reload to try again)";
    finished(`The page lost its server after ${run.events} events: the run (or viz watch) has stopped ` +
             "without saying it ended.", "lost");
    return;
  }
  if (data.total < run.since) { location.reload(); return; }  // a new run in the same directory
  if (data.lines.length) {
    data.lines.forEach(apply);
    run.since = data.next;
    count("updates", ++run.updates, "updates");
    count("events", run.events += data.lines.length, "events");
    redraw(new Set(data.lines.map(e => e.type)));
  }
  if (run.since < data.total) poll();
  else if (!run.ended) setTimeout(poll, POLL_MS);
}

$("layer").onchange = $("head").onchange = drawAttention;
window.onresize = () => redraw(new Set(["step", "probe"]));
document.fonts.load('13px "TinygradLite CJK"', "中").then(drawAttention);  // the heatmap's labels, once the font is here
poll();
