// ferrometal console. Plain DOM, no framework: everything shown is put in with textContent
// or attribute setters (never HTML parsing), so a name, label or BMC message that holds
// markup is shown as the text it is. Every API call goes to /k8s/... with the session cookie;
// writes carry the session's CSRF token, which lives in this page's memory only.
'use strict';

const S = {
  info: null,          // {user, groups, namespace, csrf}
  fleet: false,        // may list hosts in every namespace
  stop: [],            // what the current view must stop when left (watches, timers)
};

const GROUP = 'metal3.io/v1alpha1';
const HOSTS = '/apis/' + GROUP + '/baremetalhosts';

// ---- DOM helpers ------------------------------------------------------------------------
function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat(Infinity)) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}
const $ = (id) => document.getElementById(id);
// replaceChildren without the holes (null, false) that conditional parts leave.
function put(el, ...kids) {
  el.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
}
function show(...nodes) {
  put($('main'), ...nodes);
}
function notice(text, error) {
  const n = $('notice');
  n.textContent = text || '';
  n.className = error ? 'error' : '';
}
function stateOf(host) {
  return (host.status && host.status.provisioning && host.status.provisioning.state) || 'none';
}
function cls(state) { return 's-' + String(state || 'none').replace(/[^a-z0-9]+/gi, '-').toLowerCase(); }
function ago(ts) {
  if (!ts) return '';
  const s = Math.max(0, Math.round((Date.now() - Date.parse(ts)) / 1000));
  if (s < 90) return s + 's ago';
  if (s < 5400) return Math.round(s / 60) + 'm ago';
  if (s < 129600) return Math.round(s / 3600) + 'h ago';
  return Math.round(s / 86400) + 'd ago';
}
function duration(a, b) {
  if (!a) return null;
  const end = b ? Date.parse(b) : Date.now();
  return Math.max(0, (end - Date.parse(a)) / 1000);
}
function fmtSecs(s) {
  if (s === null) return '–';
  if (s < 120) return s.toFixed(0) + ' s';
  if (s < 7200) return (s / 60).toFixed(1) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}
function mib(n) { return n >= 1024 ? (n / 1024).toFixed(1) + ' GiB' : n + ' MiB'; }
function bytes(n) {
  if (!n) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0; while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + ' ' + u[i];
}

// ---- API --------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(code, message) { super(message); this.code = code; }
}
async function api(method, path, body, type) {
  const opts = { method, credentials: 'same-origin', headers: { 'Accept': 'application/json' } };
  if (method !== 'GET') opts.headers['X-Console-CSRF'] = S.info ? S.info.csrf : '';
  if (body !== undefined) {
    opts.headers['Content-Type'] = type || 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch('/k8s' + path, opts);
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (r.status === 401) { signedOut(); throw new ApiError(401, 'signed out'); }
  if (!r.ok) throw new ApiError(r.status, (data && data.message) || ('HTTP ' + r.status));
  return data;
}
const patch = (path, body) => api('PATCH', path, body, 'application/merge-patch+json');

// A list, then a watch from its resourceVersion; `apply(type, obj)` for every change and
// `reset(items)` for every list. Relists when the watch ends; stops with the view.
function live(path, reset, apply) {
  const ctl = { stopped: false, abort: new AbortController() };
  S.stop.push(() => { ctl.stopped = true; ctl.abort.abort(); });
  (async () => {
    while (!ctl.stopped) {
      try {
        const list = await api('GET', path);
        if (ctl.stopped) return;
        reset(list.items || []);
        const sep = path.includes('?') ? '&' : '?';
        const url = '/k8s' + path + sep + 'watch=1&allowWatchBookmarks=true&timeoutSeconds=240' +
          '&resourceVersion=' + encodeURIComponent(list.metadata.resourceVersion || '');
        const r = await fetch(url, { credentials: 'same-origin', signal: ctl.abort.signal });
        if (!r.ok) throw new ApiError(r.status, 'watch: HTTP ' + r.status);
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i); buf = buf.slice(i + 1);
            if (!line.trim()) continue;
            const ev = JSON.parse(line);
            if (ev.type === 'ERROR') throw new ApiError(ev.object.code, ev.object.message);
            if (ev.type !== 'BOOKMARK') apply(ev.type, ev.object);
          }
        }
      } catch (e) {
        if (ctl.stopped) return;
        if (e.code === 403 || e.code === 401) { notice(e.message, true); return; }
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  })();
}

// Coalesces renders: at most one per animation frame however many watch events arrive.
function batched(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; fn(); });
  };
}

