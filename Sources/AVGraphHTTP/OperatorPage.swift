/// The operator's page `run --http` serves: one static HTML file with its CSS and script inline
/// (no build step, no CDN, nothing fetched but the run's own API). The token is written into it
/// for the commands it sends; the page is served only to whoever may already read it.
public enum OperatorPage {
    static func html(token: String) -> String {
        template.replacingOccurrences(of: "__TOKEN__", with: token).replacingOccurrences(of: "__FAVICON__", with: Favicon.link)
    }

    private static let template = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>avgraph</title>
__FAVICON__
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #15171a; color: #e8e8e8; }
  header { display: flex; gap: 1.5em; align-items: baseline; padding: .6em 1em; background: #202328; }
  header h1 { font-size: 1.1em; margin: 0; }
  .state { padding: .1em .5em; border-radius: .3em; background: #2d6a3e; }
  .state.paused { background: #8a6d1a; } .state.ended { background: #6a2d2d; }
  main { display: grid; grid-template-columns: minmax(320px, 640px) 1fr; gap: 1em; padding: 1em; }
  section { background: #202328; border-radius: .4em; padding: .8em; }
  h2 { font-size: .95em; margin: 0 0 .5em; color: #aab; text-transform: uppercase; letter-spacing: .05em; }
  #preview, #live { width: 100%; background: #000; display: block; min-height: 180px; }
  #live-info { margin: .4em 0 0; }
  [hidden] { display: none !important; }
  .meter { display: grid; grid-template-columns: 6em 1fr 5em; align-items: center; gap: .5em; margin: .3em 0; }
  .bar { height: .9em; background: #30343a; border-radius: .2em; overflow: hidden; }
  .fill { height: 100%; width: 0; background: linear-gradient(90deg, #3c9 0%, #3c9 70%, #ec3 85%, #e44 100%); }
  button { font: inherit; padding: .35em .8em; margin: .2em; border: 0; border-radius: .3em; color: #fff; background: #3b4452; cursor: pointer; }
  button.on { background: #b33; }
  .option { display: grid; grid-template-columns: 10em 1fr auto; align-items: center; gap: .5em; }
  .option input { font: inherit; background: #15171a; color: #e8e8e8; border: 1px solid #3b4452; border-radius: .3em; padding: .25em .4em; }
  #warnings { margin: 0; padding-left: 1.2em; max-height: 12em; overflow: auto; color: #f0b060; }
  #graph text { fill: #e8e8e8; font-size: 12px; } #graph rect { fill: #2c3139; stroke: #6a7585; rx: 4; }
  #graph polyline.edge { fill: none; stroke: #6a7585; stroke-width: 1.5; } #graph polyline.edge.dropping { stroke: #b55; }
  #graph .arrow { fill: #6a7585; } #graph .edge-label { fill: #9ab; font-size: 10px; }
  #graph .dropping { fill: #f66; }
  #links { border-collapse: collapse; } #links th, #links td { padding: .15em .6em; text-align: right; } #links th:first-child, #links td:first-child { text-align: left; }
  #links tr.silent td { color: #f0b060; }
</style>
</head>
<body>
<header>
  <h1 id="pipeline">avgraph</h1>
  <span id="state" class="state">connecting</span>
  <span>media <b id="media-time">0.0</b> s</span>
  <span>dropped <b id="dropped">0</b></span>
  <span>memory <b id="rss">-</b></span>
</header>
<main>
  <div>
    <section>
      <h2>Picture</h2>
      <img id="preview" alt="the picture after privacy">
      <video id="live" hidden autoplay playsinline muted></video>
      <p id="live-info" hidden>live over WebRTC · <b id="latency">-</b> behind · <b id="viewers">-</b> watching
        <button id="sound">Sound on</button></p>
    </section>
    <section>
      <h2>Sound</h2>
      <div id="meters"><p id="no-meters">no meter nodes in this pipeline</p></div>
    </section>
    <section>
      <h2>Controls</h2>
      <div id="controls">
        <button id="pause">Pause</button>
      </div>
      <p id="reply"></p>
      <details id="more" hidden><summary>Live options</summary><div id="options"></div></details>
    </section>
  </div>
  <div>
    <section>
      <h2>Graph</h2>
      <svg id="graph" width="100%" height="300"></svg>
    </section>
    <section id="links-section" hidden>
      <h2>Bonded links</h2>
      <table id="links"><thead><tr><th>link</th><th>packets</th><th>share</th><th>last heard</th></tr></thead><tbody></tbody></table>
    </section>
    <section>
      <h2>Warnings</h2>
      <ol id="warnings"></ol>
    </section>
  </div>
</main>
<script>
"use strict";
const token = "__TOKEN__";
const query = location.search.includes("token=") ? "?token=" + encodeURIComponent(token) : "";
const $ = (id) => document.getElementById(id);
let paused = false, graph = null;

async function ctl(request) {
  const r = await fetch("/api/ctl", { method: "POST", headers: { "Content-Type": "application/json", "X-Avgraph-Token": token },
                                       body: JSON.stringify(request) });
  const answer = await r.json();
  $("reply").textContent = answer.ok ? "" : "refused: " + answer.error;
  // What a command changes shows in the next picture the run keeps (every 0.25 s).
  if (answer.ok) setTimeout(refreshPreview, 300);
  return answer;
}

function refreshPreview() {
  const img = new Image();
  img.onload = () => { $("preview").src = img.src; };
  img.src = "/api/preview.jpg" + (query ? query + "&" : "?") + "n=" + Date.now();
}

function meter(node) {
  let m = $("meter-" + node);
  if (m) return m;
  $("no-meters").hidden = true;
  m = document.createElement("div");
  m.className = "meter"; m.id = "meter-" + node;
  m.innerHTML = `<span class="name"></span><div class="bar"><div class="fill"></div></div><span class="db">-inf dB</span>`;
  m.querySelector(".name").textContent = node;
  $("meters").appendChild(m);
  return m;
}

function showLevel(e) {
  const peak = Math.max(...e.peak);
  const m = meter(e.node);
  m.dataset.db = peak.toFixed(1);
  m.querySelector(".db").textContent = (peak <= -120 ? "-inf" : peak.toFixed(1)) + " dB";
  m.querySelector(".fill").style.width = Math.max(0, Math.min(100, (peak + 60) / 60 * 100)) + "%";
}

function showStats(s) {
  $("media-time").textContent = (s.media_time || 0).toFixed(1);
  $("dropped").textContent = s.dropped || 0;
  if (s.rss) $("rss").textContent = (s.rss / 1e6).toFixed(0) + " MB";
}

// A bonding sender's links (an srt source's srtla event): the latest figures replace the table.
function showLinks(e) {
  $("links-section").hidden = false;
  const body = $("links").tBodies[0];
  body.replaceChildren(...e.links.map((l) => {
    const tr = document.createElement("tr");
    tr.className = l.last_heard > 2 ? "silent" : "";
    for (const text of [l.address, String(l.packets), Math.round(l.share * 100) + " %", l.last_heard.toFixed(1) + " s ago"]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.appendChild(td);
    }
    return tr;
  }));
}

function setState(text) {
  $("state").textContent = text;
  $("state").className = "state " + text;
}

function warn(e) {
  const li = document.createElement("li");
  li.textContent = (e.node ? e.node + ": " : "") + (e.message || e.event);
  $("warnings").prepend(li);
  while ($("warnings").children.length > 10) $("warnings").lastChild.remove();
}

// The controls come from the graph: each live option its node's type declares (a switch, a switch
// per input, or a value to type) and each command a node answers that needs nothing more from the
// page; no node type, node name or option name is written here.
function button(id, label, title, onclick) {
  const b = document.createElement("button");
  b.id = id; b.textContent = label; b.title = title || ""; b.onclick = onclick;
  $("controls").appendChild(b);
  return b;
}

function toggle(id, label, title, on, request) {
  const b = button(id, label, title, async () => {
    const next = !b.classList.contains("on");
    if ((await ctl(request(next))).ok) b.classList.toggle("on", next);
  });
  b.classList.toggle("on", on);
}

function valueControl(n, o) {
  const row = document.createElement("div");
  row.className = "option";
  row.innerHTML = `<label></label><input><button>Set</button>`;
  const [label, input, set] = row.children;
  label.textContent = n.name + "." + o.name; label.title = o.doc; label.htmlFor = input.id = "value-" + n.name + "-" + o.name;
  input.value = o.value || ""; input.placeholder = o.range || o.type;
  set.id = "set-" + n.name + "-" + o.name;
  set.onclick = () => ctl({ cmd: "set", node: n.name, option: o.name, value: input.value });
  $("options").appendChild(row);
  $("more").hidden = false;
}

function controls(g) {
  for (const n of g.nodes) {
    for (const o of n.live || []) {
      const set = (value) => ({ cmd: "set", node: n.name, option: o.name, value });
      const id = "set-" + n.name + "-" + o.name;
      if (o.control === "switch") toggle(id, n.name + ": " + o.name, o.doc, o.value === "true", set);
      else if (o.control === "switches") for (const k of o.keys || []) toggle(id + "-" + k, n.name + ": " + o.name + " " + k, o.doc, false, (on) => set({ [k]: on }));
      else valueControl(n, o);
    }
    for (const c of (n.commands || []).filter((c) => c.needs.length === 0)) {
      button("cmd-" + n.name + "-" + c.name, [c.name, ...Object.values(c.fixed)].join(" ") + " (" + n.name + ")", c.doc, async () => {
        const a = await ctl({ cmd: c.name, ...c.fixed });
        if (a.ok) $("reply").textContent = c.name + ": " + Object.entries(a).filter(([k]) => k !== "ok" && k !== "id").map(([k, v]) => k + " " + v).join(", ");
      });
    }
  }
}

// The graph's drawing, layered (Sugiyama): a layer per longest path from the sources (sources on
// top), a dummy point per layer a long edge passes so it bends between nodes, never through one;
// each layer's order from barycenter sweeps down and up with adjacent swaps, keeping the order
// that crosses fewest edges; boxes sized to their text; each rate label beside its own edge where
// it covers no other label and no box. Only these functions and the svg#graph are the drawing's.
const graphStyle = { h: 26, gap: 28, band: 44, margin: 10, pad: 8 };

function graphLayers(g) {
  const layer = {}, inputs = {};
  g.nodes.forEach((n) => (inputs[n.name] = []));
  g.edges.forEach((e) => inputs[e.to] && inputs[e.from] && inputs[e.to].push(e.from));
  const visit = (name, seen) => layer[name] ?? (layer[name] = seen > 64 ? 0 : Math.max(-1, ...inputs[name].map((i) => visit(i, seen + 1))) + 1);
  g.nodes.forEach((n) => visit(n.name, 0));
  return layer;
}

// Crossings between two adjacent layers' edges ([upper index, lower index] pairs).
function graphCrossings(pairs) {
  let n = 0;
  for (let i = 0; i < pairs.length; i++)
    for (let j = i + 1; j < pairs.length; j++)
      if ((pairs[i][0] - pairs[j][0]) * (pairs[i][1] - pairs[j][1]) < 0) n++;
  return n;
}

// The order of every layer's nodes (real and dummy) with the fewest crossings the sweeps find.
function graphOrder(rows, up, down) {
  const index = () => { const at = {}; rows.forEach((r) => r.forEach((v, i) => (at[v] = i))); return at; };
  const between = (k, at) => graphCrossings(rows[k].flatMap((v) => down[v].map((w) => [at[v], at[w]])));
  const total = () => { const at = index(); let n = 0; for (let k = 0; k + 1 < rows.length; k++) n += between(k, at); return n; };
  const sortBy = (k, near) => {
    const at = index();
    const key = new Map(rows[k].map((v, i) => [v, near[v].length ? near[v].reduce((s, w) => s + at[w], 0) / near[v].length : i]));
    rows[k] = rows[k].map((v, i) => [v, i]).sort((a, b) => key.get(a[0]) - key.get(b[0]) || a[1] - b[1]).map((p) => p[0]);
  };
  // Swaps two neighbours where that crosses fewer edges (only the layers above and below count).
  const near = (k) => { const at = index(); return (k > 0 ? between(k - 1, at) : 0) + (k + 1 < rows.length ? between(k, at) : 0); };
  const transpose = () => {
    for (let better = true, rounds = 0; better && rounds < 6; rounds++) {
      better = false;
      for (let k = 0; k < rows.length; k++)
        for (let i = 0; i + 1 < rows[k].length; i++) {
          const before = near(k);
          [rows[k][i], rows[k][i + 1]] = [rows[k][i + 1], rows[k][i]];
          if (near(k) < before) better = true; else [rows[k][i], rows[k][i + 1]] = [rows[k][i + 1], rows[k][i]];
        }
    }
  };
  let best = rows.map((r) => r.slice()), fewest = total();
  const keep = () => { const n = total(); if (n < fewest) { fewest = n; best = rows.map((r) => r.slice()); } };
  for (let sweep = 0; sweep < 8 && fewest > 0; sweep++) {
    for (let k = 1; k < rows.length; k++) sortBy(k, up);
    transpose(); keep();
    for (let k = rows.length - 2; k >= 0; k--) sortBy(k, down);
    transpose(); keep();
  }
  return { rows: best, crossings: fewest };
}

// x of every node's left side: each layer pulled toward its neighbours' centres, in order, apart.
function graphColumns(rows, up, down, width) {
  const gap = graphStyle.gap, x = {};
  rows.forEach((r) => { let at = 0; for (const v of r) { x[v] = at; at += width[v] + gap; } });
  const centre = (v) => x[v] + width[v] / 2;
  const place = (r, near) => {
    const want = r.map((v) => near[v].length ? near[v].reduce((s, w) => s + centre(w), 0) / near[v].length - width[v] / 2 : x[v]);
    const left = [], right = [];
    r.forEach((v, i) => (left[i] = i ? Math.max(want[i], left[i - 1] + width[r[i - 1]] + gap) : want[i]));
    for (let i = r.length - 1; i >= 0; i--) right[i] = i < r.length - 1 ? Math.min(want[i], right[i + 1] - width[r[i]] - gap) : want[i];
    r.forEach((v, i) => (x[v] = (left[i] + right[i]) / 2));
  };
  for (let pass = 0; pass < 6; pass++) {
    for (let k = 1; k < rows.length; k++) place(rows[k], up);
    for (let k = rows.length - 2; k >= 0; k--) place(rows[k], down);
  }
  const least = Math.min(...Object.values(x));
  for (const k in x) x[k] -= least;
  return x;
}

// Text sizes by class and text: a redraw every 3 s measures only labels it has not seen.
const graphTextSizes = new Map();
function graphMeasure(svg, text, cls) {
  const key = (cls || "") + "\n" + text;
  if (graphTextSizes.has(key)) return graphTextSizes.get(key);
  const t = document.createElementNS("http://www.w3.org/2000/svg", "text");
  if (cls) t.setAttribute("class", cls);
  t.textContent = text;
  svg.appendChild(t);
  const b = t.getBBox();
  t.remove();
  if (!b.width) return { dx: 0, dy: 10, w: text.length * 7, h: 14 };
  if (graphTextSizes.size > 2000) graphTextSizes.clear();
  graphTextSizes.set(key, { dx: -b.x, dy: -b.y, w: b.width, h: b.height });
  return graphTextSizes.get(key);
}

function graphEdgeLabel(e) {
  return (e.rate !== undefined ? e.rate + "/s" : "") + (e.dropped ? " drop " + e.dropped : "");
}

const graphOverlap = (a, b, room) => a.x < b.x + b.w + room && b.x < a.x + a.w + room && a.y < b.y + b.h + room && b.y < a.y + a.h + room;

function graphSegmentMeetsBox(p, q, b) {
  const inside = (s) => s.x >= b.x && s.x <= b.x + b.w && s.y >= b.y && s.y <= b.y + b.h;
  if (inside(p) || inside(q)) return true;
  const side = (a, c, d) => Math.sign((c.x - a.x) * (d.y - a.y) - (c.y - a.y) * (d.x - a.x));
  const cross = (a, c, d, f) => side(a, c, d) * side(a, c, f) < 0 && side(d, f, a) * side(d, f, c) < 0;
  const k = [{ x: b.x, y: b.y }, { x: b.x + b.w, y: b.y }, { x: b.x + b.w, y: b.y + b.h }, { x: b.x, y: b.y + b.h }];
  return k.some((c, i) => cross(p, q, c, k[(i + 1) % 4]));
}

// Where everything goes, with `band` the height between two layers.
function graphLayout(g, svg, band) {
  const s = graphStyle, layer = graphLayers(g);
  const rows = [], up = {}, down = {}, width = {}, text = {};
  const add = (v, k, w) => { (rows[k] ??= []).push(v); up[v] = []; down[v] = []; width[v] = w; };
  for (const n of g.nodes) {
    text[n.name] = graphMeasure(svg, n.name + " · " + n.type);
    add(n.name, layer[n.name], Math.ceil(text[n.name].w) + 2 * s.pad);
  }
  for (let k = 0; k < rows.length; k++) rows[k] ??= [];
  // An edge as the chain of points it passes: its source, a dummy per layer between, its target
  // (a pipeline has no cycle: an edge that would go up has no chain and is not drawn).
  const chains = g.edges.map((e, i) => {
    if (!(e.from in layer) || !(e.to in layer) || layer[e.to] <= layer[e.from]) return null;
    const chain = [e.from];
    for (let k = layer[e.from] + 1; k < layer[e.to]; k++) { const v = "\u0000" + i + "@" + k; add(v, k, 0); chain.push(v); }
    chain.push(e.to);
    chain.slice(1).forEach((v, j) => { down[chain[j]].push(v); up[v].push(chain[j]); });
    return chain;
  });
  // The order and the columns depend on the nodes, the edges and the names' widths only: a redraw
  // with new rates reuses them.
  const shape = JSON.stringify([rows, g.edges.map((e) => [e.from, e.to]), width]);
  if (graphLayout.last?.shape !== shape) {
    const order = graphOrder(rows, up, down);
    graphLayout.last = { shape, order, x: graphColumns(order.rows, up, down, width) };
  }
  const { order, x } = graphLayout.last;
  const top = (k) => s.margin + k * (s.h + band);
  // Ports: a node's edges leave its bottom and enter its top spread out, in the order of their other ends.
  const port = {};
  const spread = (v, ends, key) => {
    const sorted = ends.map((c, i) => [c, i]).sort((a, b) => a[0].at - b[0].at || a[1] - b[1]);
    sorted.forEach(([c], i) => (port[key(c)] = x[v] + (width[v] ? width[v] * (i + 1) / (sorted.length + 1) : 0)));
  };
  const centre = (v) => x[v] + width[v] / 2;
  const outs = {}, ins = {};
  chains.forEach((c, i) => { if (!c) return;
    (outs[c[0]] ??= []).push({ edge: i, at: centre(c[1]) });
    (ins[c[c.length - 1]] ??= []).push({ edge: i, at: centre(c[c.length - 2]) }); });
  for (const v in outs) spread(v, outs[v], (c) => "out" + c.edge);
  for (const v in ins) spread(v, ins[v], (c) => "in" + c.edge);
  const edges = chains.map((c, i) => {
    if (!c) return null;
    const points = [{ x: port["out" + i], y: top(layer[c[0]]) + s.h }];
    c.slice(1, -1).forEach((v, j) => { const k = layer[c[0]] + 1 + j; points.push({ x: x[v], y: top(k) }, { x: x[v], y: top(k) + s.h }); });
    points.push({ x: port["in" + i], y: top(layer[c[c.length - 1]]) });
    return { edge: g.edges[i], index: i, points };
  });
  const boxes = g.nodes.map((n) => ({ node: n, x: s.margin + x[n.name], y: top(layer[n.name]), w: width[n.name], h: s.h, text: text[n.name] }));
  for (const e of edges) if (e) for (const p of e.points) p.x += s.margin;
  // Labels: the first place along the edge (middles first, right side first) that covers no box
  // and no label placed before; among those, the one fewest edges run through.
  const labels = [], segments = edges.filter(Boolean).flatMap((e) => e.points.slice(1).map((q, j) => [e.points[j], q]));
  let unplaced = 0;
  for (const e of edges) {
    const words = e && graphEdgeLabel(e.edge);
    if (!words) continue;
    const m = graphMeasure(svg, words, "edge-label");
    let best = null;
    for (let j = 0; j + 1 < e.points.length; j++)
      for (const t of [0.5, 0.35, 0.65, 0.2, 0.8])
        for (const side of [1, -1]) {
          const p = e.points[j], q = e.points[j + 1], at = { x: p.x + (q.x - p.x) * t, y: p.y + (q.y - p.y) * t };
          // Far enough aside that a slanted line passes the label's corners too.
          const off = 4 + Math.abs((q.x - p.x) / (q.y - p.y || 1)) * m.h / 2;
          const b = { x: side > 0 ? at.x + off : at.x - off - m.w, y: at.y - m.h / 2, w: m.w, h: m.h };
          const hard = boxes.filter((o) => graphOverlap(b, o, 2)).length + labels.filter((o) => graphOverlap(b, o, 2)).length;
          if (hard && best && best.score < 1000) continue;
          const score = hard * 1000 + segments.filter(([u, w]) => graphSegmentMeetsBox(u, w, b)).length * 10 + (j ? 1 : 0);
          if (!best || score < best.score) best = { ...b, score, words, m, edge: e };
        }
    if (best.score >= 1000) unplaced++;
    labels.push(best);
  }
  return { boxes, edges, labels, unplaced, crossings: order.crossings };
}

function drawGraph(g) {
  const svg = $("graph"), s = graphStyle;
  svg.replaceChildren();
  if (!g.nodes.length) return;
  // A label with no room makes the bands between layers taller, up to a point.
  let L;
  for (let band = s.band; ; band += 14) { L = graphLayout(g, svg, band); if (!L.unplaced || band > s.band + 14 * 6) break; }
  const all = [...L.boxes, ...L.labels];
  const wide = Math.max(...all.map((b) => b.x + b.w)) + s.margin, high = Math.max(...all.map((b) => b.y + b.h)) + s.margin;
  const shift = Math.min(0, ...L.labels.map((b) => b.x - s.margin));
  svg.setAttribute("height", high);
  svg.setAttribute("viewBox", `${shift} 0 ${wide - shift} ${high}`);
  svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
  const make = (tag, attributes, text) => {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attributes)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    return el;
  };
  const defs = make("defs", {}), arrow = make("marker", { id: "graph-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" });
  arrow.appendChild(make("path", { d: "M0,0 L8,4 L0,8 z", class: "arrow" }));
  defs.appendChild(arrow);
  svg.appendChild(defs);
  for (const e of L.edges) if (e)
    svg.appendChild(make("polyline", { class: "edge" + (e.edge.dropped ? " dropping" : ""), "data-from": e.edge.from, "data-to": e.edge.to, "data-edge": e.index,
                                       points: e.points.map((p) => p.x.toFixed(1) + "," + p.y.toFixed(1)).join(" "), "marker-end": "url(#graph-arrow)" }));
  for (const n of L.boxes) {
    const box = make("g", { class: "node", "data-node": n.node.name });
    box.appendChild(make("rect", { x: n.x, y: n.y, width: n.w, height: n.h }));
    box.appendChild(make("text", { x: n.x + s.pad + n.text.dx, y: n.y + (n.h - n.text.h) / 2 + n.text.dy }, n.node.name + " · " + n.node.type));
    svg.appendChild(box);
  }
  for (const b of L.labels)
    svg.appendChild(make("text", { class: "edge-label" + (b.edge.edge.dropped ? " dropping" : ""), "data-edge": b.edge.index, x: b.x + b.m.dx, y: b.y + b.m.dy }, b.words));
  svg.dataset.crossings = L.crossings;
}

// The broadcast live, with its sound, over WebRTC (WHEP) when the pipeline has a whep sink: the
// page's own few lines of WHEP client (POST the offer with the page's token as its bearer, play
// the answer). Latency: what the browser plays now against when the run's clock was there, from
// the sender reports (estimatedPlayoutTimestamp is in the sender's NTP time). The JPEG preview
// stays until the first picture plays, and comes back if the connection ends.
let live = null;
async function watchLive(g) {
  const sink = g.nodes.find((n) => n.type === "whep");
  if (!sink || live) return;
  const pc = new RTCPeerConnection();
  live = pc;
  pc.addTransceiver("video", { direction: "recvonly" });
  pc.addTransceiver("audio", { direction: "recvonly" });
  const stream = new MediaStream();
  const video = $("live");
  // Shown as its media arrive (a video never shown is never played); the preview goes once it plays.
  pc.ontrack = (e) => { stream.addTrack(e.track); video.srcObject = stream; video.hidden = false; };
  video.onplaying = () => { $("preview").hidden = true; $("live-info").hidden = false; };
  pc.onconnectionstatechange = () => {
    if (pc.connectionState === "failed" || pc.connectionState === "closed") {
      video.hidden = true; $("preview").hidden = false; $("live-info").hidden = true; live = null;
    }
  };
  await pc.setLocalDescription(await pc.createOffer());
  const r = await fetch("/whep/" + encodeURIComponent(sink.name), { method: "POST",
    headers: { "Content-Type": "application/sdp", "Authorization": "Bearer " + token }, body: pc.localDescription.sdp });
  if (r.status !== 201) { warn({ node: sink.name, message: "live view: " + r.status + " " + (await r.text()) }); pc.close(); live = null; return; }
  await pc.setRemoteDescription({ type: "answer", sdp: await r.text() });
  setInterval(async () => {
    if (pc.connectionState !== "connected") return;
    for (const s of (await pc.getStats()).values()) {
      if (s.type === "inbound-rtp" && s.kind === "video" && s.estimatedPlayoutTimestamp) {
        const behind = Date.now() + 2208988800000 - s.estimatedPlayoutTimestamp;
        $("latency").textContent = Math.max(0, Math.round(behind)) + " ms";
      }
    }
  }, 1000);
}
$("sound").onclick = () => { const v = $("live"); v.muted = !v.muted; $("sound").textContent = v.muted ? "Sound on" : "Sound off"; };

async function loadGraph(first) {
  const r = await fetch("/api/graph" + query);
  if (!r.ok) return;
  graph = await r.json();
  $("pipeline").textContent = graph.pipeline;
  document.title = "avgraph: " + graph.pipeline;
  if (first) { controls(graph); watchLive(graph); }
  drawGraph(graph);
}

function listen() {
  const events = new EventSource("/api/events" + query);
  events.onopen = () => { if (!paused) setState("running"); };
  events.onmessage = (m) => {
    const e = JSON.parse(m.data);
    switch (e.event) {
      case "level": showLevel(e); break;
      case "stats": showStats(e); break;
      case "srtla": showLinks(e); break;
      case "viewers": $("viewers").textContent = e.watching; break;
      case "paused": paused = true; setState("paused"); $("pause").textContent = "Resume"; break;
      case "resumed": paused = false; setState("running"); $("pause").textContent = "Pause"; break;
      case "warning": case "error": warn(e); break;
      case "away": warn({ node: e.node, message: e.state === "started" ? "publisher away: the card shows from " + e.from.toFixed(2) + " s"
                                                   : "publisher back: the card showed " + e.from.toFixed(2) + " s to " + e.to.toFixed(2) + " s" }); break;
      case "eos": setState("ended"); events.close(); break;
    }
  };
}

$("pause").onclick = () => ctl({ cmd: paused ? "resume" : "pause" });
fetch("/api/stats" + query).then((r) => r.json()).then((s) => {
  showStats(s);
  paused = !!s.paused;
  setState(paused ? "paused" : "running");
  $("pause").textContent = paused ? "Resume" : "Pause";
});
loadGraph(true);
listen();
refreshPreview();
setInterval(refreshPreview, 500);
setInterval(() => loadGraph(false), 3000);
</script>
</body>
</html>
"""#
}
