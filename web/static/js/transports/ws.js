// WebSocket with rtlab's JSON protocol on /api/ws: one JSON object per text frame.
//
//   > {"op":"subscribe","topic":"chat/lobby","since":2,"epoch":"mq3k9x"}
//   < {"op":"subscribed","topic":"chat/lobby","offset":3,"epoch":"mq3k9x","recovered":true}
//   < {"op":"message","topic":"chat/lobby","offset":3,...}
//   > {"op":"publish","topic":"chat/lobby","data":{...},"type":"TALK","id":7}
//   < {"op":"ack","id":7,"topic":"chat/lobby","offset":4,"epoch":"mq3k9x"}
//
// The browser cannot set headers on a WebSocket, so the token travels as access_token. After a
// drop we reconnect with backoff and subscribe again with since and epoch.
import { Transport, Backoff, ApiError } from './transport.js';

export class WS extends Transport {
  static id = 'ws';
  static label = 'WebSocket';

  constructor(opts = {}) {
    super(opts);
    this.ws = null;
    this.backoff = new Backoff();
    this.timer = 0;
    this.seq = 0;
    this.pending = new Map(); // publish id -> {resolve, reject, timer}
  }

  open() {
    clearTimeout(this.timer);
    const ws = new WebSocket(this.url('/api/ws', { access_token: this.token }, 'ws'));
    this.ws = ws;
    ws.onopen = () => {
      for (const t of this.topics) this.sendSubscribe(t);
      this.backoff.reset();
      this.setState('live');
    };
    ws.onmessage = (e) => this.handle(JSON.parse(e.data));
    ws.onclose = (e) => {
      if (ws !== this.ws) return;
      this.ws = null;
      this.failPending(new Error('connection closed'));
      if (this.closed) return;
      const delay = this.backoff.next();
      const why = this.goodbye || (e.code === 1006 ? 'connection lost' : `closed ${e.code} ${e.reason}`);
      this.goodbye = '';
      this.setState('offline', `${why}; retry in ${(delay / 1000).toFixed(1)} s`);
      this.timer = setTimeout(async () => {
        this.setState('resuming', 'reconnecting');
        await this.reauth();
        if (!this.closed && !this.ws) this.open();
      }, delay);
    };
  }

  handle(m) {
    switch (m.op) {
      case 'message':
        delete m.op;
        this.accept(m);
        break;
      case 'subscribed':
        if (!m.recovered) this.gap({ topic: m.topic, since: this.positions.get(m.topic)?.offset ?? 0, epoch: m.epoch, reason: m.reason });
        else if (!this.positions.has(m.topic)) this.advance(m.topic, m.offset, m.epoch);
        break;
      case 'gap': // history broke under the live subscription; the next message follows it
        this.gap({ topic: m.topic, offset: m.offset, epoch: m.epoch, reason: m.reason });
        break;
      case 'ack':
        this.settle(m.id, null, { offset: m.offset, epoch: m.epoch });
        break;
      case 'error':
        if (m.id !== undefined && this.pending.has(m.id)) this.settle(m.id, new ApiError(400, m.code, m.reason));
        else this.emit('error', { topic: m.topic, code: m.code, reason: m.reason });
        break;
      case 'disconnect':
        this.goodbye = `server: ${m.reason || m.code}`;
        break;
    }
  }

  sendSubscribe(topic) {
    const pos = this.positions.get(topic);
    this.send(pos ? { op: 'subscribe', topic, since: pos.offset, epoch: pos.epoch } : { op: 'subscribe', topic });
  }

  send(msg) {
    if (this.ws?.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(msg));
    return true;
  }

  subscribe(topic, pos) {
    super.subscribe(topic, pos);
    this.sendSubscribe(topic);
  }

  unsubscribe(topic) {
    super.unsubscribe(topic);
    this.send({ op: 'unsubscribe', topic });
  }

  publish(topic, data, type) {
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      const msg = { op: 'publish', topic, data, id };
      if (type) msg.type = type;
      if (!this.send(msg)) return reject(new Error('not connected'));
      const timer = setTimeout(() => this.settle(id, new Error('no ack within 10 s')), 10000);
      this.pending.set(id, { resolve, reject, timer });
    });
  }

  settle(id, err, value) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (err) p.reject(err);
    else p.resolve(value);
  }

  failPending(err) {
    for (const id of [...this.pending.keys()]) this.settle(id, err);
  }

  close() {
    clearTimeout(this.timer);
    super.close();
    const ws = this.ws;
    this.ws = null;
    ws?.close(1000);
    this.failPending(new Error('closed'));
  }
}