// ---- Session ----------------------------------------------------------------------------
async function loadSession() {
  const r = await fetch('/session', { credentials: 'same-origin' });
  if (!r.ok) { S.info = null; return false; }
  S.info = await r.json();
  try {
    await api('GET', HOSTS + '?limit=1');
    S.fleet = true;
  } catch (e) {
    S.fleet = false;
  }
  return true;
}
function signedOut() {
  S.info = null;
  if (location.hash !== '#/signin') location.hash = '#/signin';
}
function header() {
  const nav = $('nav');
  const who = $('who');
  if (!S.info) { put(nav); put(who); return; }
  const here = location.hash || '#/';
  const link = (href, text) => h('a', { href, class: here === href || here.startsWith(href + '/') ? 'here' : '' }, text);
  put(nav, 
    S.fleet ? link('#/fleet', 'Fleet') : null,
    link('#/claims', 'Claims'),
    link('#/jobs', 'Jobs'),
  );
  put(who, 
    h('span', { id: 'user', title: (S.info.groups || []).join(', ') }, S.info.user),
    h('button', { type: 'button', onclick: signOut }, 'Sign out'),
  );
}
async function signOut() {
  await fetch('/session', { method: 'DELETE', credentials: 'same-origin',
    headers: { 'X-Console-CSRF': S.info ? S.info.csrf : '' } });
  S.info = null;
  location.hash = '#/signin';
}

