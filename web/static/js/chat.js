// ChatView renders a room: its messages (ENTER, TALK, LEAVE, OWNER) and its members.
import { colorOf } from './map.js';

const clock = (t) => new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

export class ChatView {
  constructor({ log, members, title }) {
    this.log = log;
    this.membersEl = members;
    this.title = title;
    this.me = '';
  }

  reset(room, me) {
    this.me = me;
    this.log.replaceChildren();
    this.membersEl.replaceChildren();
    this.title.textContent = room ? `#${room}` : '';
    if (!room) this.system('Enter a room to chat.', 'hint');
  }

  // add renders one publication of the room.
  add(p) { this.append(this.item(p)); }

  // prepend puts older publications (newest first, as history pages come) above the others,
  // keeping what is on screen where it is.
  prepend(ps) {
    const h = this.log.scrollHeight;
    for (const p of ps) {
      if (this.log.querySelector(`li[data-offset="${p.offset}"][data-epoch="${p.epoch}"]`)) continue;
      this.log.querySelector('li.hint')?.remove();
      this.log.prepend(this.item(p));
    }
    this.log.scrollTop += this.log.scrollHeight - h;
  }

  // start marks the beginning of the room's history.
  start() {
    if (this.log.querySelector('li.start')) return;
    const li = document.createElement('li');
    li.className = 'sys start';
    li.textContent = 'Beginning of the room';
    this.log.prepend(li);
  }

  // item is the list item of one publication.
  item(p) {
    const d = p.data && typeof p.data === 'object' ? p.data : { message: String(p.data ?? '') };
    const who = p.sender || d.sender || 'anonymous';
    const li = document.createElement('li');
    li.dataset.offset = p.offset;
    li.dataset.epoch = p.epoch;
    li.title = `offset ${p.offset} · epoch ${p.epoch}`;
    switch (p.type) {
      case 'ENTER':
        li.className = 'sys';
        li.textContent = `${who} entered`;
        break;
      case 'LEAVE':
        li.className = 'sys';
        li.textContent = `${who} left${d.reason ? ` (${d.reason})` : ''}`;
        break;
      case 'OWNER':
        li.className = 'sys';
        li.textContent = `${d.owner} now owns the room`;
        break;
      default: {
        li.className = 'msg' + (who === this.me ? ' mine' : '');
        const name = document.createElement('span');
        name.className = 'who';
        name.textContent = who;
        name.style.color = colorOf(who);
        const text = document.createElement('span');
        text.className = 'text';
        text.textContent = d.message ?? d.content ?? d.text ?? JSON.stringify(d);
        const time = document.createElement('time');
        time.dateTime = p.time;
        time.textContent = clock(p.time || Date.now());
        li.append(name, text, time);
      }
    }
    return li;
  }

  // gap puts a divider where history is missing.
  gap(g) {
    this.system(`History gone: ${g.reason || 'the server could not replay what you missed'}. Messages sent while you were away may be missing.`, 'gap');
  }

  system(text, cls = 'sys') {
    const li = document.createElement('li');
    li.className = cls;
    li.textContent = text;
    this.append(li);
  }

  append(li) {
    const atBottom = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 40;
    this.log.querySelector('li.hint')?.remove();
    this.log.append(li);
    while (this.log.children.length > 500) this.log.firstElementChild.remove();
    if (atBottom) this.log.scrollTop = this.log.scrollHeight;
  }

  // setMembers renders GET /api/chat/{room}/members.
  setMembers(info) {
    const chips = info.members.map((m) => {
      const li = document.createElement('li');
      li.dataset.user = m.user;
      li.className = 'chip' + (m.user === this.me ? ' me' : '');
      const dot = document.createElement('span');
      dot.className = 'dot';
      dot.style.background = colorOf(m.user);
      li.append(dot, m.user);
      if (m.user === info.owner) {
        const o = document.createElement('span');
        o.className = 'owner';
        o.textContent = 'owner';
        li.append(o);
      }
      return li;
    });
    this.membersEl.replaceChildren(...chips);
  }
}
