// The page: log in, pick a transport, share your position in a group, chat in a room, get
// notified. All live traffic goes through one connection of the client library (see live.js
// for the interface); switching transports hands the topics and their positions to a new
// one, which resumes where the old one stopped.
import { transports, transportById, Live } from './live.js';
import { api, namePattern } from './api.js';
import { MapView, colorOf } from './map.js';
import { ChatView } from './chat.js';
import { OlderMessages } from './older.js';
import { Panel } from './panel.js';

const $ = (s) => document.querySelector(s);

const app = {
  user: '',
  token: '',
  t: null, // the transport
  group: '',
  room: '',
  member: false, // the server counts us in app.room (as far as we know)
  entered: null, // {offset, epoch} of our ENTER in the room
  entering: null, // the ENTER in flight
  joining: null, // enterRoom in progress
  leaving: false,
  notes: { unread: 0, read: 0, epoch: '', items: [] },
  lastMove: 0,
  moveTimer: 0,
  geoWatch: 0,
};
const panel = new Panel($('#conn'));
const chat = new ChatView({ log: $('#chat-log'), members: $('#room-members'), title: $('#chat-room') });
const older = new OlderMessages(chat, () => app.token);
const map = new MapView($('#map'), $('#map-members'), { onMove: (x, y, final) => moved(x, y, final) });
window.rtlab = { app, map, chat, panel }; // for the console and the browser tests
chat.reset('', '');

const topicOf = { location: (g) => `location/${g}`, chat: (r) => `chat/${r}`, notify: (u) => `notify/${u}` };

// ---- login ----------------------------------------------------------------------------------

async function login(name) {
  app.user = name;
  try {
    const r = await api('POST', '/api/login', { body: { user: name } });
    app.token = r.token;
    app.user = r.user || name;
  } catch (e) {
    app.token = ''; // open dev mode without login still works: we name ourselves in the data
    panel.event(`login failed (${e.message}); going on without a token`, 'warn');
  }
  sessionStorage.setItem('rtlab.user', app.user);
  $('#login-form').hidden = true;
  $('#who').hidden = false;
  $('#who-name').textContent = app.user;
  $('#who-dot').style.background = colorOf(app.user);
  map.reset(app.user);
  startTransport(selectedTransport());
  await Promise.all([joinGroup($('#group').value), loadNotifications()]);
}

// authorize gives the transports a valid token before they reconnect. A server without a
// configured secret signs tokens with a key of its own process, so after a restart our token
// is refused: we log in again under the same name. EventSource and WebSocket hide the HTTP
// status of a refused handshake, so we ask an authenticated endpoint instead.
let authCheck = null;
function authorize() {
  if (!app.token) return Promise.resolve('');
  authCheck ??= (async () => {
    try {
      await api('GET', '/api/notifications', { token: app.token });
    } catch (e) {
      if (e.status === 401) {
        const r = await api('POST', '/api/login', { body: { user: app.user } });
        app.token = r.token;
        panel.event('token refused by the server: logged in again', 'warn');
      }
    }
    return app.token;
  })().finally(() => setTimeout(() => { authCheck = null; }, 500));
  return authCheck;
}

async function logout() {
  if (app.room) await leaveRoom();
  if (app.token) api('POST', '/api/logout', { token: app.token }).catch(() => {});
  app.t?.close();
  app.t = null;
  sessionStorage.removeItem('rtlab.user');
  location.assign('/');
}

// ---- transport -----------------------------------------------------------------------------

function selectedTransport() {
  return document.querySelector('input[name=transport]:checked')?.value || 'ws';
}

