// rtlab.js as a library people ship: many topics on polling in one request, refusals that end
// one subscription alone, token failures that end in an error or a disconnect, paging back,
// and no timer, listener or memory left behind. Same environment as client.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import WebSocket from 'ws';
import { Client } from '../rtlab.js';
import { sleep, namer, waitFor, serverAPI, login as loginAs, mint as mintToken } from './helpers.mjs';

const base = process.env.RTLAB_URL;
const apiKey = process.env.RTLAB_API_KEY;
const authBase = process.env.RTLAB_AUTH_URL;
const authSecret = process.env.RTLAB_AUTH_SECRET;
const skip = base ? false : 'RTLAB_URL is not set (run through go test ./clients/js/)';
const skipAuth = skip || (!authBase && 'RTLAB_AUTH_URL is not set');
const opts = { WebSocket, pollInterval: 100, longPollWait: 5, minBackoff: 50, maxBackoff: 500 };
const fresh = namer('node');
const publish = (topic, data) => serverAPI(base, apiKey, 'POST', 'publish', { topic, data });
const login = (user) => loginAs(base, user);
const mint = (user, ttl) => mintToken(authSecret, user, ttl);

// counting wraps fetch to count requests in flight to the poll route.
function counting() {
  const c = { now: 0, most: 0, total: 0 };
  c.fetch = async (url, init) => {
    const poll = String(url).includes('/api/poll');
    if (poll) { c.now++; c.total++; c.most = Math.max(c.most, c.now); }
    try { return await fetch(url, init); } finally { if (poll) c.now--; }
  };
  return c;
}

for (const tr of ['longpoll', 'shortpoll']) {
  test(`${tr}: 50 subscriptions in one request; a publish on any topic arrives within the poll round trip`, { skip }, async () => {
    const cnt = counting();
    const c = new Client(base, { ...opts, transports: [tr], fetch: cnt.fetch });
    try {
      const topics = Array.from({ length: 50 }, (_, i) => fresh(`many-${i}`));
      const seen = new Map();
      for (const t of topics) c.subscribe(t, {}, { publication(p) { seen.set(p.topic + '#' + p.offset, Date.now()); } });
      await waitFor('every subscription up', () => [...c.subs.values()].every((s) => s.state === 'subscribed'));
      const lat = [];
      for (let i = 0; i < 20; i++) {
        const t = topics[(i * 7) % topics.length];
        const at = Date.now();
        const ack = await publish(t, { i });
        await waitFor('the publication', () => seen.has(t + '#' + ack.offset));
        lat.push(seen.get(t + '#' + ack.offset) - at);
      }
      lat.sort((a, b) => a - b);
      console.log(`# ${tr}, 50 topics: requests in flight at most ${cnt.most}; publish → delivery p50 ${lat[10]} ms, max ${lat[19]} ms`);
      assert.ok(cnt.most <= 2, `${cnt.most} poll requests in flight`);
      assert.ok(lat[19] < (tr === 'longpoll' ? 1000 : 1500), `slowest delivery ${lat[19]} ms`);
    } finally {
      c.close();
    }
  });
}

for (const tr of ['ws', 'stomp', 'sse', 'longpoll', 'shortpoll']) {
  test(`${tr}: a forbidden topic among three is refused alone; the two others deliver`, { skip }, async () => {
    const c = new Client(base, { ...opts, transports: [tr], token: await login('bob') });
    const clientErrors = [];
    c.on('error', (e) => clientErrors.push(e.code));
    try {
      const a = fresh('ok-a');
      const b = fresh('ok-b');
      const got = [];
      const errors = [];
      c.subscribe(a, {}, { publication(p) { got.push(p.topic); } });
      const bad = c.subscribe('notify/ann', {}, {});
      bad.on('error', (e) => errors.push(e.code));
      c.subscribe(b, {}, { publication(p) { got.push(p.topic); } });
      await waitFor('the refusal', () => errors.length === 1 && bad.state === 'unsubscribed');
      assert.deepEqual(errors, ['forbidden']);
      await waitFor('the others up', () => c.subs.size === 2 && [...c.subs.values()].every((s) => s.state === 'subscribed'));
      await publish(a, { x: 1 });
      await publish(b, { x: 2 });
      await waitFor('both publications', () => got.length === 2);
      assert.equal(c.state, 'connected');
      assert.deepEqual(clientErrors, [], 'no error beyond the subscription\'s');
    } finally {
      c.close();
    }
  });
}

test('auth: a getToken that throws is an error event, asked at most once per backoff step', { skip: skipAuth }, async () => {
  let asked = 0;
  const errors = [];
  const c = new Client(authBase, {
    ...opts, transports: ['ws'], token: mint('kim', -60000), minBackoff: 200, maxBackoff: 400,
    getToken: async () => { asked++; throw new Error('backend down'); },
  });
  c.on('error', (e) => errors.push(e.code));
  try {
    await sleep(3000);
    assert.ok(errors.length >= 2 && errors.every((e) => e === 'token_error'), JSON.stringify(errors));
    assert.ok(asked <= 3000 / 100 + 1, `getToken asked ${asked} times in 3 s with backoff ≥ 100 ms`);
    assert.equal(asked, errors.length);
  } finally {
    c.close();
  }
});