function signInView() {
  const token = h('textarea', { id: 'token', autocomplete: 'off', spellcheck: 'false',
    'aria-describedby': 'token-hint' });
  const file = h('input', { id: 'kubeconfig', type: 'file', accept: '.yaml,.yml,.conf,*' });
  const ns = h('input', { id: 'namespace', autocomplete: 'off' });
  const error = h('p', { id: 'signin-error', class: 'errorbox', hidden: true, role: 'alert' });
  const submit = async (ev) => {
    ev.preventDefault();
    error.hidden = true;
    const body = { token: token.value.trim(), namespace: ns.value.trim() };
    if (file.files && file.files[0]) body.kubeconfig = await file.files[0].text();
    if (body.kubeconfig) body.token = '';
    const r = await fetch('/session', { method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    token.value = '';
    if (!r.ok) {
      let m = 'HTTP ' + r.status;
      try { m = (await r.json()).message || m; } catch (e) { /* keep the status */ }
      error.textContent = m;
      error.hidden = false;
      return;
    }
    await loadSession();
    location.hash = S.fleet ? '#/fleet' : '#/claims';
  };
  show(h('h1', {}, 'Sign in'),
    h('form', { class: 'box', id: 'signin', onsubmit: submit },
      h('label', { for: 'token' }, 'Bearer token'),
      token,
      h('p', { class: 'hint', id: 'token-hint' },
        'A ServiceAccount token or your kubeconfig\'s token. It stays on the console server for the session and is never stored in this browser.'),
      h('label', { for: 'kubeconfig' }, 'or a kubeconfig file'),
      file,
      h('p', { class: 'hint' }, 'Its current context\'s token or client certificate (inline data only).'),
      h('label', { for: 'namespace' }, 'Namespace (for claims and jobs)'),
      ns,
      h('p', {}, h('button', { class: 'primary', type: 'submit', id: 'signin-submit' }, 'Sign in')),
      error));
  token.focus();
}

// ---- Fleet ------------------------------------------------------------------------------
function fleetView() {
  const hosts = new Map();
  const key = (o) => o.metadata.namespace + '/' + o.metadata.name;
  const prefs = { group: sessionStorage.getItem('group') || '', state: '', text: '' };
  const groupSel = h('select', { id: 'group-by' });
  const stateSel = h('select', { id: 'state-filter' });
  const text = h('input', { id: 'text-filter', type: 'search', placeholder: 'name or label' });
  const cards = h('div', { class: 'cards', id: 'counts' });
  const groups = h('div', { id: 'groups' });
  const legend = h('div', { class: 'legend' },
    ['available', 'provisioned', 'provisioning', 'unmanaged'].map((s) =>
      h('span', {}, h('i', { class: 'swatch ' + cls(s) }), s)),
    h('span', {}, h('i', { class: 'swatch err' }), 'in error'),
    h('span', {}, h('i', { class: 'swatch off' }), 'powered off (faded)'));
  groupSel.addEventListener('change', () => { prefs.group = groupSel.value; sessionStorage.setItem('group', prefs.group); draw(); });
  stateSel.addEventListener('change', () => { prefs.state = stateSel.value; draw(); });
  text.addEventListener('input', () => { prefs.text = text.value.toLowerCase(); draw(); });
  show(h('h1', {}, 'Fleet'), cards,
    h('div', { class: 'toolbar' },
      h('div', {}, h('label', { for: 'group-by' }, 'Group by'), groupSel),
      h('div', {}, h('label', { for: 'state-filter' }, 'State'), stateSel),
      h('div', {}, h('label', { for: 'text-filter' }, 'Filter'), text)),
    legend, groups);

  const options = (sel, values, current, all) => {
    const want = [all, ...values].join('\u0000');
    if (sel.dataset.values !== want) {
      sel.dataset.values = want;
      put(sel, h('option', { value: '' }, all),
        ...values.map((v) => h('option', { value: v }, v)));
    }
    sel.value = values.includes(current) ? current : '';
  };
  // Counts and the filters' choices: cheap, redone on every change.
  const drawCounts = batched(() => {
    const all = [...hosts.values()];
    const byState = new Map();
    let on = 0, errors = 0;
    const labelKeys = new Set(['namespace']);
    for (const o of all) {
      const st = stateOf(o);
      byState.set(st, (byState.get(st) || 0) + 1);
      if (o.status && o.status.poweredOn) on++;
      if (o.status && o.status.errorType) errors++;
      for (const k of Object.keys(o.metadata.labels || {})) labelKeys.add(k);
    }
    const counted = [...byState.entries()].sort((a, b) => b[1] - a[1]);
    put(cards,
      h('div', { class: 'card' }, h('b', { id: 'count-total' }, all.length), 'hosts'),
      h('div', { class: 'card' }, h('b', {}, on), 'powered on'),
      h('div', { class: 'card' }, h('b', {}, all.length - on), 'powered off'),
      h('div', { class: 'card' + (errors ? ' bad' : '') }, h('b', { id: 'count-errors' }, errors), 'in error'),
      ...counted.map(([s, n]) => h('div', { class: 'card' }, h('b', { 'data-state': s }, n), s)));
    options(groupSel, [...labelKeys].sort(), prefs.group, '(none)');
    options(stateSel, counted.map(([s]) => s).sort(), prefs.state, 'all states');
  });
  const visible = (o) => {
    if (prefs.state && stateOf(o) !== prefs.state) return false;
    if (!prefs.text) return true;
    const labels = Object.entries(o.metadata.labels || {}).map(([k, v]) => k + '=' + v).join(' ');
    return (o.metadata.name + ' ' + labels).toLowerCase().includes(prefs.text);
  };
  const groupOf = (o) => !prefs.group ? '' : prefs.group === 'namespace' ? o.metadata.namespace
    : ((o.metadata.labels || {})[prefs.group] || '(no ' + prefs.group + ')');
  // Where a host's tile goes: its group, or null when filtered out.
  const place = (o) => (visible(o) ? groupOf(o) : null);
  const tiles = new Map();
  let big = false;
  const paint = (t, o) => {
    const st = stateOf(o);
    const err = o.status && o.status.errorType;
    const off = !(o.status && o.status.poweredOn);
    const label = o.metadata.namespace + '/' + o.metadata.name + ': ' + st +
      (off ? ', off' : ', on') + (err ? ', ' + err : '');
    t.className = 'tile ' + cls(st) + (err ? ' err' : '') + (off ? ' off' : '') + (big ? ' big' : '');
    t.title = label;
    t.setAttribute('aria-label', label);
    t.dataset.state = st;
    t.textContent = big ? o.metadata.name : '';
  };
  // The grid, rebuilt when hosts come or go or move between groups; a host that only
  // changed state is repainted in place (see the watch below), so 10,000 tiles stay cheap.
  const drawGrid = batched(() => {
    const shown = [...hosts.entries()].filter(([, o]) => visible(o));
    big = shown.length <= 200;
    tiles.clear();
    const by = new Map();
    for (const [k, o] of shown) {
      const g = groupOf(o);
      if (!by.has(g)) by.set(g, []);
      by.get(g).push([k, o]);
    }
    const sections = [...by.keys()].sort().map((g) => {
      const members = by.get(g).sort((a, b) => a[1].metadata.name.localeCompare(b[1].metadata.name));
      return h('section', { class: 'group' },
        prefs.group ? h('h2', {}, prefs.group + ' = ' + g + ' (' + members.length + ')') : null,
        h('div', { class: 'grid', role: 'list' }, members.map(([k, o]) => {
          const t = h('a', { role: 'listitem', 'data-host': o.metadata.name,
            href: '#/host/' + encodeURIComponent(o.metadata.namespace) + '/' + encodeURIComponent(o.metadata.name) });
          paint(t, o);
          tiles.set(k, t);
          return t;
        })));
    });
    put(groups, ...(sections.length ? sections : [h('p', { class: 'muted' }, 'No hosts match.')]));
  });
  const draw = () => { drawCounts(); drawGrid(); };
  live(HOSTS, (items) => {
    hosts.clear();
    for (const o of items) hosts.set(key(o), o);
    draw();
  }, (type, o) => {
    const k = key(o);
    const old = hosts.get(k);
    if (type === 'DELETED') hosts.delete(k); else hosts.set(k, o);
    drawCounts();
    if (type === 'MODIFIED' && old && place(old) === place(o)) {
      const t = tiles.get(k);
      if (t) paint(t, o);
      return;
    }
    drawGrid();
  });
}

// ---- Host -------------------------------------------------------------------------------
const HINTS = {
  'registration error': 'The BMC could not be reached or refused the credentials: check spec.bmc.address and the credentials Secret.',
  'inspection error': 'Inspection failed: re-inspect once the cause is fixed.',
  'provisioning error': 'The image could not be written or booted: check the image URL and checksum, then change the image or remove it to retry.',
  'power management error': 'The BMC did not carry out a power change: check the BMC, then the host retries by itself.',
  'preparation error': 'Cleaning or preparation failed: check the BMC and the host\'s disks.',
  'detach error': 'The host could not be detached.',
  'servicing error': 'A day-2 change failed: check the firmware settings or updates asked for.',
};

function hostView(ns, name) {
  const base = '/apis/' + GROUP + '/namespaces/' + encodeURIComponent(ns);
  const path = base + '/baremetalhosts/' + encodeURIComponent(name);
  const body = h('div', { id: 'host' }, h('p', {}, 'Loading…'));
  const events = h('div', { id: 'events' });
  const jobs = h('div', { id: 'host-jobs' });
  const hw = h('div', { id: 'hardware' });
  show(h('p', {}, h('a', { href: '#/fleet' }, '← Fleet')), body,
    h('h2', {}, 'Hardware'), hw, h('h2', {}, 'Jobs on this host'), jobs, h('h2', {}, 'Events'), events);
  let host = null;
  const act = (label, danger, doIt) => h('button', { type: 'button', class: danger ? 'danger' : '',
    'data-action': label, onclick: async () => {
      if (!confirm(label + ' ' + ns + '/' + name + '?')) return;
      try { await doIt(); notice(label + ': asked; the host shows it when done.'); }
      catch (e) { notice(label + ' failed: ' + e.message, true); }
    } }, label);
  const annotate = (k, v) => patch(path, { metadata: { annotations: { [k]: v } } });
  const draw = batched(() => {
    if (!host) return;
    const st = host.status || {};
    const spec = host.spec || {};
    const ann = host.metadata.annotations || {};
    const state = stateOf(host);
    const facts = [
      ['State', h('span', { class: 'badge ' + cls(state), id: 'host-state' }, state)],
      ['Power', h('span', { id: 'host-power' }, st.poweredOn ? 'on' : 'off'), ],
      ['Wanted power', spec.online ? 'on' : 'off'],
      ['Operational status', st.operationalStatus || '–'],
      ['BMC', (spec.bmc && spec.bmc.address) || '–'],
      ['Boot MAC', spec.bootMACAddress || '–'],
      ['Image', (spec.image && spec.image.url) || (spec.customDeploy && spec.customDeploy.method) || '–'],
      ['Claimed by', spec.consumerRef ? (spec.consumerRef.kind + ' ' + (spec.consumerRef.namespace || ns) + '/' + spec.consumerRef.name) : '–'],
      ['Current operation', ann['ferrometal.io/operation'] || (ann['ferrometal.io/bmcjob'] ? 'BMCJob ' + ann['ferrometal.io/bmcjob'] : '–')],
      ['Labels', Object.entries(host.metadata.labels || {}).map(([k, v]) => k + '=' + v).join(', ') || '–'],
      ['Last updated', st.lastUpdated ? st.lastUpdated + ' (' + ago(st.lastUpdated) + ')' : '–'],
    ];
    const history = st.operationHistory || {};
    const phases = ['register', 'inspect', 'provision', 'deprovision']
      .map((p) => [p, history[p] || {}])
      .filter(([, m]) => m.start);
    const starts = phases.map(([, m]) => Date.parse(m.start));
    const ends = phases.map(([, m]) => m.end ? Date.parse(m.end) : Date.now());
    const t0 = Math.min(...starts), t1 = Math.max(...ends);
    const span = Math.max(1, t1 - t0);
    const bars = phases.map(([p, m]) => {
      const bar = h('span', {});
      bar.style.left = ((Date.parse(m.start) - t0) / span * 100) + '%';
      bar.style.width = (((m.end ? Date.parse(m.end) : Date.now()) - Date.parse(m.start)) / span * 100) + '%';
      return h('div', { class: 'phase' }, h('span', {}, p), h('div', { class: 'bar', role: 'img',
        'aria-label': p + ' took ' + fmtSecs(duration(m.start, m.end)) }, bar),
      h('span', {}, fmtSecs(duration(m.start, m.end)) + (m.end ? '' : ' so far')));
    });
    const detached = 'baremetalhost.metal3.io/detached' in ann;
    put(body,
      h('h1', {}, ns + ' / ' + name),
      st.errorType ? h('div', { class: 'errorbox', id: 'host-error', role: 'alert' },
        h('strong', {}, st.errorType + ': '), st.errorMessage || '',
        h('div', { class: 'hint' }, HINTS[st.errorType] || '')) : null,
      h('div', { class: 'actions' },
        act('Power on', false, () => patch(path, { spec: { online: true } })),
        act('Power off', true, () => patch(path, { spec: { online: false } })),
        act('Reboot', true, () => annotate('reboot.metal3.io', '')),
        act('Power cycle', true, () => annotate('ferrometal.io/operation', 'PowerCycle')),
        act('Re-inspect', false, () => annotate('inspect.metal3.io', '')),
        detached ? act('Attach', false, () => annotate('baremetalhost.metal3.io/detached', null))
          : act('Detach', true, () => annotate('baremetalhost.metal3.io/detached', ''))),
      h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
      h('h2', {}, 'Provisioning timeline'),
      h('div', { class: 'timeline', id: 'timeline' }, bars.length ? bars : h('p', { class: 'muted' }, 'No operations recorded yet.')),
      h('h2', {}, 'Conditions'),
      table(['Type', 'Status', 'Reason', 'Message', 'Since'], (st.conditions || []).map((c) =>
        [c.type, c.status, c.reason || '', c.message || '', ago(c.lastTransitionTime)])));
  });
  live(base + '/baremetalhosts?fieldSelector=' + encodeURIComponent('metadata.name=' + name), (items) => {
    host = items[0] || null;
    if (!host) put(body, h('p', {}, 'No such host (or you may not see it).'));
    draw(); refresh();
  }, (type, o) => {
    host = type === 'DELETED' ? null : o;
    draw(); refresh();
  });
  const refresh = batched(async () => {
    try {
      const ev = await api('GET', '/api/v1/namespaces/' + encodeURIComponent(ns) + '/events?fieldSelector=' +
        encodeURIComponent('involvedObject.name=' + name + ',involvedObject.kind=BareMetalHost'));
      const items = (ev.items || []).sort((a, b) => String(b.lastTimestamp || b.eventTime || '').localeCompare(String(a.lastTimestamp || a.eventTime || '')));
      put(events, table(['When', 'Type', 'Reason', 'Message', 'Count'], items.slice(0, 50).map((e) =>
        [ago(e.lastTimestamp || e.eventTime), e.type, e.reason, e.message, e.count || 1])));
    } catch (e) { put(events, h('p', { class: 'muted' }, 'Events: ' + e.message)); }
    try {
      const js = await api('GET', '/apis/ferrometal.io/v1alpha1/namespaces/' + encodeURIComponent(ns) + '/bmcjobs');
      const mine = (js.items || []).filter((j) => j.spec && j.spec.hostRef && j.spec.hostRef.name === name);
      put(jobs, jobTable(mine));
    } catch (e) { put(jobs, h('p', { class: 'muted' }, 'Jobs: ' + e.message)); }
    try {
      const data = await api('GET', base + '/hardwaredata/' + encodeURIComponent(name));
      put(hw, hardware(data.spec && data.spec.hardware));
    } catch (e) {
      put(hw, host && host.status && host.status.hardware ? hardware(host.status.hardware)
        : h('p', { class: 'muted' }, 'Not inspected yet.'));
    }
  });
}

function table(heads, rows) {
  if (!rows.length) return h('p', { class: 'muted' }, 'None.');
  return h('table', {}, h('thead', {}, h('tr', {}, heads.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}

function hardware(hw) {
  if (!hw) return h('p', { class: 'muted' }, 'Not inspected yet.');
  const cpu = hw.cpu || {};
  const sys = hw.systemVendor || {};
  return h('div', { class: 'cols' },
    h('dl', { class: 'facts' },
      h('dt', {}, 'System'), h('dd', {}, [sys.manufacturer, sys.productName].filter(Boolean).join(' ') || '–'),
      h('dt', {}, 'CPU'), h('dd', { id: 'hw-cpu' }, (cpu.count || '?') + ' × ' + (cpu.model || cpu.arch || 'CPU')),
      h('dt', {}, 'RAM'), h('dd', { id: 'hw-ram' }, hw.ramMebibytes ? mib(hw.ramMebibytes) : '–'),
      h('dt', {}, 'Firmware'), h('dd', {}, (hw.firmware && hw.firmware.bios && hw.firmware.bios.version) || '–')),
    h('div', {}, table(['Disk', 'Size', 'Type', 'Model'], (hw.storage || []).map((d) =>
      [d.name, bytes(d.sizeBytes), d.type || (d.rotational ? 'HDD' : 'SSD'), d.model || '']))),
    h('div', {}, table(['NIC', 'MAC', 'IP', 'Speed'], (hw.nics || []).map((n) =>
      [n.name, n.mac, n.ip || '', n.speedGbps ? n.speedGbps + ' Gb/s' : '']))));
}

// ---- Claims -----------------------------------------------------------------------------
function nsBar(onChange) {
  const input = h('input', { id: 'ns', value: S.info.namespace || '', placeholder: S.fleet ? 'all namespaces' : 'namespace' });
  input.addEventListener('change', () => { S.info.namespace = input.value.trim(); onChange(); });
  return h('div', { class: 'toolbar' }, h('div', {}, h('label', { for: 'ns' }, 'Namespace'), input));
}
function nsPath(group, plural) {
  const ns = S.info.namespace;
  return '/apis/' + group + (ns ? '/namespaces/' + encodeURIComponent(ns) : '') + '/' + plural;
}
function cond(o, type) {
  const c = ((o.status && o.status.conditions) || []).find((c) => c.type === type);
  return c ? c.status + (c.reason && c.status !== 'True' ? ' (' + c.reason + ')' : '') : '–';
}

function claimsView() {
  const claims = new Map();
  const list = h('div', { id: 'claims' });
  const detail = h('div', { id: 'claim-hardware' });
  const draw = batched(() => {
    const items = [...claims.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    put(list, table(['Claim', 'Host', 'Associated', 'Provisioned', 'Ready', 'Power', 'Message', ''],
      items.map((c) => {
        const path = '/apis/' + GROUP + '/namespaces/' + encodeURIComponent(c.metadata.namespace) + '/hostclaims/' + encodeURIComponent(c.metadata.name);
        const msg = ((c.status && c.status.conditions) || []).filter((x) => x.status !== 'True' && x.message).map((x) => x.message)
          .filter((m, i, all) => all.indexOf(m) === i).join('; ');
        return [
          h('span', { 'data-claim': c.metadata.name }, c.metadata.namespace + '/' + c.metadata.name),
          (c.status && c.status.bareMetalHost && c.status.bareMetalHost.name) || '–',
          cond(c, 'Associated'), cond(c, 'Provisioned'), cond(c, 'Ready'),
          c.status && c.status.poweredOn ? 'on' : 'off',
          msg,
          h('span', { class: 'actions' },
            h('button', { type: 'button', onclick: () => showHardware(c, detail) }, 'Hardware'),
            h('button', { type: 'button', onclick: async () => {
              if (!confirm('Power ' + (c.spec.poweredOn ? 'off' : 'on') + ' ' + c.metadata.name + '?')) return;
              try { await patch(path, { spec: { poweredOn: !c.spec.poweredOn } }); } catch (e) { notice(e.message, true); }
            } }, c.spec && c.spec.poweredOn ? 'Power off' : 'Power on'),
            h('button', { type: 'button', class: 'danger', 'data-delete': c.metadata.name, onclick: async () => {
              if (!confirm('Delete claim ' + c.metadata.name + '? The host is deprovisioned and released.')) return;
              try { await api('DELETE', path); } catch (e) { notice(e.message, true); }
            } }, 'Delete')),
        ];
      })));
  });
  const start = () => {
    S.stop.splice(0).forEach((f) => f());
    show(h('h1', {}, 'Claims'), nsBar(start), list, detail, claimForm());
    live(nsPath(GROUP, 'hostclaims'), (items) => {
      claims.clear();
      for (const c of items) claims.set(c.metadata.namespace + '/' + c.metadata.name, c);
      draw();
    }, (type, c) => {
      const k = c.metadata.namespace + '/' + c.metadata.name;
      if (type === 'DELETED') claims.delete(k); else claims.set(k, c);
      draw();
    });
  };
  start();
}

async function showHardware(claim, into) {
  const ref = claim.status && claim.status.hardwareData;
  if (!ref || !ref.name) { put(into, h('p', { class: 'muted' }, 'No hardware copy yet.')); return; }
  try {
    const d = await api('GET', '/apis/' + GROUP + '/namespaces/' + encodeURIComponent(ref.namespace || claim.metadata.namespace) + '/hardwaredata/' + encodeURIComponent(ref.name));
    put(into, h('h2', {}, 'Hardware of ' + claim.metadata.name), hardware(d.spec && d.spec.hardware));
  } catch (e) { put(into, h('p', { class: 'muted' }, 'Hardware: ' + e.message)); }
}

function field(id, label, attrs) {
  return h('div', {}, h('label', { for: id }, label), h('input', Object.assign({ id, name: id }, attrs || {})));
}
function claimForm() {
  const form = h('form', { class: 'box', id: 'claim-form' },
    h('h2', {}, 'New claim'),
    h('div', { class: 'row' }, field('claim-name', 'Name', { required: true, pattern: '[a-z0-9]([-a-z0-9]*[a-z0-9])?' }),
      field('claim-selector', 'Host selector (key=value, comma separated)', { placeholder: 'pool=web' })),
    h('div', { class: 'row' }, field('claim-image', 'Image URL', { type: 'url' }),
      h('div', {}, h('label', { for: 'claim-format' }, 'Format'),
        h('select', { id: 'claim-format' }, ['raw', 'qcow2', 'live-iso'].map((f) => h('option', { value: f }, f))))),
    h('div', { class: 'row' }, field('claim-checksum', 'Checksum'),
      h('div', {}, h('label', { for: 'claim-checksum-type' }, 'Checksum type'),
        h('select', { id: 'claim-checksum-type' }, ['sha256', 'sha512', 'md5'].map((f) => h('option', { value: f }, f))))),
    h('div', { class: 'row' }, field('claim-user-data', 'User-data Secret (in this namespace)'),
      h('div', {}, h('label', { for: 'claim-power' }, 'Powered on'), h('input', { id: 'claim-power', type: 'checkbox', checked: true }))),
    h('p', {}, h('button', { class: 'primary', type: 'submit' }, 'Create claim')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const v = (id) => $(id).value.trim();
    if (!S.info.namespace) { notice('Choose a namespace first.', true); return; }
    const labels = {};
    for (const kv of v('claim-selector').split(',').map((s) => s.trim()).filter(Boolean)) {
      const [k, ...rest] = kv.split('=');
      labels[k.trim()] = rest.join('=').trim();
    }
    const spec = { poweredOn: $('claim-power').checked, hostSelector: { matchLabels: labels } };
    if (v('claim-image')) {
      spec.image = { url: v('claim-image'), format: v('claim-format') };
      if (v('claim-format') !== 'live-iso') {
        spec.image.checksum = v('claim-checksum');
        spec.image.checksumType = v('claim-checksum-type');
      }
    }
    if (v('claim-user-data')) spec.userData = { name: v('claim-user-data') };
    try {
      await api('POST', '/apis/' + GROUP + '/namespaces/' + encodeURIComponent(S.info.namespace) + '/hostclaims',
        { apiVersion: GROUP, kind: 'HostClaim', metadata: { name: v('claim-name') }, spec });
      notice('Claim ' + v('claim-name') + ' created.');
      form.reset();
    } catch (e) { notice('Creating the claim failed: ' + e.message, true); }
  });
  return form;
}

// ---- Jobs -------------------------------------------------------------------------------
function describeTask(t) {
  if (t.powerAction) return 'power ' + t.powerAction;
  if (t.oneTimeBootDeviceAction) return 'boot once from ' + (t.oneTimeBootDeviceAction.device || []).join('/') + (t.oneTimeBootDeviceAction.efiBoot ? ' (EFI)' : '');
  if (t.virtualMediaAction) return t.virtualMediaAction.mediaURL ? 'insert ' + t.virtualMediaAction.mediaURL : 'eject media';
  return '?';
}
function jobTable(items) {
  return table(['Job', 'Host', 'Phase', 'Tasks', 'Started', 'Message'], items.map((j) => {
    const st = j.status || {};
    const tasks = (j.spec.tasks || []).map((t, i) => describeTask(t) + ': ' + (((st.tasks || [])[i] || {}).state || 'Pending'));
    const failed = ((st.conditions || []).find((c) => c.type === 'Failed' && c.status === 'True') || {}).message;
    return [h('span', { 'data-job': j.metadata.name }, j.metadata.namespace + '/' + j.metadata.name),
      j.spec.hostRef.name, h('span', { 'data-phase': st.phase || 'Waiting' }, st.phase || 'Waiting'),
      tasks.join(' → '), ago(st.startTime), failed || ''];
  }));
}
function jobsView() {
  const jobs = new Map(), rufio = new Map();
  const list = h('div', { id: 'jobs' });
  const rlist = h('div', { id: 'rufio-jobs' });
  const draw = batched(() => {
    const sorted = (m) => [...m.values()].sort((a, b) => String(b.metadata.creationTimestamp).localeCompare(String(a.metadata.creationTimestamp)));
    put(list, jobTable(sorted(jobs)));
    put(rlist, table(['Job', 'Machine', 'Tasks', 'Outcome'], sorted(rufio).map((j) => {
      const c = ((j.status && j.status.conditions) || []).filter((x) => x.status === 'True').map((x) => x.type).join(', ');
      return [j.metadata.namespace + '/' + j.metadata.name, (j.spec.machineRef || {}).name || '',
        (j.spec.tasks || []).map((t) => Object.keys(t).join('+')).join(' → '), c || 'Running'];
    })));
  });
  const watchInto = (m) => [(items) => { m.clear(); for (const o of items) m.set(o.metadata.uid, o); draw(); },
    (type, o) => { if (type === 'DELETED') m.delete(o.metadata.uid); else m.set(o.metadata.uid, o); draw(); }];
  const start = () => {
    S.stop.splice(0).forEach((f) => f());
    show(h('h1', {}, 'Jobs'), nsBar(start), h('h2', {}, 'BMCJobs'), list, jobForm(),
      h('h2', {}, 'Rufio Jobs'), rlist);
    live(nsPath('ferrometal.io/v1alpha1', 'bmcjobs'), ...watchInto(jobs));
    live(nsPath('bmc.tinkerbell.org/v1alpha1', 'jobs'), ...watchInto(rufio));
  };
  start();
}
function jobForm() {
  const task = (i) => h('div', { class: 'row' },
    h('div', {}, h('label', { for: 'task-' + i }, 'Task ' + (i + 1)),
      h('select', { id: 'task-' + i }, [['', '(none)'], ['power:off', 'power off'], ['power:on', 'power on'],
        ['power:cycle', 'power cycle'], ['power:reset', 'reset'], ['power:soft', 'soft off'], ['power:status', 'power status'],
        ['boot:pxe', 'boot once from PXE'], ['boot:disk', 'boot once from disk'], ['boot:cdrom', 'boot once from CD'],
        ['media:eject', 'eject virtual media']].map(([v, t]) => h('option', { value: v }, t)))));
  const form = h('form', { class: 'box', id: 'job-form' }, h('h2', {}, 'Run a BMCJob'),
    h('div', { class: 'row' }, field('job-name', 'Name', { required: true }), field('job-host', 'Host', { required: true })),
    task(0), task(1), task(2),
    h('p', {}, h('label', { for: 'job-restore' }, 'Restore the desired state afterwards'), h('input', { id: 'job-restore', type: 'checkbox', checked: true })),
    h('p', {}, h('button', { class: 'primary', type: 'submit' }, 'Start job')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!S.info.namespace) { notice('Choose a namespace first.', true); return; }
    const tasks = [0, 1, 2].map((i) => $('task-' + i).value).filter(Boolean).map((v) => {
      const [kind, arg] = v.split(':');
      if (kind === 'power') return { powerAction: arg };
      if (kind === 'boot') return { oneTimeBootDeviceAction: { device: [arg], efiBoot: true } };
      return { virtualMediaAction: { mediaURL: '' } };
    });
    if (!tasks.length) { notice('Choose at least one task.', true); return; }
    if (!confirm('Run ' + tasks.map(describeTask).join(', ') + ' on ' + $('job-host').value + '?')) return;
    try {
      await api('POST', '/apis/ferrometal.io/v1alpha1/namespaces/' + encodeURIComponent(S.info.namespace) + '/bmcjobs', {
        apiVersion: 'ferrometal.io/v1alpha1', kind: 'BMCJob', metadata: { name: $('job-name').value.trim() },
        spec: { hostRef: { name: $('job-host').value.trim() }, tasks, restoreDesiredState: $('job-restore').checked } });
      notice('Job started.');
      form.reset();
    } catch (e) { notice('Starting the job failed: ' + e.message, true); }
  });
  return form;
}

// ---- Routing ----------------------------------------------------------------------------
async function route() {
  S.stop.splice(0).forEach((f) => f());
  notice('');
  const parts = (location.hash || '#/').slice(2).split('/').map(decodeURIComponent);
  if (!S.info && parts[0] !== 'signin') {
    if (!(await loadSession())) { location.hash = '#/signin'; return; }
  }
  header();
  switch (parts[0]) {
    case 'signin': return signInView();
    case 'host': return hostView(parts[1], parts[2]);
    case 'claims': return claimsView();
    case 'jobs': return jobsView();
    case 'fleet': if (S.fleet) return fleetView(); break;
    default: break;
  }
  location.hash = S.fleet ? '#/fleet' : '#/claims';
}
// Kept for whoever debugs the page (and shown by the browser tests when a check fails).
window.consoleErrors = [];
window.addEventListener('error', (e) => window.consoleErrors.push(String(e.message)));
window.addEventListener('unhandledrejection', (e) => window.consoleErrors.push(String(e.reason)));
window.addEventListener('hashchange', route);
route();
