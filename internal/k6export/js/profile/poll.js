// The profile's polling users, long (LONG) or short: the first request reads the starting cursor
// (subscribe.url) or counts as the subscription, each later one hands its items to the receiver;
// publications are the profile's HTTP request every interval.
import http from 'k6/http';
import { setTimeout } from 'k6/timers';
import { publisher, now, BASE, errors, pubFailed } from './lib.js';
import { W } from './config.js';
import { user, url, headers, render, parse, deliver, lookup, Receiver } from './profile.js';

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

// publish sends the profile's request for seq; a status other than the one wanted fails it.
function publish(T, u, seq, at) {
  const p = T.publish;
  const params = { headers: headers(T, u, p.headers), timeout: '60s' };
  http.asyncRequest(p.method, url(BASE, T, p.url, u), render(p.body, u, seq, at), params).then((r) => {
    if (p.status ? r.status !== p.status : r.status < 200 || r.status > 299) pubFailed.add(1);
  });
}

// items hands each delivery of a poll answer to rx.
function items(T, rx, body, at) {
  const obj = parse(body);
  let list = T.read.items ? lookup(obj, T.read.items) : obj;
  if (!Array.isArray(list)) list = body.trim() ? [obj] : [];
  for (const it of list) deliver(T, rx, JSON.stringify(it), it, at);
}

export async function pollUser(T, LONG) {
  const u = user();
  const rx = new Receiver();
  const params = { headers: headers(T, u), timeout: '60s' };
  const want = T.subscribe.ready.status || 200;
  const every = T.intervalMs || W.intervalMs;
  let cursor = '';
  let first = true;
  const subscribed = () => {
    rx.open();
    publisher(u, (seq, body, at) => publish(T, u, seq, at));
  };
  // Without a cursor the subscription is the poll itself, in place once sent: a long poll's
  // first answer may wait for the first publication.
  if (!T.read.cursor) subscribed();
  for (;;) {
    const started = Date.now();
    const route = first && T.read.cursor && T.subscribe.url ? T.subscribe.url : T.url;
    const res = await http.asyncRequest('GET', url(BASE, T, route, u, cursor), null, params);
    const at = now();
    if (res.status !== want) {
      errors.add(1);
      await sleep(1000);
      continue;
    }
    if (T.read.cursor) {
      const c = lookup(parse(res.body), T.read.cursor);
      if (c !== undefined) cursor = String(c);
    }
    if (first && T.read.cursor) subscribed();
    else items(T, rx, res.body, at);
    first = false;
    if (!LONG) await sleep(every - (Date.now() - started));
  }
}
