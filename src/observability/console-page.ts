/**
 * The admin console (GET / on the admin listener, docs/operations.md#console): one HTML page and one
 * script, no build step, no dependency. Everything it shows comes from the admin endpoints beside it
 * (/readyz, /workers, /routes, /metrics), fetched again every two seconds.
 */
export const CONSOLE_REFRESH_MS = 2000;

export const CONSOLE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchyard console</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1b1f24; background: #fff; }
  h1 { font-size: 1.3rem; margin: 0 0 .3rem; }
  h2 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid #d0d7de; vertical-align: top; }
  th { background: #f6f8fa; font-weight: 600; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
  .empty td { color: #57606a; font-style: italic; }
  #summary span { margin-right: 1.2rem; }
  .bad { color: #b42318; font-weight: 600; }
  .good { color: #1a7f37; font-weight: 600; }
  #status { color: #57606a; font-size: .85rem; }
</style>
</head>
<body>
<h1>Switchyard console</h1>
<div id="summary" data-testid="summary">loading…</div>
<div id="status" data-testid="status"></div>

<h2>Nodes and processes</h2>
<table id="nodes" data-testid="nodes">
  <thead><tr><th>node</th><th>process (peer)</th><th class="num">workers</th><th>state</th></tr></thead>
  <tbody></tbody>
</table>

<h2>Workers</h2>
<table id="workers" data-testid="workers">
  <thead><tr><th>name</th><th>id</th><th>node</th><th>process (peer)</th><th class="num">pid</th><th>functions</th></tr></thead>
  <tbody></tbody>
</table>

<h2>Routes</h2>
<table id="routes" data-testid="routes">
  <thead><tr><th>method</th><th>path</th><th>function</th><th>owners (peers)</th><th class="num">req/s</th><th class="num">5xx/s</th></tr></thead>
  <tbody></tbody>
</table>
<p id="rates-note" style="color:#57606a;font-size:.85rem">Rates: requests this node answered, from its /metrics, over the last refresh.</p>
<script src="/console.js"></script>
</body>
</html>
`;

export const CONSOLE_SCRIPT = `'use strict';
const REFRESH_MS = ${CONSOLE_REFRESH_MS};
let previous;

function row(cells, classes) {
  const tr = document.createElement('tr');
  cells.forEach((cell, i) => {
    const td = document.createElement('td');
    td.textContent = cell === undefined || cell === null ? '' : String(cell);
    if (classes && classes[i]) td.className = classes[i];
    tr.append(td);
  });
  return tr;
}

function fill(id, rows, classes, emptyText) {
  const body = document.querySelector('#' + id + ' tbody');
  if (rows.length === 0) {
    const tr = row([emptyText]);
    tr.className = 'empty';
    tr.firstChild.colSpan = document.querySelectorAll('#' + id + ' thead th').length;
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(...rows.map((cells) => row(cells, classes)));
}

function nodeOf(peer) {
  return typeof peer === 'string' ? peer.split('/')[0] : '';
}

async function get(path, as) {
  const res = await fetch(path, { cache: 'no-store' });
  if (!res.ok && path !== '/readyz') throw new Error(path + ' answered ' + res.status);
  return as === 'text' ? res.text() : res.json();
}

/** Request and 5xx totals per "METHOD route" from the Prometheus text. */
function totals(text) {
  const out = new Map();
  for (const line of text.split('\\n')) {
    const m = /^switchyard_http_requests_total\\{([^}]*)\\}\\s+(\\S+)/.exec(line);
    if (m === null) continue;
    const labels = {};
    for (const l of m[1].matchAll(/(\\w+)="((?:[^"\\\\]|\\\\.)*)"/g)) labels[l[1]] = l[2];
    const key = labels.method + ' ' + labels.route;
    const t = out.get(key) || { all: 0, errors: 0 };
    const value = Number(m[2]);
    t.all += value;
    if (/^5/.test(labels.status || '')) t.errors += value;
    out.set(key, t);
  }
  return out;
}

function rate(key, now, at) {
  if (previous === undefined) return ['…', '…'];
  const seconds = (at - previous.at) / 1000;
  const a = now.get(key) || { all: 0, errors: 0 };
  const b = previous.totals.get(key) || { all: 0, errors: 0 };
  // A counter that went down was reset (the route came back): count from zero.
  const all = a.all >= b.all ? a.all - b.all : a.all;
  const errors = a.errors >= b.errors ? a.errors - b.errors : a.errors;
  return [(all / seconds).toFixed(1), (errors / seconds).toFixed(1)];
}

async function refresh() {
  const at = Date.now();
  try {
    const [ready, workers, table, metrics] = await Promise.all([get('/readyz'), get('/workers'), get('/routes'), get('/metrics', 'text')]);
    const summary = document.getElementById('summary');
    summary.replaceChildren();
    const state = document.createElement('span');
    state.textContent = ready.status === 'ready' ? 'ready' : 'not ready';
    state.className = ready.status === 'ready' ? 'good' : 'bad';
    const bus = document.createElement('span');
    bus.textContent = 'bus ' + (ready.bus === 'out_of_sync' ? 'out of sync (Redis unreachable)' : 'in sync');
    bus.className = ready.bus === 'out_of_sync' ? 'bad' : '';
    const facts = document.createElement('span');
    facts.textContent = 'node ' + ready.nodeId + ' · ' + ready.mode + ' mode · ' + table.routes.length + ' routes · ' + workers.length + ' workers · HTTP :' + ready.http + ' · workers :' + ready.workers;
    summary.append(state, bus, facts);

    // Processes: this node's children from /readyz, the other nodes' from the peers that own something.
    const peers = new Map();
    for (const child of ready.children || []) peers.set(child.peerId || ('child ' + child.index), { node: ready.nodeId, workers: 0, state: child.ready ? 'serving' : 'starting' });
    const seen = (peer) => { if (peer && !peers.has(peer)) peers.set(peer, { node: nodeOf(peer), workers: 0, state: 'peer' }); };
    for (const w of workers) { seen(w.peer); const p = peers.get(w.peer); if (p) p.workers += 1; }
    for (const r of table.routes) for (const o of r.owners || []) seen(o);
    const nodeRows = [...peers.entries()].sort((a, b) => (a[1].node + a[0]).localeCompare(b[1].node + b[0])).map(([peer, p]) => [p.node, peer, p.workers, p.state]);
    fill('nodes', nodeRows, [undefined, undefined, 'num'], 'no processes reported yet');

    fill('workers', workers.map((w) => [w.name || '(unnamed)', w.id, w.node || nodeOf(w.peer), w.peer, w.pid, (w.functions || []).join(', ')]), [undefined, undefined, undefined, undefined, 'num'], 'no worker connected: start one (examples/README.md)');

    const now = totals(metrics);
    fill('routes', table.routes.map((r) => {
      const [req, err] = rate(r.method + ' ' + r.path, now, at);
      return [r.method, r.path, r.function_id, (r.owners || []).join(', ') || '(waiting for its worker)', req, err];
    }), [undefined, undefined, undefined, undefined, 'num', 'num'], 'no routes yet: a worker registers them');
    previous = { at, totals: now };
    document.getElementById('status').textContent = 'updated ' + new Date(at).toLocaleTimeString() + ', every ' + REFRESH_MS / 1000 + ' s';
  } catch (err) {
    document.getElementById('status').textContent = 'refresh failed: ' + err.message + ' (retrying)';
  }
  setTimeout(refresh, REFRESH_MS);
}

refresh();
`;
