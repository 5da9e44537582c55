// The node's live dashboard: polls /status every second and draws it.
// No network access beyond the node's own API; no libraries.
"use strict";

const history = []; // {t, fetched, queued}, the last maxPoints polls
const maxPoints = 120;

function fmt(n) { return Number(n || 0).toLocaleString("en-US"); }

function setText(id, text) { document.getElementById(id).textContent = text; }

function rows(tableId, data) {
  const body = document.querySelector("#" + tableId + " tbody");
  body.replaceChildren(...data.map(cells => {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      if (c && typeof c === "object") { td.textContent = c.text; td.className = c.cls || ""; }
      else td.textContent = c;
      tr.appendChild(td);
    }
    return tr;
  }));
}

function chart(id, values, color) {
  const canvas = document.getElementById(id);
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 22;
  ctx.clearRect(0, 0, w, h);
  const max = Math.max(1, ...values);
  ctx.fillStyle = "#8b93a5";
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillText(fmt(Math.round(max)), 2, 11);
  ctx.strokeStyle = "#eef0f3";
  ctx.beginPath(); ctx.moveTo(pad, h - pad); ctx.lineTo(w, h - pad); ctx.stroke();
  if (values.length < 2) return;
  ctx.strokeStyle = color; ctx.lineWidth = 2;
  ctx.beginPath();
  values.forEach((v, i) => {
    const x = pad + (w - pad) * i / (maxPoints - 1);
    const y = (h - pad) - (h - pad - 14) * v / max;
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
}

function draw(st) {
  const c = st.crawl || {};
  const now = Date.now();
  history.push({ t: now, fetched: c.fetched || 0, queued: c.queued || 0 });
  if (history.length > maxPoints) history.shift();
  const rates = history.map((p, i) => {
    if (i === 0) return 0;
    const q = history[i - 1];
    return Math.max(0, (p.fetched - q.fetched) * 1000 / Math.max(1, p.t - q.t));
  });

  setText("peer", st.peer_id || "");
  const lease = st.shard && st.shard.lease_valid ? "lease valid" : "no lease";
  const reach = st.nat && st.nat.reachability ? ", " + st.nat.reachability : "";
  setText("state", "up " + (st.uptime || "?") + ", " + lease + reach + ", updated " + new Date(now).toLocaleTimeString());
  setText("fetched", fmt(c.fetched));
  setText("rate", fmt(Math.round(rates[rates.length - 1] || 0)));
  setText("queued", fmt(c.queued));
  const seen = st.seen || 0;
  setText("coverage", seen ? Math.min(100, 100 * (c.fetched || 0) / seen).toFixed(1) + "%" : "0%");
  setText("errors", fmt(c.errors));
  setText("hosts", fmt(c.hosts_ready) + " / " + fmt(c.hosts_waiting));

  chart("rate-chart", rates, "#2563eb");
  chart("queue-chart", history.map(p => p.queued), "#16a34a");

  const kinds = Object.entries(c.errors_by_kind || {}).sort((a, b) => b[1] - a[1]);
  rows("errors-table", kinds.length ? kinds.map(([k, n]) => [k, fmt(n)]) : [["none", ""]]);

  rows("hosts-table", (c.top_hosts || []).map(h => [
    h.host, fmt(h.fetched), fmt(h.queued) + (h.more ? "+" : ""),
    h.hot ? { text: "hot", cls: "hot" } : (h.busy ? "fetching" : ""),
  ]));

  const ring = [];
  const short = p => (p.ring_id || "") + "  " + (p.peer_id || "").slice(-8);
  if (st.predecessor) ring.push(["predecessor", short(st.predecessor), st.predecessor.conn || ""]);
  ring.push(["self", short(st), ""]);
  (st.successors || []).forEach((s, i) => ring.push([i === 0 ? "successor" : "successor " + (i + 1), short(s), s.conn || ""]));
  ring.push(["replicas (K)", String(st.shard ? st.shard.replicas : ""), ""]);
  rows("ring-table", ring);
  const claims = (st.shard && st.shard.claims) || [];
  rows("claims-table", claims.length ? claims.map(cl => ["(" + cl.from + ", " + cl.to + "]", String(cl.epoch)]) : [["none", ""]]);
}

async function poll() {
  try {
    const resp = await fetch("status", { cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    draw(await resp.json());
  } catch (e) {
    setText("state", "no answer from the node: " + e.message);
  }
}

poll();
setInterval(poll, 1000);
