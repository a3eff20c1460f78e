// Server-Sent Events: one EventSource on GET /api/sse?topic=A&topic=B, publishing over HTTP.
//
// Every event's id is a resume token, "topic=offset:epoch,..." for all topics of the stream.
// When the stream drops, the browser reconnects by itself after the server's retry: hint and
// sends the last id as the Last-Event-ID header; the server resumes every topic from there.
// A new stream (first open, a topic added, or our own backoff after the browser gave up)
// carries the same token as the lastEventId query parameter, built from our positions.
import { Transport, Backoff, publishHTTP } from './transport.js';

// Native retries the browser may make (every retry: 2000 ms) before we close the stream and
// take over with a growing backoff.
const nativeRetries = 2;

export class SSE extends Transport {
  static id = 'sse';
  static label = 'Server-Sent Events';

  constructor(opts = {}) {
    super(opts);
    this.es = null;
    this.backoff = new Backoff();
    this.timer = 0;
    this.retries = 0;
  }

  // resumeToken is the resume token of our positions, in the format of the server's event ids.
  resumeToken() {
    const parts = [];
    for (const t of this.topics) {
      const p = this.positions.get(t);
      if (p) parts.push(`${t}=${p.offset}:${p.epoch}`);
    }
    return parts.join(',');
  }

  open() {
    clearTimeout(this.timer);
    this.es?.close();
    if (this.topics.size === 0) {
      this.es = null;
      this.setState('live', 'no topics yet');
      return;
    }
    // EventSource cannot set headers: the token goes in access_token.
    const es = new EventSource(this.url('/api/sse', {
      topic: [...this.topics], lastEventId: this.resumeToken(), access_token: this.token,
    }));
    this.es = es;
    es.onopen = () => {
      this.retries = 0;
      this.backoff.reset();
      this.setState('live');
    };
    es.onmessage = (e) => this.accept(JSON.parse(e.data));
    es.addEventListener('gap', (e) => this.gap(JSON.parse(e.data)));
    es.addEventListener('disconnect', (e) => {
      const d = JSON.parse(e.data);
      this.setState('resuming', `server: ${d.reason || d.code}`);
    });
    es.addEventListener('error', (e) => {
      if (es !== this.es) return;
      if (e.data) { // the server's "event: error" for one topic, not a connection error
        const d = JSON.parse(e.data);
        this.emit('error', { topic: d.topic, code: 'error', reason: d.reason });
        return;
      }
      if (es.readyState === EventSource.CONNECTING && this.retries++ < nativeRetries) {
        this.setState('resuming', 'browser reconnecting with Last-Event-ID');
        return;
      }
      es.close();
      const delay = this.backoff.next();
      this.setState('offline', `stream failed; retry in ${(delay / 1000).toFixed(1)} s`);
      this.timer = setTimeout(async () => {
        this.setState('resuming', 'reopening with lastEventId');
        await this.reauth();
        if (!this.closed && this.es === es) this.open();
      }, delay);
    });
  }

  // A stream's topics are fixed: adding or dropping one reopens it, resuming the others.
  subscribe(topic, pos) {
    super.subscribe(topic, pos);
    if (!this.closed) this.open();
  }

  unsubscribe(topic) {
    super.unsubscribe(topic);
    if (!this.closed) this.open(); // the state stays live: a topic change is no reconnect
  }

  publish(topic, data, type) { return publishHTTP(this, topic, data, type); }

  close() {
    clearTimeout(this.timer);
    this.es?.close();
    this.es = null;
    super.close();
  }
}