function startTransport(id) {
  const T = transportById(id);
  const old = app.t;
  const topics = old ? [...old.topics] : [];
  const since = old ? new Map(old.positions) : new Map();
  old?.close();
  const t = new Live(T.id, { token: app.token, user: app.user, authorize });
  app.t = t;
  localStorage.setItem('rtlab.transport', T.id);
  document.querySelector(`input[name=transport][value=${T.id}]`).checked = true;
  document.body.dataset.transport = T.id;
  panel.watch(t, T.label);
  if (old) panel.event(`switched to ${T.label}, resuming ${topics.length} topic${topics.length === 1 ? '' : 's'}`);
  t.on('state', (s) => {
    if (t !== app.t) return;
    panel.state(s);
    panel.event(s.detail ? `${s.state}: ${s.detail}` : s.state, `state-${s.state}`);
    if (s.state === 'live') onLive(t);
  });
  t.on('message', (p) => { if (t === app.t) { route(p); panel.render(); } });
  t.on('gap', (g) => { if (t === app.t) onGap(g); });
  t.on('error', (e) => { if (t === app.t) panel.event(`error${e.topic ? ' on ' + e.topic : ''}: ${e.reason}`, 'bad'); });
  // Presence: a member whose last page left the group leaves the map.
  t.on('leave', (l) => {
    if (t !== app.t || l.topic !== topicOf.location(app.group) || l.user === app.user) return;
    map.remove(l.user);
    panel.event(`${l.user} left the group`);
  });
  t.connect(topics, since);
}

// onLive runs whenever the transport is (again) connected.
let lastLive = { t: null, reconnects: -1 };
function onLive(t) {
  const first = lastLive.t !== t;
  const again = !first && t.reconnects !== lastLive.reconnects;
  lastLive = { t, reconnects: t.reconnects };
  if (!first && !again) return;
  if (app.room) ensureEntered();
  if (app.group) publishPosition(); // new transport, or the group may have lost our position
}

function route(p) {
  if (p.topic === topicOf.location(app.group)) {
    const d = p.data || {};
    map.update(memberOf(p), d, { time: p.time, sentAt: Number.isFinite(d.sentAt) ? d.sentAt : undefined });
  } else if (p.topic === topicOf.chat(app.room)) {
    chat.add(p);
    if (p.type === 'ENTER' || p.type === 'LEAVE' || p.type === 'OWNER') refreshMembers();
    if (p.type === 'LEAVE' && p.sender === app.user && !app.leaving && app.entered &&
        (p.epoch !== app.entered.epoch || p.offset > app.entered.offset)) {
      // The server let us go (the connection we entered on dropped) but we are still here.
      app.member = false;
      enter().catch(() => {});
    }
  } else if (p.topic === topicOf.notify(app.user)) {
    if (p.epoch !== app.notes.epoch) { app.notes.epoch = p.epoch; app.notes.read = 0; }
    if (p.offset > app.notes.read) app.notes.unread++;
    app.notes.items.unshift(p);
    renderNotes();
  }
}

function onGap(g) {
  panel.event(`history gone on ${g.topic}: ${g.reason}`, 'warn');
  if (g.topic !== topicOf.notify(app.user)) { // notifications are reloaded below; no banner
    // Only a new epoch means the server lost history; "publications 3 to 17 of epoch … are
    // no longer retained" is older history, trimmed while this node was cut off.
    const lost = /epoch changed|is gone\)/.test(g.reason || '');
    notice(g.topic, `History gone on ${g.topic}: ${g.reason}. ${lost
      ? 'The server lost its history (a restart without durable storage); what was published while you were away cannot be replayed.'
      : 'What was published while you were away cannot be replayed.'}`);
  }
  if (g.topic === topicOf.chat(app.room)) {
    chat.gap(g);
    chat.setMembers({ members: [] }); // the server's list went with the history
    app.entered = null;
    app.member = false;
    ensureEntered();
  } else if (g.topic === topicOf.location(app.group)) {
    map.markStale();
    publishPosition();
  } else if (g.topic === topicOf.notify(app.user)) {
    loadNotifications(false);
  }
}

// memberOf says whose position a publication is, as the server does for group state.
function memberOf(p) {
  if (p.sender) return p.sender;
  const d = p.data || {};
  for (const k of ['member', 'userId', 'user', 'sender', 'name', 'id']) if (d[k]) return String(d[k]);
  return 'anonymous';
}

// ---- map -----------------------------------------------------------------------------------

async function joinGroup(g) {
  if (!namePattern.test(g)) return;
  if (app.group) app.t.unsubscribe(topicOf.location(app.group));
  app.group = g;
  map.reset(app.user);
  let pos;
  try {
    const st = await api('GET', `/api/location/${g}`, { token: app.token });
    for (const m of st.members) map.update(m.member, m.data, { time: m.time });
    pos = { offset: st.offset, epoch: st.epoch };
  } catch (e) {
    panel.event(`group state of ${g}: ${e.message}`, 'bad');
  }
  app.t.subscribe(topicOf.location(g), pos, { presence: true });
  const me = map.members.get(app.user);
  if (!me || me.x === undefined) map.moveMe(10 + Math.random() * 80, 10 + Math.random() * 80, true);
  else publishPosition();
}

