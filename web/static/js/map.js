// MapView draws a group's members on a canvas and lets you drag your own marker.
//
// Positions are {x, y} on a 0..100 plane (what the seed scripts send) or {lat, lng} from the
// browser's geolocation; geographic ones are fitted into the view together. Each member row
// shows when its last update came and the delivery latency measured from the sender's sentAt.

const fmtAgo = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60000)} min`);

export function colorOf(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.codePointAt(0)) >>> 0;
  return `hsl(${h % 360} 60% 40%)`;
}

export class MapView {
  constructor(canvas, table, { onMove }) {
    this.canvas = canvas;
    this.table = table;
    this.onMove = onMove; // (x, y, final) when you drag or key-move your marker
    this.me = '';
    this.members = new Map(); // name -> {x, y, lat, lng, seen, latency, stale, shown: {x, y}}
    this.dragging = false;
    this.frame = 0;
    canvas.addEventListener('pointerdown', (e) => this.pointer(e, 'down'));
    canvas.addEventListener('pointermove', (e) => this.dragging && this.pointer(e, 'move'));
    canvas.addEventListener('pointerup', (e) => this.pointer(e, 'up'));
    canvas.addEventListener('pointercancel', () => { this.dragging = false; });
    canvas.addEventListener('keydown', (e) => this.key(e));
    new ResizeObserver(() => this.resize()).observe(canvas);
    setInterval(() => this.renderTable(), 250);
  }

  reset(me) {
    this.me = me;
    this.members.clear();
    this.table.replaceChildren();
    this.draw();
  }

  // update sets a member's position. sentAt (ms since epoch) gives the latency, if known.
  update(name, data, { time, sentAt } = {}) {
    if (!data || typeof data !== 'object') return;
    const m = this.members.get(name) || { shown: null };
    const hasXY = Number.isFinite(data.x) && Number.isFinite(data.y);
    const hasGeo = Number.isFinite(data.lat) && Number.isFinite(data.lng);
    if (!hasXY && !hasGeo) return;
    // Your own echoes lag your pointer: one that is not newer than what you last sent measures
    // latency but does not move your marker back.
    if (name === this.me && m.x !== undefined && (this.dragging || (sentAt !== undefined && sentAt <= (m.sentAt ?? 0)))) {
      if (sentAt !== undefined) m.latency = Date.now() - sentAt;
      m.seen = Date.now();
      m.stale = false;
      this.animate();
      return;
    }
    Object.assign(m, {
      x: hasXY ? clamp(data.x) : undefined, y: hasXY ? clamp(data.y) : undefined,
      lat: hasGeo ? data.lat : undefined, lng: hasGeo ? data.lng : undefined, accuracy: data.accuracy,
      seen: time ? Date.parse(time) : Date.now(), stale: false,
    });
    if (sentAt !== undefined) {
      m.latency = Date.now() - sentAt;
      m.seen = Date.now();
    }
    this.members.set(name, m);
    this.animate();
  }

  // remove takes a member off the map (it left the group).
  remove(name) {
    if (!this.members.delete(name)) return;
    this.table.querySelector(`tr[data-member="${CSS.escape(name)}"]`)?.remove();
    this.animate();
  }

  // markStale greys out every member: their positions belong to a history that is gone.
  markStale() {
    for (const m of this.members.values()) m.stale = true;
    this.animate();
  }

  // place maps a member to canvas pixels.
  place(m, w, h, geo) {
    if (m.x !== undefined) return { x: (m.x / 100) * w, y: (m.y / 100) * h };
    const { minLat, maxLat, minLng, maxLng } = geo;
    return {
      x: 30 + ((m.lng - minLng) / (maxLng - minLng)) * (w - 60),
      y: 30 + ((maxLat - m.lat) / (maxLat - minLat)) * (h - 60),
    };
  }

  geoBounds() {
    const g = [...this.members.values()].filter((m) => m.x === undefined);
    if (!g.length) return null;
    let minLat = Math.min(...g.map((m) => m.lat)), maxLat = Math.max(...g.map((m) => m.lat));
    let minLng = Math.min(...g.map((m) => m.lng)), maxLng = Math.max(...g.map((m) => m.lng));
    const pad = 0.002; // about 200 m, so one member sits in the middle
    if (maxLat - minLat < pad) { minLat -= pad; maxLat += pad; }
    if (maxLng - minLng < pad) { minLng -= pad; maxLng += pad; }
    return { minLat, maxLat, minLng, maxLng };
  }

  resize() {
    const r = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.max(1, Math.round(r.width * dpr));
    this.canvas.height = Math.max(1, Math.round(r.height * dpr));
    this.draw();
  }

  // animate redraws the canvas and the table on the next frame.
  animate() {
    if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.draw(); this.renderTable(); });
  }

  draw() {
    const c = this.canvas, ctx = c.getContext('2d');
    const dpr = window.devicePixelRatio || 1;
    const w = c.width / dpr, h = c.height / dpr;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = '#f8fafc';
    ctx.fillRect(0, 0, w, h);
    ctx.strokeStyle = '#e2e8f0';
    ctx.lineWidth = 1;
    for (let i = 1; i < 10; i++) {
      ctx.beginPath();
      ctx.moveTo(Math.round((i * w) / 10) + 0.5, 0); ctx.lineTo(Math.round((i * w) / 10) + 0.5, h);
      ctx.moveTo(0, Math.round((i * h) / 10) + 0.5); ctx.lineTo(w, Math.round((i * h) / 10) + 0.5);
      ctx.stroke();
    }
    const geo = this.geoBounds();
    let moving = false;
    // Others first, you on top.
    const names = [...this.members.keys()].sort((a, b) => (a === this.me) - (b === this.me) || a.localeCompare(b));
    for (const name of names) {
      const m = this.members.get(name);
      const target = this.place(m, w, h, geo);
      // Glide toward the new position so movement reads as movement, not as a jump.
      if (!m.shown || name === this.me) m.shown = { ...target };
      else {
        m.shown.x += (target.x - m.shown.x) * 0.35;
        m.shown.y += (target.y - m.shown.y) * 0.35;
        if (Math.hypot(target.x - m.shown.x, target.y - m.shown.y) > 0.5) moving = true;
        else m.shown = { ...target };
      }
      this.marker(ctx, name, m, m.shown);
    }
    if (!this.members.size) {
      ctx.fillStyle = '#64748b';
      ctx.font = '14px system-ui, sans-serif';
      ctx.textAlign = 'center';
      ctx.fillText(this.me ? 'Join a group to see its members here' : 'Log in to join a group', w / 2, h / 2);
    }
    if (moving || this.dragging) this.animate();
  }

  marker(ctx, name, m, p) {
    const mine = name === this.me;
    const color = m.stale ? '#94a3b8' : colorOf(name);
    const r = mine ? 10 : 8;
    if (m.x === undefined && m.accuracy) { // geolocation: show the accuracy as a faint halo
      ctx.beginPath(); ctx.arc(p.x, p.y, r + 10, 0, Math.PI * 2);
      ctx.fillStyle = 'rgba(37,99,235,0.10)'; ctx.fill();
    }
    ctx.beginPath();
    ctx.arc(p.x, p.y, r, 0, Math.PI * 2);
    ctx.fillStyle = color;
    ctx.fill();
    ctx.lineWidth = mine ? 3 : 2;
    ctx.strokeStyle = mine ? '#0f172a' : '#ffffff';
    ctx.stroke();
    ctx.font = `${mine ? 600 : 500} 12px system-ui, sans-serif`;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    const label = mine ? `${name} (you)` : name;
    const tx = p.x + r + 5, ty = p.y;
    ctx.lineWidth = 3; ctx.strokeStyle = 'rgba(248,250,252,0.9)';
    ctx.strokeText(label, tx, ty);
    ctx.fillStyle = m.stale ? '#64748b' : '#0f172a';
    ctx.fillText(label, tx, ty);
  }

  renderTable() {
    const now = Date.now();
    const rows = [];
    for (const name of [...this.members.keys()].sort()) {
      const m = this.members.get(name);
      let tr = this.table.querySelector(`tr[data-member="${CSS.escape(name)}"]`);
      if (!tr) {
        tr = document.createElement('tr');
        tr.dataset.member = name;
        tr.innerHTML = '<td class="who"><span class="dot"></span><span class="name"></span></td><td class="pos num"></td><td class="ago num"></td><td class="lat num"></td>';
        tr.querySelector('.name').textContent = name === this.me ? `${name} (you)` : name;
      }
      tr.querySelector('.dot').style.background = m.stale ? '#94a3b8' : colorOf(name);
      tr.querySelector('.pos').textContent = m.x !== undefined ? `${m.x.toFixed(1)}, ${m.y.toFixed(1)}` : `${m.lat.toFixed(5)}, ${m.lng.toFixed(5)}`;
      tr.querySelector('.ago').textContent = m.stale ? 'before restart' : `${fmtAgo(now - m.seen)} ago`;
      tr.querySelector('.lat').textContent = m.latency !== undefined ? `${Math.max(0, m.latency)} ms` : '—';
      tr.classList.toggle('stale', !!m.stale);
      rows.push(tr);
    }
    this.table.replaceChildren(...rows);
  }

  // Dragging: press anywhere to put your marker there, drag to move it.
  pointer(e, phase) {
    if (!this.me || !this.members.has(this.me) && phase !== 'down') return;
    const r = this.canvas.getBoundingClientRect();
    const x = clamp(((e.clientX - r.left) / r.width) * 100), y = clamp(((e.clientY - r.top) / r.height) * 100);
    if (phase === 'down') {
      this.dragging = true;
      this.canvas.setPointerCapture(e.pointerId);
      this.canvas.focus();
    } else if (phase === 'up') {
      if (!this.dragging) return;
      this.dragging = false;
    }
    this.moveMe(x, y, phase === 'up');
  }

  key(e) {
    const me = this.members.get(this.me);
    if (!me || me.x === undefined) return;
    const step = e.shiftKey ? 5 : 1;
    const d = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] }[e.key];
    if (!d) return;
    e.preventDefault();
    this.moveMe(clamp(me.x + d[0]), clamp(me.y + d[1]), true);
  }

  moveMe(x, y, final) {
    x = Math.round(x * 100) / 100;
    y = Math.round(y * 100) / 100;
    const m = this.members.get(this.me) || { shown: null };
    Object.assign(m, { x, y, lat: undefined, lng: undefined, stale: false });
    if (!m.seen) m.seen = Date.now();
    this.members.set(this.me, m);
    this.animate();
    this.onMove(x, y, final);
  }
}

function clamp(v) { return Math.min(100, Math.max(0, v)); }
