// fabroute's live fabric map: /layout.json once, then the controller's state from /events
// (server-sent events, every poll).  Plain JS + SVG, no build step.  Every element a test
// reads carries data attributes: data-switch / data-state / data-verified on switches,
// data-cable="a-b" / data-failed (data-failed-since) / data-load on cables, data-src / data-dst / data-share
// on UGAL-L shares, data-seq / data-rounds on the summary.
"use strict";
const NS = "http://www.w3.org/2000/svg";
const LOAD_STOPS = [[0, [154, 171, 184]], [0.25, [60, 160, 70]], [0.5, [230, 210, 40]],
                    [0.75, [245, 130, 20]], [1, [200, 0, 0]]];
const RATE_TICKS = [0.01, 0.1, 1, 10, 100, 1000];     // Mbit/s, log scale
const BAD = new Set(["failed", "differs", "refused"]);
const MAX_ROWS = 3000;
let cables = new Map();      // "a-b" (a < b) -> [line, ...] (parallel cables share a key)
let switches = [];           // id -> circle
let poll = 1.0, lastAt = null, lastState = null, prevPorts = new Map(), mode = null;

const $ = (id) => document.getElementById(id);
const key = (a, b) => (a < b ? `${a}-${b}` : `${b}-${a}`);
function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}
function colour(x) {       // x in [0, 1]: the load ramp
  x = Math.max(0, Math.min(1, x));
  for (let i = 1; i < LOAD_STOPS.length; i++) {
    const [x1, c1] = LOAD_STOPS[i], [x0, c0] = LOAD_STOPS[i - 1];
    if (x <= x1) {
      const t = (x - x0) / (x1 - x0);
      return `rgb(${c0.map((c, j) => Math.round(c + t * (c1[j] - c))).join(",")})`;
    }
  }
  return "rgb(200,0,0)";
}
const rampCss = () => `linear-gradient(to right, ${LOAD_STOPS.map(
  ([x]) => `${colour(x)} ${x * 100}%`).join(", ")})`;

function legend(kind) {
  if (kind === mode) return;
  mode = kind;
  const ticks = kind === "load" ? ["0", "0.25", "0.5", "0.75", "≥ 1"]
                                : RATE_TICKS.map((t) => (t < 1 ? t : t.toFixed(0)));
  const what = kind === "load" ? "UGAL-L's estimated load (offered / capacity), the busier direction"
                               : "transmitted Mbit/s (log scale), the busier direction";
  $("load-legend").innerHTML = `<div>${what}</div><div class="ramp" style="background:${
    rampCss()}"></div><div class="ticks">${ticks.map((t) => `<span>${t}</span>`).join("")}</div>`;
  $("load-legend").dataset.mode = kind;
}

function draw(lay) {
  poll = lay.poll || 1.0;
  $("title").textContent = `fabroute: ${lay.topology}`;
  const labels = $("labels"), cg = $("cables"), sg = $("switches");
  const n = lay.switches.length;
  const r = Math.max(0.004, Math.min(0.014, 0.35 / Math.sqrt(n) / 4));
  for (const s of lay.subgraphs || [])
    el("text", {x: s.x, y: s.y, class: "slabel"}, labels).textContent = s.label;
  for (const g of lay.groups || [])
    el("text", {x: g.x, y: g.y, class: "glabel"}, labels).textContent = g.label;
  const pos = lay.switches;
  lay.cables.forEach(([a, b, kind], i) => {
    const k = key(a, b);
    const line = el("line", {x1: pos[a].x, y1: pos[a].y, x2: pos[b].x, y2: pos[b].y,
                             class: "cable", "data-cable": k, "data-kind": kind,
                             "data-failed": "0", "data-load": ""}, cg);
    el("title", {}, line).textContent = `cable ${k} (${kind})`;
    if (!cables.has(k)) cables.set(k, []);
    cables.get(k).push(line);
  });
  for (const s of pos) {
    const c = el("circle", {cx: s.x, cy: s.y, r, class: "sw", "data-switch": s.id,
                            "data-state": "absent", "data-verified": "0", "data-share": ""}, sg);
    el("title", {}, c).textContent = `switch ${s.id}`;
    switches[s.id] = c;
  }
  for (const [a, b] of lay.failed || []) markFailed(key(a, b), true);
  $("kinds").innerHTML = "<h2>Cables</h2>" + (lay.cable_kinds || []).map(
    (k) => `<div class="row">${k.count} ${k.text}</div>`).join("");
  legend("load");
}

