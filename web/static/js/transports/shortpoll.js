// Short polling: every interval, GET /api/poll/{topic}?since=N&epoch=E for each topic.
// The answer is {topic, epoch, offset, recovered, reason?, publications: [...]}; the next since
// is the last publication's offset, or the answer's offset when the list is empty.
import { Transport, Backoff, ApiError, sleep, publishHTTP, authHeaders } from './transport.js';

export class ShortPoll extends Transport {
  static id = 'shortpoll';
  static label = 'Short polling';

  constructor(opts = {}) {
    super(opts);
    this.interval = opts.interval ?? 1000;
    this.loops = new Map(); // topic -> AbortController
    this.failing = new Set(); // topics whose last request failed
  }

  open() {
    for (const t of this.topics) this.startLoop(t);
  }

  subscribe(topic, pos) {
    this.stopLoop(topic);
    super.subscribe(topic, pos);
    if (!this.closed) this.startLoop(topic);
  }

  unsubscribe(topic) {
    this.stopLoop(topic);
    super.unsubscribe(topic);
  }

  close() {
    for (const t of [...this.loops.keys()]) this.stopLoop(t);
    super.close();
  }

  publish(topic, data, type) { return publishHTTP(this, topic, data, type); }

  // params are the query of one poll; the long poll adds wait= (except when catching up).
  params(topic, catchUp) {
    const pos = this.positions.get(topic);
    return pos ? { since: pos.offset, epoch: pos.epoch } : {};
  }

  // pause is how long to wait after an answer before asking again.
  pause() { return this.interval; }

  startLoop(topic) {
    const ctl = new AbortController();
    this.loops.set(topic, ctl);
    this.loop(topic, ctl.signal);
  }

  stopLoop(topic) {
    this.loops.get(topic)?.abort();
    this.loops.delete(topic);
    this.failing.delete(topic);
  }

  async loop(topic, signal) {
    const backoff = new Backoff();
    let catchUp = true; // the first request after a start or a failure answers at once
    while (!signal.aborted) {
      try {
        const res = await fetch(this.url('/api/poll/' + topic, this.params(topic, catchUp)), {
          headers: authHeaders(this.token), signal, cache: 'no-store',
        });
        const body = await res.json().catch(() => ({}));
        if (signal.aborted) return;
        if (!res.ok || !body.publications) throw new ApiError(res.status, body.error, body.reason || `HTTP ${res.status}`);
        this.answered(topic, body);
        backoff.reset();
        if (!catchUp || !body.publications.length) catchUp = false;
        await sleep(catchUp ? 0 : this.pause(), signal);
      } catch (err) {
        if (signal.aborted) return;
        const delay = backoff.next();
        catchUp = true;
        this.failed(topic, err, delay);
        await sleep(delay, signal);
        if (signal.aborted) return;
        await this.reauth();
        if (this.failing.size) this.setState('resuming', 'polling again');
      }
    }
  }

  answered(topic, body) {
    if (body.recovered === false) {
      this.gap({ topic, since: this.positions.get(topic)?.offset ?? 0, epoch: body.epoch, reason: body.reason });
    }
    for (const p of body.publications) this.accept(p);
    if (body.publications.length === 0) this.advance(topic, body.offset, body.epoch);
    this.failing.delete(topic);
    if (this.failing.size === 0) this.setState('live');
  }

  failed(topic, err, delay) {
    this.failing.add(topic);
    if (err instanceof ApiError && err.status < 500) this.emit('error', { topic, code: err.code, reason: err.message });
    this.setState('offline', `${err.message}; retry in ${(delay / 1000).toFixed(1)} s`);
  }
}