test('auth: an expired token from getToken is an error event; no token at all is a disconnect with every timer cleared', { skip: skipAuth }, async () => {
  let asked = 0;
  const errors = [];
  let give = () => mint('kim', -60000);
  const c = new Client(authBase, {
    ...opts, transports: ['sse'], token: mint('kim', -60000), minBackoff: 200, maxBackoff: 400,
    getToken: async () => { asked++; return give(); },
  });
  c.on('error', (e) => errors.push(e.code));
  c.subscribe(fresh('auth'), {}, {});
  try {
    await waitFor('token_expired errors', () => errors.length >= 2);
    assert.ok(errors.every((e) => e === 'token_expired'), JSON.stringify(errors));
    give = () => null;
    const bye = await new Promise((resolve) => c.on('disconnect', resolve));
    assert.equal(bye.code, 'unauthorized');
    assert.equal(c.state, 'disconnected');
    assert.deepEqual(c.timers, {});
    const at = asked;
    await sleep(1000);
    assert.equal(asked, at, 'getToken asked after the disconnect');
  } finally {
    c.close();
  }
});

test('longpoll: the server API\'s disconnect reaches a waiting long poll and stops the client', { skip }, async () => {
  const c = new Client(base, { ...opts, transports: ['longpoll'], token: await login('lou') });
  try {
    c.subscribe(fresh('bye'), {}, {});
    await waitFor('connected', () => c.state === 'connected');
    await sleep(300); // the long poll is waiting now
    const bye = new Promise((resolve) => c.on('disconnect', resolve));
    const res = await fetch(base + '/api/server/disconnect', {
      method: 'POST', headers: { Authorization: 'apikey ' + apiKey }, body: JSON.stringify({ user: 'lou', reason: 'gone' }),
    });
    assert.ok((await res.json()).disconnected >= 1);
    assert.equal((await bye).reason, 'gone');
    assert.equal(c.state, 'disconnected');
  } finally {
    c.close();
  }
});

test('history pages back with before', { skip }, async () => {
  const topic = fresh('pages');
  for (let i = 1; i <= 30; i++) await publish(topic, { i });
  const c = new Client(base, { ...opts, transports: ['shortpoll'] });
  try {
    const page = await c.history(topic, { before: 0, limit: 10 });
    assert.deepEqual(page.publications.map((p) => p.offset).sort((a, b) => a - b), Array.from({ length: 10 }, (_, i) => 21 + i));
    const older = await c.history(topic, { before: page.next.before, limit: 10 });
    assert.deepEqual(older.publications.map((p) => p.offset).sort((a, b) => a - b), Array.from({ length: 10 }, (_, i) => 11 + i));
  } finally {
    c.close();
  }
});

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

test('close() leaves no timer behind, in any state', { skip }, async () => {
  const before = timers();
  for (const tr of ['ws', 'stomp', 'sse', 'longpoll', 'shortpoll']) {
    for (const wait of [0, 5, 300]) {
      const c = new Client(base, { ...opts, transports: [tr, 'longpoll'] });
      c.subscribe(fresh('close'), {}, {});
      await sleep(wait);
      c.close();
    }
  }
  await sleep(300);
  assert.ok(timers() <= before, `timers: ${before} before, ${timers()} after`);
});

const heap = async () => {
  for (let i = 0; i < 3; i++) { globalThis.gc?.(); await sleep(20); }
  return process.memoryUsage().heapUsed;
};

test('10,000 polls and 1,000 subscribe/unsubscribe cycles grow neither listeners nor heap beyond 1 MB', { skip, timeout: 120000 }, async () => {
  const c = new Client(base, { ...opts, transports: ['shortpoll'], pollInterval: 0 });
  try {
    const topic = fresh('leak');
    c.subscribe(topic, {}, {});
    await waitFor('polling', () => c.state === 'connected');
    let polls = 0;
    const count = (url, init) => { polls++; return fetch(url, init); };
    c.fetch = count;
    await waitFor('1,000 polls to warm up', () => polls >= 1000, 60000);
    const h0 = await heap();
    const l0 = getEventListeners(c.t.ctl.signal, 'abort').length;
    const p0 = polls;
    await waitFor('10,000 polls', () => polls >= p0 + 10000, 90000);
    const h1 = await heap();
    const l1 = getEventListeners(c.t.ctl.signal, 'abort').length;
    console.log(`# 10,000 polls: heap ${((h1 - h0) / 1024).toFixed(0)} KiB, abort listeners ${l0} → ${l1}`);
    assert.ok(l1 <= l0 + 1, `listeners ${l0} → ${l1}`);
    assert.ok(h1 - h0 < 1 << 20, `heap grew ${h1 - h0} bytes`);
  } finally {
    c.close();
  }
  const w = new Client(base, { ...opts, transports: ['ws'] });
  try {
    await waitFor('connected', () => w.state === 'connected');
    const cycle = async (k) => {
      for (let i = 0; i < k; i++) {
        const s = w.subscribe('node/cycle', {}, { publication() {} });
        s.on('error', () => {});
        s.unsubscribe();
      }
    };
    await cycle(100);
    const h0 = await heap();
    const l0 = [...w._on.values()].reduce((a, s) => a + s.size, 0);
    await cycle(1000);
    const h1 = await heap();
    const l1 = [...w._on.values()].reduce((a, s) => a + s.size, 0);
    console.log(`# 1,000 subscribe/unsubscribe cycles: heap ${((h1 - h0) / 1024).toFixed(0)} KiB, client listeners ${l0} → ${l1}`);
    assert.equal(l1, l0);
    assert.ok(h1 - h0 < 1 << 20, `heap grew ${h1 - h0} bytes`);
  } finally {
    w.close();
  }
});