// since: the server's time of the first state that showed the cable failed (and
// data-failed-shown the browser's, both unix seconds)
function markFailed(k, on, since) {
  for (const line of cables.get(k) || []) {
    if (on && line.dataset.failed !== "1") {
      line.dataset.failedSince = since ?? "";
      line.dataset.failedShown = Date.now() / 1000;
    }
    if (!on) { delete line.dataset.failedSince; delete line.dataset.failedShown; }
    line.dataset.failed = on ? "1" : "0";
    line.classList.toggle("failed", on);
  }
}

function update(st) {
  lastAt = Date.now();
  lastState = st;
  const f = st.fabric;
  document.body.dataset.seq = st.seq;
  $("role").textContent = st.role ? `role ${st.role.role} (${st.role.state})` : "";
  $("role").dataset.state = st.role ? st.role.state : "";
  if (f) {
    $("fabric").textContent = `${f.routing} on ${f.topology}, version ${f.version}`;
    $("counts").textContent = `verified ${f.verified} / connected ${f.connected} / ${f.switches}`;
    $("counts").dataset.verified = f.verified;
  }
  // switches: verified state; those not in the snapshot are not connected
  const seen = new Set();
  for (const s of st.switches) {
    const c = switches[s.switch];
    if (!c) continue;
    seen.add(s.switch);
    c.dataset.state = s.state;
    c.dataset.verified = s.verified ? "1" : "0";
    c.setAttribute("class", "sw " + (s.verified ? "verified" : BAD.has(s.state) ? "bad" : "busy"));
    c.firstChild.textContent = `switch ${s.switch} (dpid ${s.dpid}): ${s.state}, ${s.flows} flows, ` +
      `${s.groups} groups, digest ${s.digest}, ${s.repairs} repairs`;
  }
  switches.forEach((c, i) => {
    if (c && !seen.has(i)) {
      c.dataset.state = "absent"; c.dataset.verified = "0"; c.setAttribute("class", "sw");
    }
  });
  cablesLoad(st);
  // failed cables: the controller's (the started set's and every port down)
  const failed = new Set((st.failures.cables || []).map(([a, b]) => key(a, b)));
  for (const k of cables.keys()) markFailed(k, failed.has(k), st.time);
  $("failed-count").textContent = failed.size;
  $("failed-count").dataset.count = failed.size;
  $("failed-list").innerHTML = [...failed].map((k) => {
    const since = cables.get(k)?.[0]?.dataset.failedSince;
    return `<li data-failed-cable="${k}">${k}${since ? ", since " +
      new Date(since * 1000).toLocaleTimeString() : ""}</li>`;
  }).join("");
  updates(st.update);
  ugal(st.ugal);
  tick();
}

function cablesLoad(st) {
  const load = new Map(), rate = new Map(), ports = new Map();
  const estimated = st.ugal !== null;     // UGAL-L's estimator measures every network port
  // network ports: [switch, port, peer switch, load, tx_bytes, time] (web.py: compact)
  for (const [u, port, v, pload, tx, t] of st.ports) {
    const k = key(u, v), id = `${u}:${port}`;
    if (pload !== null) load.set(k, Math.max(load.get(k) ?? 0, pload));
    ports.set(id, [t, tx]);
    const old = prevPorts.get(id);
    if (old && t > old[0]) {
      const mbit = (tx - old[1]) * 8 / (t - old[0]) / 1e6;
      rate.set(k, Math.max(rate.get(k) ?? 0, mbit));
    }
  }
  for (const [id, v] of ports) prevPorts.set(id, v);
  legend(estimated ? "load" : "rate");
  const lo = Math.log10(RATE_TICKS[0]), hi = Math.log10(RATE_TICKS[RATE_TICKS.length - 1]);
  for (const [k, lines] of cables) {
    let x = null, text = "";
    if (estimated && load.has(k)) {
      x = load.get(k); text = `load ${x.toFixed(3)}`;
    } else if (!estimated && rate.has(k)) {
      const r = rate.get(k);
      x = r <= RATE_TICKS[0] ? 0 : (Math.log10(r) - lo) / (hi - lo);
      text = `${r.toFixed(3)} Mbit/s`;
    }
    for (const line of lines) {
      line.dataset.load = estimated && load.has(k) ? load.get(k) : "";
      line.style.stroke = x === null ? "" : colour(x);
      line.firstChild.textContent = `cable ${k} (${line.dataset.kind})${text ? ": " + text : ""}`;
    }
  }
}

