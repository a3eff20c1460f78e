// rtlab.js behind a proxy that does what real networks do (internal/faultproxy): for each
// fault and each transport, the client notices within maxSilence + 5 s, and once the network
// is back it has every publication of a numbered stream exactly once, in order.
//
//   RTLAB_FAULT_URL      a server with fast keepalives (1 s pings, 500 ms SSE and STOMP beats)
//   RTLAB_FAULT_CTL      the proxies' control: POST /{name}/fault/{mode}, POST /{name}/reset
//   RTLAB_FAULT_PROXIES  {"ws": "http://127.0.0.1:port", ...}: one proxy per transport, "restart"
//   RTLAB_API_KEY        the server's --api-key
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { Client } from '../rtlab.js';
import { sleep, namer, waitFor, serverAPI } from './helpers.mjs';

const base = process.env.RTLAB_FAULT_URL;
const ctl = process.env.RTLAB_FAULT_CTL;
const proxies = JSON.parse(process.env.RTLAB_FAULT_PROXIES || '{}');
const apiKey = process.env.RTLAB_API_KEY;
const skip = base && ctl ? false : 'RTLAB_FAULT_URL is not set (run through go test ./clients/js/)';
const maxSilence = 2000;
const opts = { WebSocket, maxSilence, connectTimeout: 2000, pollInterval: 100, minBackoff: 50, maxBackoff: 500 };
const modes = ['blackhole', 'buffer-bodies', 'buffer-headers', 'refuse-upgrades', 'hang-upgrades', 'reset'];
const fresh = namer('faults');
const publish = async (topic, data) => (await serverAPI(base, apiKey, 'POST', 'publish', { topic, data })).offset;

const proxy = (name, what) => fetch(`${ctl}/${name}/${what}`, { method: 'POST' }).then((r) => r.text());

// publisher publishes 1, 2, 3, ... on topic every 40 ms until stopped; stop resolves to the
// last offset.
function publisher(topic) {
  let last = 0;
  let on = true;
  const done = (async () => {
    while (on) {
      last = await publish(topic, { n: last + 1 });
      await sleep(40);
    }
    return last;
  })();
  return { stop: () => { on = false; return done; } };
}

// run follows a numbered stream through the fault: it returns how long the client took to
// notice, and checks that every publication came once and in order when the network is back.
async function run(name, transports, mode, faultFor = 3000) {
  const topic = fresh(`${name}-${mode}`);
  const c = new Client(proxies[name], { ...opts, transports });
  const got = [];
  const events = [];
  c.on('transport', (e) => events.push(`${Date.now()} ${e.transport} ${e.event}`));
  c.subscribe(topic, { since: 0 }, { publication(p) { got.push(p.offset); } });
  const pub = publisher(topic);
  try {
    await waitFor('the first publications', () => got.length >= 5, 10000);
    let failedAt = 0;
    c.on('transport', (e) => { if (e.event === 'failed') failedAt ||= Date.now(); });
    const at = Date.now();
    if (mode === 'reset') await proxy(name, 'reset');
    else {
      await proxy(name, `fault/${mode}`);
      // The modes other than a black hole act on new connections: break the open ones.
      if (mode !== 'blackhole') await proxy(name, 'reset');
    }
    // A black hole must be noticed. The other faults break only the connections open at the
    // time: a poller between two requests has none, and has nothing to notice.
    const noticed = waitFor(`${name} to notice ${mode}`, () => failedAt, maxSilence + 5000);
    if (mode === 'blackhole') await noticed.catch((e) => assert.fail(`${e.message}; events: ${events.join(', ')}`));
    else await noticed.catch(() => {});
    const detect = failedAt ? failedAt - at : 'nothing broken';
    await sleep(Math.max(0, faultFor - (Date.now() - at)));
    await proxy(name, 'fault/pass');
    await sleep(500);
    const last = await pub.stop();
    await waitFor(`all ${last} publications`, () => got.length >= last, 20000)
      .catch((e) => assert.fail(`${e.message}: got ${got.length}, state ${c.state}; events: ${events.join(', ')}`));
    await sleep(200);
    assert.deepEqual(got, Array.from({ length: last }, (_, i) => i + 1));
    return detect;
  } finally {
    await pub.stop();
    await proxy(name, 'fault/pass');
    c.close();
  }
}

const lists = { ws: ['ws', 'longpoll'], stomp: ['stomp', 'longpoll'], sse: ['sse', 'longpoll'], longpoll: ['longpoll', 'shortpoll'], shortpoll: ['shortpoll'] };

