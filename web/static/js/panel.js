// Panel shows the connection: transport, state, messages received, reconnects, the position
// (offset and epoch) of every topic, and a short log of what happened.
const clock = () => new Date().toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

export class Panel {
  constructor(root) {
    this.el = {
      transport: root.querySelector('#conn-transport'),
      state: root.querySelector('#conn-state'),
      detail: root.querySelector('#conn-detail'),
      received: root.querySelector('#conn-received'),
      reconnects: root.querySelector('#conn-reconnects'),
      topics: root.querySelector('#conn-topics'),
      events: root.querySelector('#conn-events'),
    };
    this.frame = 0;
    this.t = null;
  }

  watch(t, label) {
    this.t = t;
    this.el.transport.textContent = label;
    this.render();
  }

  state({ state, detail }) {
    this.el.state.textContent = state;
    this.el.state.className = `pill state-${state}`;
    this.el.detail.textContent = detail || '—';
    document.body.dataset.state = state;
    this.render();
  }

  // render refreshes the counters and positions, at most once a frame.
  render() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      const t = this.t;
      if (!t) return;
      this.el.received.textContent = t.received;
      this.el.reconnects.textContent = t.reconnects;
      const rows = [...t.topics].sort().map((topic) => {
        const p = t.positions.get(topic);
        const tr = document.createElement('tr');
        tr.dataset.topic = topic;
        for (const v of [topic, p ? p.offset : 'from now', p ? p.epoch : '']) {
          const td = document.createElement('td');
          td.textContent = v;
          tr.append(td);
        }
        tr.children[1].className = 'num';
        tr.children[2].className = 'epoch';
        return tr;
      });
      this.el.topics.replaceChildren(...rows);
    });
  }

  event(text, cls = '') {
    const li = document.createElement('li');
    if (cls) li.className = cls;
    const time = document.createElement('time');
    time.textContent = clock();
    li.append(time, ' ', text);
    this.el.events.prepend(li);
    while (this.el.events.children.length > 12) this.el.events.lastElementChild.remove();
  }
}
