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
  #preview { width: 100%; background: #000; display: block; min-height: 180px; }
  .meter { display: grid; grid-template-columns: 6em 1fr 5em; align-items: center; gap: .5em; margin: .3em 0; }
  .bar { height: .9em; background: #30343a; border-radius: .2em; overflow: hidden; }
  .fill { height: 100%; width: 0; background: linear-gradient(90deg, #3c9 0%, #3c9 70%, #ec3 85%, #e44 100%); }
  button { font: inherit; padding: .35em .8em; margin: .2em; border: 0; border-radius: .3em; color: #fff; background: #3b4452; cursor: pointer; }
  button.on { background: #b33; }
  .option { display: grid; grid-template-columns: 10em 1fr auto; align-items: center; gap: .5em; }
  .option input { font: inherit; background: #15171a; color: #e8e8e8; border: 1px solid #3b4452; border-radius: .3em; padding: .25em .4em; }
  #warnings { margin: 0; padding-left: 1.2em; max-height: 12em; overflow: auto; color: #f0b060; }
  #graph text { fill: #e8e8e8; font-size: 12px; } #graph rect { fill: #2c3139; stroke: #6a7585; rx: 4; }
  #graph line { stroke: #6a7585; stroke-width: 1.5; } #graph .edge-label { fill: #9ab; font-size: 10px; }
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

function drawGraph(g) {
  const depth = {};
  const inputs = (name) => g.edges.filter((e) => e.to === name).map((e) => e.from);
  const d = (name, seen = 0) => depth[name] ?? (depth[name] = seen > 64 ? 0 : Math.max(-1, ...inputs(name).map((i) => d(i, seen + 1))) + 1);
  g.nodes.forEach((n) => d(n.name));
  const columns = {};
  g.nodes.forEach((n) => (columns[depth[n.name]] ??= []).push(n.name));
  // Top to bottom, a row per depth: a phone pipeline is deep and narrow.
  const pos = {}, w = 150, h = 26, dx = 175, dy = 52;
  Object.entries(columns).forEach(([r, names]) => names.forEach((name, i) => (pos[name] = { x: 10 + i * dx, y: 10 + r * dy })));
  const across = Math.max(...Object.values(columns).map((c) => c.length));
  const svg = $("graph");
  svg.setAttribute("height", 20 + Object.keys(columns).length * dy);
  svg.setAttribute("viewBox", `0 0 ${20 + across * dx} ${20 + Object.keys(columns).length * dy}`);
  let out = "";
  for (const e of g.edges) {
    const a = pos[e.from], b = pos[e.to];
    if (!a || !b) continue;
    out += `<line x1="${a.x + w / 2}" y1="${a.y + h}" x2="${b.x + w / 2}" y2="${b.y}"/>`;
    const label = (e.rate !== undefined ? e.rate + "/s" : "") + (e.dropped ? " drop " + e.dropped : "");
    out += `<text class="edge-label${e.dropped ? " dropping" : ""}" x="${(a.x + b.x + w) / 2 + 4}" y="${(a.y + h + b.y) / 2 + 4}">${label}</text>`;
  }
  for (const n of g.nodes) {
    const p = pos[n.name];
    out += `<g class="node" data-node="${n.name}"><rect x="${p.x}" y="${p.y}" width="${w}" height="${h}"/>` +
           `<text x="${p.x + 8}" y="${p.y + 17}">${n.name} · ${n.type}</text></g>`;
  }
  svg.innerHTML = out;
}

async function loadGraph(first) {
  const r = await fetch("/api/graph" + query);
  if (!r.ok) return;
  graph = await r.json();
  $("pipeline").textContent = graph.pipeline;
  document.title = "avgraph: " + graph.pipeline;
  if (first) controls(graph);
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
