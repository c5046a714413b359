// The live view page: draws topology.json with cytoscape.js and applies each snapshot that
// /events pushes (server-sent events) to the links, switches and jobs.
"use strict";

const live = { cy: null, received: 0, last: null };
window.live = live;

function fmt(x, digits = 2) {
  return x === null || x === undefined ? "-" : Number(x).toFixed(digits);
}
function pct(x) { return x === null || x === undefined ? "-" : Math.round(x * 100) + " %"; }
function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}
function utilColor(u) {
  if (u === null || u === undefined || u < 0.02) return "#b0b0b0";
  if (u < 0.5) return "#43a047";
  if (u < 0.85) return "#fb8c00";
  return "#e53935";
}

function draw(graph) {
  const dilated = graph.tdf && graph.tdf !== 1 ?
    ` · emulated time: TDF ${graph.tdf} (rates are the emulated network's)` : "";
  document.getElementById("where").textContent =
    `${graph.kind} on ${graph.target} · ${graph.rundir}${dilated}`;
  live.cy = cytoscape({
    container: document.getElementById("graph"),
    elements: graph.elements,
    style: [
      { selector: "node", style: { "label": "data(label)", "text-wrap": "wrap",
        "font-size": 10, "text-valign": "center", "text-halign": "center",
        "width": 46, "height": 46, "color": "#fff", "text-outline-width": 0 } },
      { selector: "node[kind = 'switch']", style: { "shape": "round-rectangle",
        "background-color": "#3f51b5", "width": 56, "height": 34 } },
      { selector: "node[role = 'spine']", style: { "background-color": "#6a1b9a" } },
      { selector: "node[kind = 'host']", style: { "shape": "ellipse",
        "background-color": "#00897b", "font-size": 8, "width": 58, "height": 34 } },
      { selector: "edge", style: { "width": 2, "line-color": "#b0b0b0", "label": "data(label)",
        "font-size": 9, "text-background-color": "#fff", "text-background-opacity": 0.85,
        "curve-style": "bezier" } },
    ],
    layout: { name: "breadthfirst", roots: graph.roots, directed: false, spacingFactor: 1.1,
              padding: 12 },
    userZoomingEnabled: false,
  });
  // the tables beside the drawing change its size as they fill: keep every node in view
  new ResizeObserver(() => { live.cy.resize(); live.cy.fit(undefined, 12); })
    .observe(document.getElementById("graph"));
}

function applyLinks(links) {
  const body = document.querySelector("#links tbody");
  body.replaceChildren();
  for (const l of links) {
    const busier = l.mbit_out === null ? null : Math.max(l.mbit_out, l.mbit_in);
    const edge = live.cy && live.cy.getElementById(l.id);
    if (edge && edge.length) {
      edge.data("label", busier === null ? "" :
        `${fmt(busier)}${l.utilization === null ? "" : " (" + pct(l.utilization) + ")"}`);
      edge.style({ "line-color": utilColor(l.utilization === null ? (busier > 0.01 ? 0.3 : 0)
                                                                    : l.utilization),
                   "width": 2 + 6 * Math.min(1, l.utilization || 0) });
    }
    const tr = document.createElement("tr");
    tr.dataset.link = l.id;
    cell(tr, `${l.switch}:${l.port} ↔ ${l.peer}`);
    cell(tr, l.kind);
    cell(tr, l.bw);
    cell(tr, fmt(l.mbit_out));
    cell(tr, fmt(l.mbit_in));
    cell(tr, pct(l.utilization));
    cell(tr, l.tx_bytes === null ? "-" : String(l.tx_bytes), "tx-bytes");
    cell(tr, l.rx_bytes === null ? "-" : String(l.rx_bytes), "rx-bytes");
    body.appendChild(tr);
  }
}

function dropsText(drops) {
  const parts = Object.entries(drops || {}).map(([k, v]) => `${k} ${v}`);
  return parts.length ? parts.join(", ") : "0";
}

function applySwitches(switches) {
  const body = document.querySelector("#switches tbody");
  body.replaceChildren();
  for (const s of Object.values(switches)) {
    const tr = document.createElement("tr");
    tr.dataset.switch = s.name;
    cell(tr, `${s.name} (${s.role})`);
    cell(tr, String(s.interfaces.rx_packets), "rx-packets");
    cell(tr, String(s.interfaces.tx_packets), "tx-packets");
    cell(tr, String(s.interfaces.rx_dropped + s.interfaces.tx_dropped));
    cell(tr, dropsText(s.drops));
    cell(tr, s.stats ? `dropped ${s.stats.dropped}, malformed ${s.stats.malformed}, ` +
                       `up ${fmt(s.stats.uptime_s, 0)} s` : "-");
    body.appendChild(tr);
  }
}

function applyJobs(jobs) {
  const box = document.getElementById("jobs");
  if (!jobs.length) return;
  box.replaceChildren();
  for (const j of jobs) {
    const div = document.createElement("div");
    div.className = "job";
    div.dataset.job = j.name;
    const h = document.createElement("h3");
    const t = j.totals;
    h.textContent = `${j.name} (id ${j.job_id}): ${j.workers} workers on ${j.hosts.join(", ")}` +
      ` · slots completed ${t.completions || 0}, retransmissions seen ${t.duplicates || 0},` +
      ` drops ${dropsText(j.drops)}` + (j.stale ? " (stale: the last read failed)" : "");
    div.appendChild(h);
    const table = document.createElement("table");
    const head = document.createElement("tr");
    for (const [c, title] of [["switch", ""], ["slots", "slots of the job on this switch"],
        ["contrib.", "contributions received"], ["completed", "slots completed"],
        ["retrans.", "retransmitted contributions seen (duplicates)"],
        ["results", "results sent"], ["partials", "partial aggregates sent up the tree"],
        ["drops", "drops by reason"]]) {
      const th = document.createElement("th"); th.textContent = c; th.title = title;
      head.appendChild(th);
    }
    table.appendChild(head);
    for (const r of j.switches) {
      const tr = document.createElement("tr");
      cell(tr, `${r.switch} (${r.role})`);
      cell(tr, String(r.slots));
      cell(tr, String(r.contributions));
      cell(tr, String(r.completions), "completions");
      cell(tr, String(r.duplicates));
      cell(tr, String(r.results_sent));
      cell(tr, String(r.partials_sent));
      cell(tr, dropsText(r.drops));
      table.appendChild(tr);
    }
    div.appendChild(table);
    box.appendChild(div);
  }
}

function apply(snap) {
  live.received += 1;
  live.last = snap;
  document.getElementById("seq").textContent = String(snap.seq);
  document.getElementById("took").textContent =
    snap.p4runtime_ms === null || snap.p4runtime_ms === undefined ? "" :
    `(P4Runtime read in ${fmt(snap.p4runtime_ms, 0)} ms, ${fmt(snap.p4runtime_age_s, 1)} s ago)`;
  applyLinks(snap.links || []);
  applySwitches(snap.switches || {});
  applyJobs(snap.jobs || []);
  const errors = document.getElementById("errors");
  errors.replaceChildren();
  for (const e of snap.errors || []) {
    const li = document.createElement("li"); li.textContent = e; errors.appendChild(li);
  }
}

async function main() {
  const graph = await (await fetch("/api/graph")).json();
  draw(graph);
  const status = document.getElementById("status");
  const events = new EventSource("/events");
  events.onopen = () => { status.textContent = "live"; status.className = "status ok"; };
  events.onerror = () => { status.textContent = "disconnected (run ended?)";
                           status.className = "status down"; };
  events.onmessage = (msg) => apply(JSON.parse(msg.data));
}

main();
