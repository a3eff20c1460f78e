// rtlab.js against a real server, on every transport Node speaks (WebSocket and EventSource
// from the ws and eventsource packages, which Node 20 lacks as globals).
//
// The server is given by the environment (clients/js/node_test.go sets it up):
//   RTLAB_URL        the server
//   RTLAB_NOWS_URL   the same server behind a proxy that refuses WebSocket upgrades (403)
//   RTLAB_API_KEY    its --api-key
//   RTLAB_HISTORY    its --history-size
//   RTLAB_AUTH_URL   a server started with --auth-secret RTLAB_AUTH_SECRET
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { EventSource } from 'eventsource';
import { Client } from '../rtlab.js';
import { namer, waitFor, serverAPI, login as loginAs, mint as mintToken } from './helpers.mjs';

const base = process.env.RTLAB_URL;
const noWS = process.env.RTLAB_NOWS_URL;
const apiKey = process.env.RTLAB_API_KEY;
const history = Number(process.env.RTLAB_HISTORY || 100);
const authBase = process.env.RTLAB_AUTH_URL;
const authSecret = process.env.RTLAB_AUTH_SECRET;
const skip = base ? false : 'RTLAB_URL is not set (run through go test ./clients/js/)';
const opts = { WebSocket, EventSource, pollInterval: 100, longPollWait: 5, minBackoff: 50, maxBackoff: 500 };
const transports = ['ws', 'stomp', 'sse', 'longpoll', 'shortpoll'];
let n = 0; // numbers user names
const fresh = namer('node');
const server = (method, path, body) => serverAPI(base, apiKey, method, path, body);
const login = (user) => loginAs(base, user);
const mint = (user, ttl) => mintToken(authSecret, user, ttl);

function connected(c) {
  if (c.state === 'connected') return Promise.resolve();
  return new Promise((resolve) => {
    const off = c.on('state', (s) => { if (s.state === 'connected') { off(); resolve(); } });
  });
}

// follow subscribes and collects offsets.
function follow(c, topic, opts = {}, more = {}) {
  const got = [];
  const gaps = [];
  const f = { got, gaps, first: 0 };
  f.sub = c.subscribe(topic, opts, {
    publication(p) { f.first ||= Date.now(); got.push(p.offset); },
    gap(g) { gaps.push(g); },
    ...more,
  });
  return f;
}

const range = (a, b) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

for (const tr of transports) {
  test(`${tr}: every publication once and in order, from since 0 and from now`, { skip }, async () => {
    const c = new Client(base, { ...opts, transports: [tr] });
    try {
      const older = fresh(tr);
      for (let i = 1; i <= 3; i++) await server('POST', 'publish', { topic: older, data: { i } });
      const a = follow(c, older, { since: 0 });
      await connected(c);
      assert.equal(c.transport, tr);
      const now = fresh(tr + '-now');
      const b = follow(c, now);
      await waitFor('the "from now" subscription to start', () => b.sub.state === 'subscribed');
      for (let i = 4; i <= 20; i++) {
        const ack = await c.publish(older, { i });
        assert.equal(ack.offset, i);
      }
      await c.publish(now, { hello: 1 });
      await waitFor(`${tr}: 20 publications`, () => a.got.length >= 20 && b.got.length >= 1);
      assert.deepEqual(a.got, range(1, 20));
      assert.deepEqual(b.got, [1]);
      assert.deepEqual(a.gaps, []);
    } finally {
      c.close();
    }
  });
}

for (const tr of ['ws', 'stomp', 'sse']) {
  test(`${tr}: the server closes the connection; the client resumes where it was, nothing lost or twice`, { skip }, async () => {
    const user = `resumer-${tr}-${n++}`;
    const c = new Client(base, { ...opts, transports: [tr], token: await login(user) });
    try {
      const topic = fresh('resume-' + tr);
      const f = follow(c, topic, { since: 0 });
      await connected(c);
      await waitFor('subscribed', () => f.sub.state === 'subscribed');
      let down = 0;
      c.on('transport', (e) => { if (e.event === 'failed') down++; });
      for (let i = 1; i <= 60; i++) {
        await server('POST', 'publish', { topic, data: { i } });
        if (i === 20) await server('POST', 'disconnect', { user, reason: 'test: resume', reconnect: true });
      }
      await waitFor('60 publications', () => f.got.length >= 60);
      assert.deepEqual(f.got, range(1, 60));
      assert.ok(down >= 1, 'the connection was closed at least once');
    } finally {
      c.close();
    }
  });
}

test('WebSocket upgrades refused (a proxy): falls back to SSE while 200 are published, all 200 once and in order', { skip: skip || (!noWS && 'RTLAB_NOWS_URL is not set') }, async () => {
  const topic = fresh('fallback');
  const c = new Client(noWS, { ...opts });
  const tried = [];
  c.on('transport', (e) => tried.push(`${e.transport} ${e.event}`));
  const start = Date.now();
  const f = follow(c, topic, { since: 0 });
  try {
    for (let i = 1; i <= 200; i++) await server('POST', 'publish', { topic, data: { i } });
    await waitFor('200 publications over the fallback', () => f.got.length >= 200, 20000)
      .catch((e) => assert.fail(`${e.message}: got ${f.got.length}, state ${c.state}, tried ${tried.join(', ')}`));
    assert.deepEqual(f.got, range(1, 200));
    assert.equal(c.transport, 'sse', `tried: ${tried.join(', ')}`);
    assert.ok(tried.includes('ws failed') && tried.includes('stomp failed'), `tried: ${tried.join(', ')}`);
    console.log(`# fallback: first message ${f.first - start} ms after the client started; ${tried.join(', ')}`);
  } finally {
    c.close();
  }
});