// moved is called while you drag: publish at most every 100 ms, and always the final place.
function moved(x, y, final) {
  if (!app.group || !app.t) return;
  clearTimeout(app.moveTimer);
  const wait = 100 - (Date.now() - app.lastMove);
  if (final || wait <= 0) publishPosition();
  else app.moveTimer = setTimeout(publishPosition, wait);
}

// publishPosition sends where you are. One position is in flight at a time and a newer one
// waits for it: HTTP requests sent together may be published in any order, and the last one
// published is where the others see you.
let positionInFlight = false, positionWaiting = false;
function publishPosition() {
  const me = map.members.get(app.user);
  if (!me || !app.group || !app.t || app.t.state !== 'live') return; // onLive publishes it
  if (positionInFlight) {
    positionWaiting = true;
    return;
  }
  positionInFlight = true;
  app.lastMove = Date.now();
  me.sentAt = Date.now();
  const data = me.x !== undefined
    ? { x: me.x, y: me.y, member: app.user, sentAt: me.sentAt }
    : { lat: me.lat, lng: me.lng, accuracy: me.accuracy, member: app.user, sentAt: me.sentAt };
  app.t.publish(topicOf.location(app.group), data)
    .catch((e) => panel.event(`position not sent: ${e.message}`, 'bad'))
    .finally(() => {
      positionInFlight = false;
      if (positionWaiting) {
        positionWaiting = false;
        publishPosition();
      }
    });
}

function toggleGeo(on) {
  if (!on) {
    navigator.geolocation?.clearWatch(app.geoWatch);
    map.moveMe(50, 50, true);
    return;
  }
  if (!navigator.geolocation) {
    panel.event('this browser has no geolocation', 'bad');
    $('#geo').checked = false;
    return;
  }
  app.geoWatch = navigator.geolocation.watchPosition((p) => {
    const d = { lat: p.coords.latitude, lng: p.coords.longitude, accuracy: Math.round(p.coords.accuracy) };
    map.update(app.user, d, {});
    publishPosition();
  }, (err) => {
    panel.event(`geolocation: ${err.message}`, 'bad');
    $('#geo').checked = false;
  }, { enableHighAccuracy: true, maximumAge: 5000 });
}

// ---- chat ----------------------------------------------------------------------------------

// enterRoom loads the room's history, subscribes from its end and says ENTER. While it runs,
// app.joining holds it, so ensureEntered (on a live state meanwhile) waits instead of entering too.
function enterRoom(room) {
  if (!namePattern.test(room) || !app.t) return Promise.resolve();
  const p = joinRoom(room).finally(() => { if (app.joining === p) app.joining = null; });
  app.joining = p;
  return p;
}

async function joinRoom(room) {
  if (app.room) await leaveRoom();
  app.room = room;
  const topic = topicOf.chat(room);
  chat.reset(room, app.user);
  let pos;
  try {
    // The newest page; older ones load on scroll (older.js).
    const h = await api('GET', `/api/topics/${topic}/history?before=0&limit=50`, { token: app.token });
    for (const p of h.publications.toReversed()) chat.add(p);
    const last = h.publications[0];
    pos = { offset: last ? last.offset : h.offset, epoch: h.epoch };
    older.start(topic, h.next);
  } catch (e) {
    pos = { offset: 0, epoch: '' }; // the transport replays what is retained
    chat.system(`history not loaded (${e.message}); replaying what the server keeps`);
  }
  app.t.subscribe(topic, pos);
  setChatEnabled(true);
  await enter().catch((e) => chat.system(`could not enter: ${e.message}; retrying when connected`));
  refreshMembers();
}