test('faults × transports: noticed within maxSilence + 5 s, then every publication once and in order', { skip, concurrency: true }, async (t) => {
  const detected = {};
  await Promise.all(Object.entries(lists).map(([name, transports]) => t.test(name, async (t2) => {
    for (const mode of modes) {
      await t2.test(`${name} × ${mode}`, async () => {
        detected[`${name} × ${mode}`] = await run(name, transports, mode);
      });
    }
  })));
  console.log('# detection (ms, maxSilence 2000): ' + JSON.stringify(detected));
});

// A restart: the server's host refuses connections for 1 s. The default list stays on
// WebSocket (it delivered just now) instead of walking down the list, so its outage is close
// to a WebSocket-only client's.
test('restart: the default list is out no longer than 1.5× a WebSocket-only client, nothing lost', { skip }, async () => {
  const outage = {};
  for (const [label, transports] of [['ws only', ['ws']], ['default', undefined]]) {
    const topic = fresh('restart');
    const c = new Client(proxies.restart, { ...opts, ...(transports ? { transports } : {}) });
    const got = [];
    const times = [];
    c.subscribe(topic, { since: 0 }, { publication(p) { got.push(p.offset); times.push(Date.now()); } });
    const pub = publisher(topic);
    try {
      await waitFor('the first publications', () => got.length >= 5, 10000);
      const at = Date.now();
      await proxy('restart', 'fault/down');
      await proxy('restart', 'reset');
      await sleep(1000);
      await proxy('restart', 'fault/pass');
      await sleep(1500);
      const last = await pub.stop();
      await waitFor(`all ${last} publications`, () => got.length >= last, 20000);
      assert.deepEqual(got, Array.from({ length: last }, (_, i) => i + 1));
      const i = times.findIndex((tm) => tm >= at);
      let gap = 0;
      for (let j = Math.max(1, i); j < times.length; j++) gap = Math.max(gap, times[j] - times[j - 1]);
      outage[label] = gap;
      assert.equal(c.transport, 'ws');
    } finally {
      await pub.stop();
      await proxy('restart', 'fault/pass');
      c.close();
    }
  }
  console.log('# restart outage (ms, longest pause in delivery): ' + JSON.stringify(outage));
  assert.ok(outage.default <= Math.max(1.5 * outage['ws only'], outage['ws only'] + 500), JSON.stringify(outage));
});

// A publish sent into a black hole has no answer: the client retries it with its idempotency
// key (on a new connection once the old one is found dead), and when the network is back the
// held copy and the retry both reach the server; it is published once, at the offset answered.
test('a publish lost in a black hole is retried with its key and published once', { skip }, async () => {
  for (const name of ['ws', 'stomp']) {
    const topic = fresh(`retry-${name}`);
    const c = new Client(proxies[name], { ...opts, transports: [name] });
    try {
      await waitFor(`${name} to connect`, () => c.state === 'connected', 10000);
      await proxy(name, 'fault/blackhole');
      const acked = c.publish(topic, { n: 1 }, { retries: 50 });
      await sleep(maxSilence + 1000);
      await proxy(name, 'fault/pass');
      const ack = await acked;
      await sleep(500);
      const hist = await fetch(`${base}/api/topics/${topic}/history?since=0`).then((r) => r.json());
      assert.deepEqual(hist.publications.map((p) => p.offset), [ack.offset], `${name}: ${JSON.stringify(hist)}`);
    } finally {
      await proxy(name, 'fault/pass');
      c.close();
    }
  }
});

// A server whose path to Redis is black-holed leaves a publish's outcome unknown (504, or no
// answer within the client's 10 s): the client retries it with its key, and a publish made
// after that answer waits for it, so that once Redis is back each is published once, in the
// order they were made.
const onRedis = process.env.RTLAB_REDIS_URL;
test('a publish of unknown outcome is retried with its key, and later ones wait for it', { skip: onRedis ? skip : 'RTLAB_REDIS_URL is not set' }, async () => {
  for (const transports of [['ws'], ['longpoll']]) {
    const topic = fresh(`unknown-${transports[0]}`);
    const c = new Client(onRedis, { ...opts, transports });
    try {
      await waitFor(`${transports[0]} to connect`, () => c.state === 'connected', 10000);
      await proxy('redis', 'fault/blackhole');
      const first = c.publish(topic, { n: 1 }, { retries: 100 });
      await waitFor('the first publish to be unresolved', () => c.unresolved, 30000);
      const second = c.publish(topic, { n: 2 }, { retries: 100 });
      await sleep(500);
      await proxy('redis', 'fault/pass');
      const acks = [await first, await second];
      const hist = await fetch(`${onRedis}/api/topics/${topic}/history?since=0`).then((r) => r.json());
      assert.deepEqual(hist.publications.map((p) => p.data.n), [1, 2], `${transports}: ${JSON.stringify(hist)}`);
      assert.deepEqual(acks.map((a) => a.offset), hist.publications.map((p) => p.offset));
    } finally {
      await proxy('redis', 'fault/pass');
      c.close();
    }
  }
});
