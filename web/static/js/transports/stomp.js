// STOMP 1.2 over WebSocket on /api/stomp, with @stomp/stompjs 7.5.0 (vendored UMD bundle,
// loaded by index.html as the global StompJs): the client most browser apps use.
//
// The token goes in CONNECT's passcode. Destinations are /topic/{topic}. A MESSAGE carries the
// publication's data as its body and offset, epoch, time, sender and type as headers. stompjs
// reconnects by itself (exponential backoff below) but does not subscribe again: onConnect
// does, each with since and epoch headers. A resume the server cannot honour starts with a
// MESSAGE whose header gap is "true" and whose body says what was lost.
import { Transport, ApiError } from './transport.js';

const prefix = '/topic/';

export class Stomp extends Transport {
  static id = 'stomp';
  static label = 'STOMP over WebSocket';

  constructor(opts = {}) {
    super(opts);
    this.client = null;
    this.subs = new Map(); // topic -> stompjs subscription
    this.seq = 0;
    this.pending = new Map(); // receipt -> reject, until the RECEIPT comes
  }

  open() {
    const { Client, ReconnectionTimeMode } = globalThis.StompJs;
    const c = new Client({
      brokerURL: this.url('/api/stomp', {}, 'ws'),
      connectHeaders: this.token ? { login: this.user, passcode: this.token } : {},
      reconnectDelay: 250,
      reconnectTimeMode: ReconnectionTimeMode.EXPONENTIAL,
      maxReconnectDelay: 5000,
      heartbeatIncoming: 10000,
      heartbeatOutgoing: 10000,
      debug: () => {},
    });
    c.beforeConnect = async () => {
      if (this.state === 'connecting') return;
      this.setState('resuming', 'reconnecting');
      await this.reauth();
      if (this.token) c.connectHeaders = { login: this.user, passcode: this.token };
    };
    c.onConnect = () => {
      this.subs.clear(); // a new session has none of the old subscriptions
      for (const t of this.topics) this.stompSubscribe(t);
      this.setState('live');
    };
    // An ERROR ends the session (the server closes it; stompjs reconnects). It names the frame
    // it answers by receipt-id, so a refused SEND fails its own publish promise.
    c.onStompError = (f) => {
      const msg = f.headers.message || 'ERROR frame';
      this.goodbye = `server ERROR: ${msg}`;
      const fail = this.pending.get(f.headers['receipt-id']);
      if (fail) fail(new ApiError(400, /^[a-z_]+(?=:)/.exec(msg)?.[0] || 'stomp', msg));
      else this.emit('error', { code: 'stomp', reason: msg });
    };
    c.onWebSocketClose = (e) => {
      this.failPending(new Error(this.goodbye || 'connection closed'));
      if (this.closed) return;
      const why = this.goodbye || (e.code === 1006 ? 'connection lost' : `closed ${e.code} ${e.reason}`);
      this.goodbye = '';
      this.setState('offline', `${why}; stompjs retries with backoff`);
    };
    this.client = c;
    c.activate();
  }

  stompSubscribe(topic) {
    const headers = { ack: 'auto' };
    const pos = this.positions.get(topic);
    if (pos) Object.assign(headers, { since: String(pos.offset), epoch: pos.epoch });
    const sub = this.client.subscribe(prefix + topic, (m) => this.onMessage(topic, m), headers);
    this.subs.set(topic, sub);
  }

  onMessage(topic, m) {
    const h = m.headers;
    if (h.gap === 'true') {
      this.gap(JSON.parse(m.body));
      return;
    }
    this.accept({
      topic, offset: Number(h.offset), epoch: h.epoch, time: h.time,
      sender: h.sender, type: h.type, data: JSON.parse(m.body),
    });
  }

  subscribe(topic, pos) {
    if (this.client?.connected) this.subs.get(topic)?.unsubscribe();
    this.subs.delete(topic);
    super.subscribe(topic, pos);
    if (this.client?.connected) this.stompSubscribe(topic);
  }

  unsubscribe(topic) {
    if (this.client?.connected) this.subs.get(topic)?.unsubscribe();
    this.subs.delete(topic);
    super.unsubscribe(topic);
  }

  // publish SENDs with a receipt; the RECEIPT carries the publication's offset and epoch.
  publish(topic, data, type) {
    return new Promise((resolve, reject) => {
      if (!this.client?.connected) return reject(new Error('not connected'));
      const receipt = `pub-${++this.seq}`;
      const fail = (err) => { clearTimeout(timer); this.pending.delete(receipt); reject(err); };
      const timer = setTimeout(() => fail(new Error('no receipt within 10 s')), 10000);
      this.pending.set(receipt, fail);
      this.client.watchForReceipt(receipt, (f) => {
        clearTimeout(timer);
        this.pending.delete(receipt);
        resolve({ offset: Number(f.headers.offset), epoch: f.headers.epoch });
      });
      const headers = { receipt, 'content-type': 'application/json' };
      if (type) headers.type = type;
      this.client.publish({ destination: prefix + topic, body: JSON.stringify(data), headers });
    });
  }

  failPending(err) {
    for (const fail of [...this.pending.values()]) fail(err);
  }

  close() {
    this.failPending(new Error('closed'));
    super.close();
    this.client?.deactivate();
    this.client = null;
    this.subs.clear();
  }
}