// enter says ENTER; app.entering lets ensureEntered wait for one in flight instead of asking
// for the members before the server has applied it (and entering twice).
function enter() {
  const topic = topicOf.chat(app.room);
  app.entering = app.t.publish(topic, { type: 'ENTER', sender: app.user, roomId: app.room }, 'ENTER')
    .then((r) => {
      if (topic === topicOf.chat(app.room)) Object.assign(app, { entered: r, member: true });
      return r;
    });
  return app.entering;
}

// ensureEntered enters again when the room does not list us: after the server restarted, or
// after the connection we entered on was replaced.
let ensuring = null;
function ensureEntered() {
  ensuring ??= (async () => {
    await app.joining?.catch(() => {});
    await app.entering?.catch(() => {});
    const room = app.room;
    let info = null;
    try {
      info = await api('GET', `/api/chat/${room}/members`, { token: app.token });
    } catch (e) {
      if (e.status !== 404) return; // offline: the next live state tries again
      info = { members: [] }; // nobody has entered the room (the server forgot it)
    }
    if (room !== app.room) return;
    chat.setMembers(info);
    if (info.members.some((m) => m.user === app.user)) app.member = true;
    else await enter().catch((e) => panel.event(`ENTER failed: ${e.message}`, 'bad'));
  })().finally(() => { ensuring = null; });
  return ensuring;
}

async function leaveRoom() {
  const topic = topicOf.chat(app.room);
  app.leaving = true;
  older.stop();
  try {
    await app.t.publish(topic, { type: 'LEAVE', sender: app.user, roomId: app.room }, 'LEAVE');
  } catch { /* not entered or offline: nothing to undo */ }
  app.t.unsubscribe(topic);
  app.room = '';
  app.entered = null;
  app.member = false;
  app.leaving = false;
  chat.reset('', app.user);
  setChatEnabled(false);
}

let membersTimer = 0;
function refreshMembers() {
  clearTimeout(membersTimer);
  membersTimer = setTimeout(async () => {
    if (!app.room) return;
    try {
      chat.setMembers(await api('GET', `/api/chat/${app.room}/members`, { token: app.token }));
    } catch { /* the next ENTER or LEAVE refreshes again */ }
  }, 100);
}

// talk says TALK, entering first when the server may not count us in the room (TALK needs
// ENTER). A refusal because we were not in after all (the server restarted, or dropped the
// connection we entered on, and we had not heard yet) enters and tries once more.
async function talk(text) {
  const data = { type: 'TALK', sender: app.user, roomId: app.room, message: text, sentAt: Date.now() };
  for (let attempt = 1; ; attempt++) {
    await whenLive(5000);
    if (!app.member) await ensureEntered();
    try {
      await app.t.publish(topicOf.chat(app.room), data, 'TALK');
      return true;
    } catch (e) {
      if (e.code === 'forbidden' && attempt === 1) {
        app.member = false;
        continue;
      }
      chat.system(`not sent: ${e.message}`, 'err');
      return false;
    }
  }
}

// whenLive resolves once the transport is live, or after ms.
function whenLive(ms) {
  const t = app.t;
  if (t.state === 'live') return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => { off(); resolve(); }, ms);
    const off = t.on('state', (s) => { if (s.state === 'live') { clearTimeout(timer); off(); resolve(); } });
  });
}

function setChatEnabled(on) {
  $('#talk').disabled = !on;
  $('#talk-form button').disabled = !on;
  $('#leave').disabled = !on;
}

// ---- notifications -------------------------------------------------------------------------

async function loadNotifications(subscribe = true) {
  const q = app.token ? '' : `?user=${encodeURIComponent(app.user)}`;
  try {
    const st = await api('GET', '/api/notifications' + q, { token: app.token });
    app.notes = { unread: st.unread, read: st.read, epoch: st.epoch, items: st.notifications.reverse() };
    renderNotes();
    if (subscribe) app.t.subscribe(topicOf.notify(app.user), { offset: st.offset, epoch: st.epoch });
  } catch (e) {
    panel.event(`notifications: ${e.message}`, 'bad');
    if (subscribe) app.t.subscribe(topicOf.notify(app.user));
  }
}