for (const tr of ['ws', 'stomp', 'sse', 'longpoll']) {
  test(`${tr}: a trimmed history gives a gap event, then what is retained, once`, { skip }, async () => {
    const topic = fresh('trimmed-' + tr);
    for (let i = 1; i <= history + 10; i++) await server('POST', 'publish', { topic, data: { i } });
    const c = new Client(base, { ...opts, transports: [tr] });
    try {
      const f = follow(c, topic, { since: 0 });
      await waitFor('the gap and what is retained', () => f.gaps.length === 1 && f.got.length >= history);
      assert.match(f.gaps[0].reason, /fell out of history/);
      // A stream's notice is at the first publication after it; a poll's answer carries them.
      if (tr !== 'longpoll') assert.equal(f.gaps[0].offset, 11);
      assert.deepEqual(f.got, range(11, history + 10));
    } finally {
      c.close();
    }
  });
}

for (const tr of ['ws', 'stomp', 'sse', 'longpoll']) {
  test(`${tr}: presence, then joins and leaves`, { skip }, async () => {
    const topic = fresh('presence-' + tr);
    const watcher = new Client(base, { ...opts, transports: [tr], presenceInterval: 100, token: await login('watcher') });
    const other = new Client(base, { ...opts, transports: ['ws'], token: await login('zoe') });
    try {
      const events = [];
      let list = null;
      watcher.subscribe(topic, {}, {
        presence(l) { list ??= l; },
        join(i) { events.push('join ' + i.user); },
        leave(i) { events.push('leave ' + i.user); },
      });
      await waitFor('the first presence list', () => list !== null);
      other.subscribe(topic, {}, {});
      await waitFor('zoe joins', () => events.includes('join zoe'));
      const p = await watcher.presence(topic);
      assert.ok(p.users.includes('zoe'), JSON.stringify(p));
      other.close();
      await waitFor('zoe leaves', () => events.includes('leave zoe'));
    } finally {
      watcher.close();
      other.close();
    }
  });
}

test('server API: publish on notify/{user} reaches that user; disconnect without reconnect stops the client with the reason', { skip }, async () => {
  const c = new Client(base, { ...opts, transports: ['ws'], token: await login('ann') });
  const notes = follow(c, 'notify/ann');
  await connected(c);
  await waitFor('subscribed', () => notes.sub.state === 'subscribed');
  const ack = await server('POST', 'publish', { topic: 'notify/ann', data: { hi: 'ann' }, type: 'NOTIFY' });
  await waitFor('the notification', () => notes.got.includes(ack.offset));
  const bye = new Promise((resolve) => c.on('disconnect', resolve));
  const res = await server('POST', 'disconnect', { user: 'ann', reason: 'account suspended' });
  assert.equal(res.disconnected, 1);
  const d = await bye;
  assert.equal(d.reason, 'account suspended');
  assert.equal(c.state, 'disconnected');
});

test('getToken gives a fresh token when the server refuses the one the client has', { skip }, async () => {
  let asked = 0;
  const c = new Client(base, {
    ...opts, transports: ['shortpoll'], token: 'not-a-valid-token',
    getToken: async () => { asked++; return login('renewed'); },
  });
  try {
    const ack = await c.publish(fresh('token'), { ok: true });
    assert.equal(ack.offset, 1);
    assert.equal(asked, 1);
  } finally {
    c.close();
  }
});

// mint signs an HS256 token for user, valid for ttl ms, as the application's backend would.
for (const tr of ['ws', 'stomp']) {
  test(`${tr}: a short-lived token is refreshed in place before it expires; the connection stays up and misses nothing`,
    { skip: skip || (!authBase && 'RTLAB_AUTH_URL is not set') }, async () => {
      let asked = 0;
      const states = [];
      const c = new Client(authBase, {
        ...opts, transports: [tr], token: mint('ivy', 4000),
        getToken: async () => { asked++; return mint('ivy', 4000); },
      });
      const pub = new Client(authBase, { ...opts, transports: ['ws'], token: mint('pub', 60000) });
      try {
        const topic = fresh('refresh');
        const f = follow(c, topic, { since: 0 });
        await connected(c);
        c.on('state', (s) => states.push(s.state));
        // Publish for three token lifetimes: each token expires long before the last publication.
        for (let i = 1; i <= 24; i++) {
          await pub.publish(topic, { i });
          await new Promise((r) => setTimeout(r, 500));
        }
        await waitFor('all 24 publications', () => f.got.length >= 24);
        assert.deepEqual(f.got, range(1, 24));
        assert.ok(asked >= 2, `getToken was asked ${asked} times in 12 s of 4 s tokens, want at least 2`);
        assert.equal(states.filter((s) => s !== 'connected').length, 0, `the connection went through ${states.join(', ')}`);
      } finally {
        c.close();
        pub.close();
      }
    });
}
