// The Basalt dashboard: one page per hash route, redrawn from the broker's
// JSON API (/api/snapshot, /api/history) every refresh interval. Talks only
// to the origin that served it.
"use strict";

const state = { config: null, snap: null, history: [], error: null, lookup: null, notice: "", auth: null };

const esc = v => String(v === undefined || v === null ? "" : v)
  .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const num = v => (v === undefined || v === null) ? "" : Number(v).toLocaleString("en-US");
const bytes = v => {
  if (v === undefined || v === null) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; v = Number(v);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + u[i];
};
const ago = ms => ms <= 0 ? "0 s" : ms < 60000 ? (ms / 1000).toFixed(1) + " s" : (ms / 60000).toFixed(1) + " min";

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()));
  return r.json();
}

function route() {
  const h = location.hash.replace(/^#/, "") || "cluster";
  const [pathPart, query] = h.split("?");
  const [page, arg] = pathPart.split("/");
  return { page, arg: arg ? decodeURIComponent(arg) : null, params: new URLSearchParams(query || "") };
}

// Per-second rates of one topic's counter over the history samples.
function rateSeries(pick, name) {
  const pts = [];
  const h = state.history;
  for (let i = 1; i < h.length; i++) {
    const a = h[i - 1].topics.find(t => t.name === name), b = h[i].topics.find(t => t.name === name);
    const dt = (h[i].atMs - h[i - 1].atMs) / 1000;
    if (a && b && dt > 0) pts.push([h[i].atMs, Math.max(0, (pick(b) - pick(a)) / dt)]);
  }
  return pts;
}

function lastRate(pick, name) {
  const s = rateSeries(pick, name);
  return s.length ? s[s.length - 1][1] : 0;
}

function lagSeries(group, topic) {
  return state.history.map(p => {
    const l = p.lags.find(x => x.group === group && (!topic || x.topic === topic));
    const total = topic ? (l ? l.lag : 0)
      : p.lags.filter(x => x.group === group).reduce((s, x) => s + x.lag, 0);
    return [p.atMs, total];
  });
}

function chartCard(id, title) {
  return `<section class="card"><h3>${esc(title)}</h3><canvas class="chart" id="${id}"></canvas><div class="legend" id="${id}-legend"></div></section>`;
}

function drawChart(id, series) {
  const c = document.getElementById(id);
  if (!c) return;
  BasaltChart.draw(c, series);
  BasaltChart.legend(document.getElementById(id + "-legend"), series);
}

function kv(rows) {
  return `<table class="kv">${rows.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join("")}</table>`;
}

function pageCluster(s) {
  const st = s.store, r = s.replication;
  const disk = st.diskUsedRatio === null || st.diskUsedRatio === undefined ? "unknown" : (st.diskUsedRatio * 100).toFixed(0) + " %";
  let repl = `<p>Mode: <b id="repl-mode">${esc(r.mode)}</b></p>`;
  if (r.slaves.length) {
    repl += `<table id="slaves"><tr><th>Slave</th><th class="num">Acked offset</th><th class="num">Lag (bytes)</th></tr>` +
      r.slaves.map(x => `<tr><td>${esc(x.addr)}</td><td class="num">${num(x.ackedOffset)}</td><td class="num">${num(x.lagBytes)}</td></tr>`).join("") + `</table>`;
  } else if (r.mode === "SYNC_MASTER" || r.mode === "ASYNC_MASTER") {
    repl += `<p class="muted">No slave connected.</p>`;
  }
  if (r.masterAddr !== null && r.masterAddr !== undefined) {
    repl += kv([["Master", esc(r.masterAddr)], ["Connected", r.masterConnected ? "yes" : `<span class="bad">no</span>`], ["Behind master", bytes(r.slaveLagBytes)]]);
  }
  if (r.ledger) repl += `<p>Ledger group <b>${esc(r.ledger.group)}</b>: ${esc(r.ledger.role)}, term ${num(r.ledger.term)} — <a class="link" href="#ledger">details</a></p>`;
  return `<h2>Cluster</h2>
  <section class="card"><h3>Brokers</h3>
  <table id="brokers"><tr><th>Cluster</th><th>Broker</th><th class="num">Id</th><th>Address</th><th>Role</th><th>Writable</th><th class="num">Uptime</th><th class="num">Disk used</th></tr>
  <tr data-broker="${esc(s.brokerName)}"><td>${esc(s.cluster)}</td><td>${esc(s.brokerName)}</td><td class="num">${s.brokerId}</td><td>${esc(s.addr)}</td><td>${esc(s.role)}</td>
  <td>${s.writable ? `<span class="good">yes</span>` : `<span class="bad">no</span>`}</td><td class="num">${ago(s.uptimeMs)}</td><td class="num">${disk}</td></tr></table></section>
  <section class="card"><h3>Store</h3>${kv([
    ["Root", esc(st.root)],
    ["Poisoned (an fsync failed)", st.poisoned ? `<span class="bad" id="poisoned">YES — writes refused</span>` : `<span class="good" id="poisoned">no</span>`],
    ["Storage size", bytes(st.storageSizeBytes)],
    ["CommitLog offsets", num(st.commitLogMinOffset) + " … " + num(st.commitLogMaxOffset)],
    ["Flush behind", bytes(st.flushBehindBytes)],
    ["Dispatch behind", bytes(st.dispatchBehindBytes)],
    ["Topics / subscription groups", num(s.topics.length) + " / " + num(s.subscriptionGroups)],
    ["Producer connections", num(Object.values(s.producers).reduce((a, b) => a + b, 0))],
  ])}</section>
  <section class="card"><h3>Replication</h3>${repl}</section>
  ${chartCard("chart-disk", "Disk used (%)")}`;
}

function afterCluster() {
  drawChart("chart-disk", [{ name: "disk used %", points: state.history.filter(p => p.diskUsedRatio !== null).map(p => [p.atMs, p.diskUsedRatio * 100]) }]);
}

function adminForm(kind) {
  if (!state.config || !state.config.adminEnabled) return "";
  if (kind === "topic") return `<section class="card"><h3>Create topic</h3><form class="inline" data-admin="topic">
    <input name="topic" placeholder="topic" required><input name="queues" type="number" value="8" min="1" style="width:5em"><button>Create</button></form></section>`;
  return `<section class="card"><h3>Create group / reset offsets</h3>
    <form class="inline" data-admin="group"><input name="group" placeholder="group" required><button>Create group</button></form><br>
    <form class="inline" data-admin="reset-offset"><input name="group" placeholder="group" required><input name="topic" placeholder="topic" required>
    <input name="timestamp" placeholder="ms since epoch, -1 = end" required><button>Reset offsets</button></form></section>`;
}

function pageTopics(s, arg, params) {
  const all = params.get("system") === "1";
  const topics = s.topics.filter(t => all || !t.system);
  const rows = topics.map(t => `<tr data-topic="${esc(t.name)}" class="${t.name === arg ? "selected" : ""}">
    <td><a class="link" href="#topics/${encodeURIComponent(t.name)}">${esc(t.name)}</a></td>
    <td class="num">${t.readQueues}/${t.writeQueues}</td><td class="num">${t.perm}</td><td class="num stored">${num(t.stored)}</td>
    <td class="num in">${num(t.messagesIn)}</td><td class="num out">${num(t.messagesOut)}</td>
    <td class="num">${lastRate(p => p.messagesIn, t.name).toFixed(1)}</td><td class="num">${lastRate(p => p.messagesOut, t.name).toFixed(1)}</td></tr>`).join("");
  let detail = "";
  const sel = s.topics.find(t => t.name === arg);
  if (sel) {
    detail = `<section class="card"><h3>Queues of ${esc(sel.name)}</h3><table id="queues"><tr><th class="num">Queue</th><th class="num">Min offset</th><th class="num">Max offset</th><th></th></tr>` +
      sel.queues.map(q => `<tr><td class="num">${q.id}</td><td class="num">${num(q.minOffset)}</td><td class="num">${num(q.maxOffset)}</td>
      <td>${q.maxOffset > q.minOffset ? `<a class="link" href="#messages?topic=${encodeURIComponent(sel.name)}&queueId=${q.id}&offset=${q.maxOffset - 1}">last message</a>` : ""}</td></tr>`).join("") + `</table></section>`;
  }
  return `<h2>Topics</h2>
  <section class="card"><p><a class="link" href="#topics${arg ? "/" + encodeURIComponent(arg) : ""}?system=${all ? 0 : 1}">${all ? "hide" : "show"} system topics</a></p>
  <table id="topics-table"><tr><th>Topic</th><th class="num">Queues r/w</th><th class="num">Perm</th><th class="num">Stored</th><th class="num">In (total)</th><th class="num">Out (total)</th><th class="num">In/s</th><th class="num">Out/s</th></tr>${rows}</table></section>
  ${detail}${chartCard("chart-topics", sel ? `Messages per second: ${sel.name}` : "Messages per second in (busiest topics)")}${adminForm("topic")}`;
}

function afterTopics(s, arg) {
  let series;
  if (arg) {
    series = [{ name: arg + " in", points: rateSeries(p => p.messagesIn, arg) }, { name: arg + " out", points: rateSeries(p => p.messagesOut, arg) }];
  } else {
    const busy = s.topics.filter(t => !t.system).sort((a, b) => b.messagesIn - a.messagesIn).slice(0, 5);
    series = busy.map(t => ({ name: t.name, points: rateSeries(p => p.messagesIn, t.name) }));
  }
  drawChart("chart-topics", series);
}

function pageGroups(s, arg) {
  const rows = s.groups.map(g => {
    const lag = g.topics.reduce((a, t) => a + t.lag, 0);
    const lat = g.topics.reduce((a, t) => Math.max(a, t.lagLatencyMs), 0);
    const inflight = g.topics.reduce((a, t) => a + t.inflight, 0);
    const popped = popOf(s, g.name).reduce((a, [, , n]) => a + n, 0);
    return `<tr data-group="${esc(g.name)}" class="${g.name === arg ? "selected" : ""}"><td><a class="link" href="#groups/${encodeURIComponent(g.name)}">${esc(g.name)}</a></td>
      <td class="num members">${g.members.length}</td><td>${esc(g.consumeType)} ${esc(g.messageModel)}</td><td>${g.topics.map(t => esc(t.topic)).join(", ")}</td>
      <td class="num lag" data-lag="${lag}">${num(lag)}</td><td class="num">${ago(lat)}</td><td class="num">${num(inflight)}</td><td class="num pop-inflight" data-pop-inflight="${popped}">${num(popped)}</td></tr>`;
  }).join("");
  let detail = "";
  const sel = s.groups.find(g => g.name === arg);
  if (sel) {
    detail = `<section class="card"><h3>${esc(sel.name)}</h3><p>Members: ${sel.members.length ? sel.members.map(esc).join(", ") : `<span class="muted">none connected</span>`}</p>` +
      sel.topics.map(t => `<h3>${esc(t.topic)} — lag <span class="lag" data-lag="${t.lag}">${num(t.lag)}</span></h3>
      <table class="queue-lag" data-topic="${esc(t.topic)}"><tr><th class="num">Queue</th><th class="num">Broker offset</th><th class="num">Consumer offset</th><th class="num">Lag</th></tr>` +
      t.queues.map(q => `<tr><td class="num">${q.id}</td><td class="num">${num(q.brokerOffset)}</td><td class="num">${num(q.consumerOffset)}</td><td class="num lag" data-lag="${q.lag}">${num(q.lag)}</td></tr>`).join("") + `</table>`).join("") + `</section>`;
  }
  return `<h2>Consumer groups</h2><section class="card"><table id="groups-table"><tr><th>Group</th><th class="num">Members</th><th>Type</th><th>Topics</th><th class="num">Lag</th><th class="num">Lag age</th><th class="num">In flight</th><th class="num">POP in flight</th></tr>${rows}</table></section>
  ${detail}${popCard(s, sel ? sel.name : null)}${chartCard("chart-lag", sel ? `Lag of ${sel.name}` : "Lag (messages)")}${adminForm("group")}`;
}

// POP consumption (docs/pop.md#operations): [group, topic read, in flight]
// rows of the snapshot, of one group or all.
function popOf(s, group) {
  const rows = (s.pop && s.pop.byGroup) || [];
  return group === null ? rows : rows.filter(([g]) => g === group);
}

function popCard(s, group) {
  const p = s.pop || { inFlight: 0, reviveLagMs: 0 };
  const rows = popOf(s, group);
  const table = rows.length
    ? `<table id="pop-table"><tr><th>Group</th><th>Topic read</th><th class="num">In flight</th></tr>` +
      rows.map(([g, t, n]) => `<tr data-pop-group="${esc(g)}" data-pop-topic="${esc(t)}"><td>${esc(g)}</td><td>${esc(t)}</td><td class="num inflight" data-inflight="${n}">${num(n)}</td></tr>`).join("") + `</table>`
    : `<p class="muted" id="no-pop">No popped message awaits an ack${group === null ? "" : " in " + esc(group)}.</p>`;
  return `<section class="card"><h3>POP consumption</h3>${kv([
    ["In flight (popped, not acked; FIFO included)", `<span id="pop-inflight" data-inflight="${p.inFlight}">${num(p.inFlight)}</span>`],
    ["Revive lag (oldest overdue past its invisible time)", `<span id="pop-revive-lag" data-ms="${p.reviveLagMs}" class="${p.reviveLagMs > 0 ? "bad" : ""}">${ago(p.reviveLagMs)}</span>`],
  ])}${table}</section>`;
}

function afterGroups(s, arg) {
  const groups = arg ? [arg] : s.groups.map(g => g.name).slice(0, 6);
  drawChart("chart-lag", groups.map(g => ({ name: g, points: lagSeries(g) })));
}

function pageMessages(s, arg, params) {
  const v = k => esc(params.get(k) || "");
  const topics = s.topics.filter(t => !t.system).map(t => `<option value="${esc(t.name)}">`).join("");
  let out = "";
  const l = state.lookup;
  if (l && l.error) out = `<p class="bad">${esc(l.error)}</p>`;
  else if (l && l.found) {
    out = l.found.length ? l.found.map(m => `<section class="card message" data-msg-id="${esc(m.msgId)}"><h3>${esc(m.topic)} queue ${m.queueId} offset ${m.queueOffset}</h3>${kv([
      ["Offset message id", esc(m.msgId)],
      ["Unique key", esc(m.properties.UNIQ_KEY || "")],
      ["Keys", esc(m.properties.KEYS || "")], ["Tags", esc(m.properties.TAGS || "")],
      ["Born", esc(new Date(m.bornTimestamp).toISOString()) + " from " + esc(m.bornHost)],
      ["Stored", esc(new Date(m.storeTimestamp).toISOString()) + " at " + esc(m.storeHost)],
      ["Reconsume times", m.reconsumeTimes], ["Body", bytes(m.bodySize) + (m.compressed ? " (compressed)" : "")],
      ["Properties", esc(Object.entries(m.properties).map(([k, x]) => k + "=" + x).join("  "))],
    ])}<pre class="body">${esc(m.bodyPreview)}${m.bodyTruncated ? "\n…" : ""}</pre></section>`).join("")
      : `<p class="muted" id="not-found">No message found.</p>`;
  }
  return `<h2>Message lookup</h2><section class="card"><form class="inline" id="lookup">
    <datalist id="topic-names">${topics}</datalist>
    <input name="topic" list="topic-names" placeholder="topic" value="${v("topic")}">
    <input name="key" placeholder="key" value="${v("key")}"> or
    <input name="msgId" placeholder="message id" value="${v("msgId")}" size="34"> or
    <input name="queueId" placeholder="queue" value="${v("queueId")}" style="width:5em">
    <input name="offset" placeholder="offset" value="${v("offset")}" style="width:7em"><button>Find</button></form></section>
    <div id="lookup-result">${out}</div>`;
}

async function runLookup(params) {
  const q = new URLSearchParams();
  for (const k of ["topic", "key", "msgId", "queueId", "offset"]) if (params.get(k)) q.set(k, params.get(k));
  const key = q.toString();
  if (!key || (state.lookup && state.lookup.key === key)) return;
  state.lookup = { key };
  try { state.lookup.found = await getJson("/api/message?" + key); }
  catch (e) { state.lookup.error = e.message; }
  render();
}

function pageLedger(s) {
  const l = s.replication.ledger;
  if (!l) return `<h2>Ledger</h2><section class="card"><p class="muted" id="no-ledger">This broker does not run in ledger mode (enableDLegerCommitLog=false).</p></section>`;
  return `<h2>Ledger group ${esc(l.group)}</h2><section class="card">${kv([
    ["This member", esc(l.selfId)], ["Role", esc(l.role)], ["Term", num(l.term)], ["Leader", esc(l.leaderId || "none")],
    ["Preferred leader", esc(l.preferredLeaderId)], ["Transferring to", esc(l.transfereeId)],
    ["Begin / end index", num(l.beginIndex) + " / " + num(l.endIndex)], ["Committed index", `<span id="commit-index">${num(l.committedIndex)}</span>`],
    ["Dispatched index", num(l.dispatchedIndex)], ["Writable", l.writable ? "yes" : "no"], ["Poisoned", l.poisoned ? `<span class="bad">yes</span>` : "no"],
  ])}</section><section class="card"><h3>Members</h3><table id="peers"><tr><th>Id</th><th>Address</th><th class="num">Match index</th><th class="num">Lag</th></tr>` +
    l.peers.map(p => `<tr><td>${esc(p.id)}</td><td>${esc(p.addr)}</td><td class="num">${p.matchIndex < 0 ? "?" : num(p.matchIndex)}</td><td class="num">${p.lag < 0 ? "?" : num(p.lag)}</td></tr>`).join("") + `</table></section>`;
}

// Users (never a password) and ACLs, from /api/auth. With authentication
// on, the broker answers 401 and the browser asks for a super user's
// credentials; it then sends them with the writes too.
function pageUsers() {
  const a = state.auth;
  if (!a) return `<h2>Users and ACLs</h2><section class="card"><p class="muted">Loading…</p></section>`;
  if (a.error) return `<h2>Users and ACLs</h2><section class="card"><p class="bad" id="auth-error">${esc(a.error)}</p></section>`;
  const entries = acl => acl.policies.flatMap(p => p.entries.map(e => [p.policyType, e]));
  return `<h2>Users and ACLs</h2><section class="card">${kv([
    ["Authentication", a.authenticationEnabled ? "on" : "off"], ["Authorization", a.authorizationEnabled ? "on" : "off"], ["ACL 1.0 (plain_acl)", a.aclEnable ? "on" : "off"],
  ])}</section><section class="card"><h3>Users</h3><table id="users"><tr><th>User</th><th>Type</th><th>Status</th></tr>` +
    a.users.map(u => `<tr><td>${esc(u.username)}</td><td>${esc(u.userType)}</td><td>${esc(u.userStatus)}</td></tr>`).join("") +
    `</table></section><section class="card"><h3>ACLs</h3><table id="acls"><tr><th>Subject</th><th>Policy</th><th>Resource</th><th>Actions</th><th>Source IPs</th><th>Decision</th></tr>` +
    a.acls.flatMap(acl => entries(acl).map(([t, e]) => `<tr><td>${esc(acl.subject)}</td><td>${esc(t)}</td><td>${esc(e.resource)}</td><td>${esc(e.actions.join(", "))}</td><td>${esc(e.sourceIps.join(", ") || "any")}</td><td>${esc(e.decision)}</td></tr>`)).join("") +
    `</table></section>`;
}

async function refreshUsers() {
  try { state.auth = await getJson("/api/auth"); } catch (e) { state.auth = { error: e.message }; }
}

const PAGES = {
  cluster: [pageCluster, afterCluster],
  topics: [pageTopics, afterTopics],
  groups: [pageGroups, afterGroups],
  messages: [pageMessages, null],
  ledger: [pageLedger, null],
  users: [pageUsers, null],
};

function render() {
  const { page, arg, params } = route();
  const [view, after] = PAGES[page] || PAGES.cluster;
  document.querySelectorAll("#nav a").forEach(a => a.classList.toggle("active", a.dataset.page === page));
  const status = document.getElementById("status");
  status.textContent = state.error ? "error: " + state.error : state.snap ? "updated " + new Date(state.snap.atMs).toTimeString().slice(0, 8) : "connecting…";
  status.classList.toggle("bad", !!state.error);
  if (!state.snap) return;
  const el = document.getElementById("view");
  // Keep what a person is typing: the lookup page redraws only its results.
  const focused = document.activeElement && el.contains(document.activeElement) && document.activeElement.tagName === "INPUT";
  if (focused && page === "messages") {
    const r = document.getElementById("lookup-result");
    const tmp = document.createElement("div"); tmp.innerHTML = view(state.snap, arg, params);
    const nr = tmp.querySelector("#lookup-result"); if (r && nr) r.innerHTML = nr.innerHTML;
    return;
  }
  if (focused) return;
  el.innerHTML = (state.notice ? `<p class="good" id="notice">${esc(state.notice)}</p>` : "") + view(state.snap, arg, params);
  el.dataset.page = page;
  if (after) after(state.snap, arg, params);
  if (page === "messages") runLookup(params);
}

async function refresh() {
  try {
    const [snap, history] = await Promise.all([getJson("/api/snapshot"), getJson("/api/history")]);
    state.snap = snap; state.history = history; state.error = null;
  } catch (e) { state.error = e.message; }
  if (route().page === "users") await refreshUsers();
  render();
}

document.addEventListener("submit", async ev => {
  const f = ev.target;
  ev.preventDefault();
  const data = new URLSearchParams(new FormData(f));
  for (const [k, v] of [...data]) if (!v) data.delete(k);
  if (f.id === "lookup") {
    state.lookup = null;
    location.hash = "messages?" + data.toString();
    return;
  }
  if (f.dataset.admin) {
    const r = await fetch("/api/admin/" + f.dataset.admin + "?" + data.toString(), { method: "POST", headers: { "X-Requested-With": "basalt-dashboard" } });
    state.notice = r.ok ? f.dataset.admin + ": done" : f.dataset.admin + " failed: " + await r.text();
    document.activeElement && document.activeElement.blur();
    await refresh();
  }
});

window.addEventListener("hashchange", async () => {
  state.notice = "";
  if (route().page === "users") await refreshUsers();
  render();
});
window.addEventListener("resize", render);

(async () => {
  try { state.config = await getJson("/api/config"); } catch (e) { state.config = { refreshMs: 5000, adminEnabled: false }; }
  await refresh();
  const every = Math.min(Math.max(state.config.refreshMs || 5000, 500), 10000);
  setInterval(refresh, every);
})();
