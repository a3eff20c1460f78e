// Long polling: the short poll's request with wait=25s. The server answers as soon as there
// is at least one publication after since (or at once when history is gone), else with an
// empty list when the wait passes; the client asks again right away. After a start or a
// failure the first request has no wait: it catches up at once and proves the server is back.
import { ShortPoll } from './shortpoll.js';

export class LongPoll extends ShortPoll {
  static id = 'longpoll';
  static label = 'Long polling';

  constructor(opts = {}) {
    super(opts);
    this.wait = opts.wait ?? '25s';
  }

  params(topic, catchUp) {
    const p = super.params(topic);
    return catchUp ? p : { ...p, wait: this.wait };
  }

  pause() { return 0; }
}