function renderNotes() {
  const badge = $('#badge');
  badge.hidden = app.notes.unread === 0;
  badge.textContent = app.notes.unread > 99 ? '99+' : app.notes.unread;
  const items = app.notes.items.slice(0, 20).map((p) => {
    const d = p.data || {};
    const li = document.createElement('li');
    li.classList.toggle('unread', p.offset > app.notes.read);
    const b = document.createElement('strong');
    b.textContent = `${d.from || p.sender} in #${d.room}`;
    li.append(b, ` ${d.message || ''}`);
    return li;
  });
  if (!items.length) {
    const li = document.createElement('li');
    li.className = 'muted';
    li.textContent = 'Nothing yet. When someone talks in a room you own, you hear it here.';
    items.push(li);
  }
  $('#notify-list').replaceChildren(...items);
}

async function toggleNotes() {
  const pop = $('#notify-panel');
  pop.hidden = !pop.hidden;
  $('#bell').setAttribute('aria-expanded', String(!pop.hidden));
  if (pop.hidden) return;
  renderNotes();
  const q = app.token ? '' : `?user=${encodeURIComponent(app.user)}`;
  try {
    const st = await api('POST', '/api/notifications/read' + q, { token: app.token });
    app.notes.unread = st.unread;
    app.notes.read = st.read;
    renderNotes();
  } catch (e) {
    panel.event(`marking notifications read: ${e.message}`, 'bad');
  }
}

// ---- notices -------------------------------------------------------------------------------

function notice(key, text) {
  const box = $('#notices');
  let n = box.querySelector(`[data-key="${CSS.escape(key)}"]`);
  if (!n) {
    n = document.createElement('div');
    n.className = 'notice warn';
    n.dataset.key = key;
    const p = document.createElement('p');
    const x = document.createElement('button');
    x.type = 'button';
    x.className = 'close';
    x.setAttribute('aria-label', 'dismiss');
    x.textContent = '×';
    x.onclick = () => n.remove();
    n.append(p, x);
    box.append(n);
  }
  n.querySelector('p').textContent = text;
}

// ---- wiring --------------------------------------------------------------------------------

$('#login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  login($('#login-name').value.trim());
});
$('#logout').addEventListener('click', logout);
$('#bell').addEventListener('click', toggleNotes);
$('#picker').addEventListener('change', (e) => { if (app.user) startTransport(e.target.value); });
$('#group-form').addEventListener('submit', (e) => { e.preventDefault(); if (app.user) joinGroup($('#group').value.trim()); });
$('#room-form').addEventListener('submit', (e) => { e.preventDefault(); if (app.user) enterRoom($('#room').value.trim()); });
$('#leave').addEventListener('click', () => app.room && leaveRoom());
$('#geo').addEventListener('change', (e) => toggleGeo(e.target.checked));
// Messages go out one after another, so they are published in the order you typed them.
let talking = Promise.resolve();
$('#talk-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = $('#talk');
  const text = input.value.trim();
  if (!text || !app.room) return;
  input.value = '';
  talking = talking.then(() => talk(text)).then((ok) => { if (!ok && !input.value) input.value = text; });
});

// Leaving the page: WebSocket and STOMP sessions are left by the server when they drop; over
// HTTP transports we say LEAVE ourselves.
addEventListener('pagehide', () => {
  if (!app.room || !app.t || app.t.id === 'ws' || app.t.id === 'stomp') return;
  fetch(`/api/publish/chat/${app.room}?type=LEAVE`, {
    method: 'POST', keepalive: true,
    headers: { 'Content-Type': 'application/json', ...(app.token ? { Authorization: 'Bearer ' + app.token } : {}) },
    body: JSON.stringify({ type: 'LEAVE', sender: app.user, roomId: app.room }),
  });
});

// Start: ?user=&transport=&group=&room= log in and join at once (handy for links and tests).
const q = new URLSearchParams(location.search);
const initial = q.get('transport') || localStorage.getItem('rtlab.transport');
if (initial && transports.some((t) => t.id === initial)) document.querySelector(`input[name=transport][value=${initial}]`).checked = true;
if (q.get('group')) $('#group').value = q.get('group');
if (q.get('room')) $('#room').value = q.get('room');
const name = q.get('user') || sessionStorage.getItem('rtlab.user');
if (name && namePattern.test(name)) {
  $('#login-name').value = name;
  login(name).then(() => { if (q.get('room')) enterRoom(q.get('room')); });
} else {
  $('#login-name').focus();
}
