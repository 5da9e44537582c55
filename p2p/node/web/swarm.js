// The swarm page: polls /swarm (a census the node runs: exact, or an
// estimate with intervals) every 5 s. Names and peer IDs come from other
// peers: they are only ever set as text.
"use strict";

function fmt(t, digits) {
  if (!t) return "–";
  const v = (x) => x.toFixed(digits || 0);
  return t.low === t.high ? v(t.value) : v(t.value) + " [" + v(t.low) + ", " + v(t.high) + "]";
}

function setText(id, text) { document.getElementById(id).textContent = text; }

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    td.textContent = c;
    tr.appendChild(td);
  }
  return tr;
}

function render(s) {
  const how = s.method === "exact"
    ? "counted exactly: every member asked"
    : "estimated from " + s.samples + " windows of the ring (" + s.asked + " members asked); intervals at " + Math.round(100 * s.confidence) + "% confidence";
  setText("state", how + " · " + new Date().toLocaleTimeString());
  const t = s.totals || {};
  setText("members", fmt(s.members));
  setText("fetched", fmt(t.fetched));
  setText("rate", fmt(t.pages_per_s, 1));
  setText("queued", fmt(t.queued));
  setText("inflight", fmt(t.in_flight));
  setText("work", s.work ? "running" : (s.method === "exact" ? "idle" : "no sampled member has work"));
  const totals = document.querySelector("#totals-table tbody");
  totals.replaceChildren(...Object.keys(t).sort().map((k) => row([k, fmt(t[k], k === "pages_per_s" ? 1 : 0)])));
  const members = document.querySelector("#members-table tbody");
  members.replaceChildren(...(s.member_reports || []).map((m) => {
    const c = m.counters || {};
    const n = (k) => String(Math.round(c[k] || 0));
    return row([m.peer_id.slice(-12), n("fetched"), n("queued"), n("in_flight"), n("errors"), m.work ? "yes" : "no"]);
  }));
}

async function poll() {
  try {
    const r = await fetch("/swarm");
    if (!r.ok) throw new Error((await r.text()).trim() || r.statusText);
    render(await r.json());
  } catch (e) {
    setText("state", "census failed: " + e.message);
  }
  setTimeout(poll, 5000);
}

poll();