function updates(u) {
  const now = $("update-now");
  now.dataset.running = u.running ? "1" : "0";
  now.dataset.kind = u.kind || "";
  now.dataset.phase = u.phase || "";
  now.textContent = u.running ? `running: ${u.kind || ""}, phase ${u.phase || "starting"}` +
    (u.held ? " (held: move the cables, then resume)" : "") : `none running (${u.count} done)`;
  const last = u.last;
  $("update-last").innerHTML = !last ? "" :
    `last: ${last.mode || ""} ${last.reason ? "(" + last.reason + ")" : ""} ` +
    `${last.ok ? "ok" : "not ok"}` + (last.t_verified && last.t_start ?
      `, ${((last.t_verified - last.t_start) * 1e3).toFixed(0)} ms to verified` : "") +
    "<ul>" + (last.phases || []).map((p) => `<li data-phase="${p.name}">${p.name}: ` +
      `${(p.seconds * 1e3).toFixed(0)} ms</li>`).join("") + "</ul>";
}

function ugal(ug) {
  $("ugal").hidden = !ug;
  if (!ug) return;
  const sum = $("ugal-summary");
  sum.dataset.rounds = ug.rounds;
  sum.dataset.mean = ug.share;
  sum.textContent = `round ${ug.rounds}: mean ${(ug.share * 100).toFixed(1)} % non-minimal, ` +
    `${ug.changed} moved, ${ug.reversals} reversed, ${ug.stale.length} stale switches`;
  $("ugal-keys").textContent = `(${ug.keys})`;
  $("ugal-dst").innerHTML = ug.by_destination.map((v, k) =>
    `<tr data-dst-share="${k}" data-share="${v}"><td>${ug.keys} ${k}</td>` +
    `<td>${(v * 100).toFixed(1)} %</td></tr>`).join("");
  const rows = [...(ug.pairs || [])];      // the non-zero shares (web.py: compact)
  rows.sort((a, b) => b[2] - a[2] || a[0] - b[0] || a[1] - b[1]);
  $("ugal-pairs").tBodies[0].innerHTML = rows.slice(0, MAX_ROWS).map(([u, k, v]) =>
    `<tr class="share" data-src="${u}" data-dst="${k}" data-share="${v}"><td>${u}</td>` +
    `<td>${k}</td><td>${(v * 100).toFixed(1)} %</td></tr>`).join("");
  $("ugal-more").textContent = ug.pairs === null ? "too many pairs: means per destination only"
    : rows.length > MAX_ROWS ? `${rows.length - MAX_ROWS} more not shown`
    : `${rows.length} of ${ug.n_pairs} (source, ${ug.keys}) pairs detour`;
  // per switch: its mean share as the outline (blue: it detours) and the tooltip
  switches.forEach((c, i) => {
    if (!c) return;
    const mean = ug.by_source ? ug.by_source[i] : null;
    c.dataset.share = mean ?? "";
    c.classList.toggle("shared", mean > 0);
    if (mean > 0) c.firstChild.textContent += `; mean share ${(mean * 100).toFixed(1)} %`;
  });
}

function tick() {
  const a = $("age");
  if (lastAt === null) return;
  const s = (Date.now() - lastAt) / 1000;
  a.dataset.age = s.toFixed(1);
  a.textContent = `last update ${s.toFixed(0)} s ago`;
  a.classList.toggle("stale", s > 3 * poll + 1);
}

async function start() {
  const lay = await (await fetch("layout.json")).json();
  draw(lay);
  document.body.dataset.ready = "1";
  const es = new EventSource("events");
  es.addEventListener("state", (e) => update(JSON.parse(e.data)));
  setInterval(tick, 1000);
}
start();
