// Older messages on scroll: when the chat log is scrolled to its top, the page before the
// oldest message shown is read (GET /api/topics/{topic}/history?before=N, newest first) and put
// above it, the view kept still. The server reads its live window, then its archive.
import { api } from './api.js';

export class OlderMessages {
  // view is the ChatView (prepend, log); token() returns the current login token.
  constructor(view, token) {
    this.view = view;
    this.token = token;
    this.next = null;
    this.topic = '';
    this.loading = null;
    view.log.addEventListener('scroll', () => { if (view.log.scrollTop < 40) this.load(); });
  }

  // start follows topic, whose newest page is shown; next is that page's cursor (null: nothing older).
  start(topic, next) {
    Object.assign(this, { topic, next, loading: null });
    if (!next) this.view.start();
  }

  stop() { Object.assign(this, { topic: '', next: null }); }

  // load reads and shows the next older page, once at a time.
  load() {
    if (!this.next || this.loading) return this.loading;
    const { topic, next } = this;
    const q = `before=${next.before}&epoch=${encodeURIComponent(next.epoch)}&limit=50`;
    this.loading = api('GET', `/api/topics/${topic}/history?${q}`, { token: this.token() })
      .then((p) => {
        if (topic !== this.topic) return; // left the room meanwhile
        this.view.prepend(p.publications);
        this.next = p.next;
        if (!p.next) this.view.start();
      })
      .catch((e) => this.view.system(`older messages not loaded: ${e.message}`, 'err'))
      .finally(() => { this.loading = null; });
    return this.loading;
  }
}
