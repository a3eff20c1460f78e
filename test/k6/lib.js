// Shared by the seed compatibility scripts: the load profile, the delivery metrics every
// script must keep at 100 %, and a small STOMP codec.
import exec from 'k6/execution';
import { Counter, Rate } from 'k6/metrics';

function int(v, d) {
  const n = parseInt(v, 10);
  return Number.isNaN(n) ? d : n;
}

export const BASE = __ENV.BASE || 'http://127.0.0.1:8080';
export const WS = BASE.replace(/^http/, 'ws');
export const PEAK = int(__ENV.PEAK, 200); // users at the peak
export const RAMP = int(__ENV.RAMP_S, 5); // seconds of ramp-up, and of ramp-down
export const HOLD = int(__ENV.HOLD_S, 10); // seconds at the peak
export const GROUPS = int(__ENV.GROUPS, 10); // location groups (the seed layout: 10)

// Each sample is one thing a user must get; the thresholds below want all of them.
export const delivered = new Rate('delivered'); // a message reached a member it was for
export const ordered = new Rate('ordered'); // a member's messages came without gap or reorder
export const peakChecks = new Counter('peak_checks'); // deliveries checked while all users were on
export const received = new Counter('received'); // messages members received

export const thresholds = {
  checks: ['rate==1'],
  delivered: ['rate==1'],
  ordered: ['rate==1'],
  peak_checks: ['count>0'], // the peak was reached and checked, not skipped
};

// users is the seed scripts' ramping profile: RAMP up to PEAK, HOLD, RAMP down. It starts a
// second after the observer, if the script has one.
export function users(execName) {
  return {
    executor: 'ramping-vus',
    exec: execName,
    startVUs: 0,
    startTime: '1s',
    stages: [
      { duration: `${RAMP}s`, target: PEAK },
      { duration: `${HOLD}s`, target: PEAK },
      { duration: `${RAMP}s`, target: 0 },
    ],
    gracefulRampDown: '30s',
    gracefulStop: '30s',
  };
}

// usersEnd is when the users' scenario ends, in seconds after the test started.
export const usersEnd = 1 + 2 * RAMP + HOLD;

// STAY_MS is how long a chat user stays after its message, listening.
export const STAY_MS = 4000;

// chatOptions run the users and one observer, which listens to the room from before the
// first user until after the last (observerEndAt).
export const chatOptions = {
  scenarios: {
    observer: { executor: 'per-vu-iterations', vus: 1, iterations: 1, exec: 'observer', maxDuration: `${usersEnd + 60}s` },
    users: users('user'),
  },
  thresholds,
};

// observerEndAt is when the last user has gone (ms since the epoch; call it in the observer).
export function observerEndAt() {
  return exec.scenario.startTime + (usersEnd + STAY_MS / 1000 + 3) * 1000;
}

// inPeak reports whether [from, to] (ms since the epoch) overlaps the users' peak, when every
// user is connected, by at least two seconds: then a member must hear from the others.
export function inPeak(from, to) {
  const start = exec.scenario.startTime;
  const overlap = Math.min(to, start + (RAMP + HOLD) * 1000) - Math.max(from, start + (RAMP + 1) * 1000);
  return overlap >= 2000;
}

// checkPeak records, for a window of a member's life within the peak, whether it heard
// from another member.
export function checkPeak(from, to, heardOthers) {
  if (inPeak(from, to)) {
    peakChecks.add(1);
    delivered.add(heardOthers, { what: 'from others' });
  }
}

// group is this user's location group, and me its name in it.
export function group() {
  return String(exec.vu.idInTest % GROUPS);
}
export function me() {
  return `u${exec.vu.idInTest}`;
}

// position is a shared location; seq counts the user's shares, so members can tell a gap.
export function position(seq) {
  return JSON.stringify({ userId: me(), seq, x: Math.round(Math.random() * 1000), y: Math.round(Math.random() * 1000) });
}

// SenderSeqs checks that each sender's seq numbers arrive consecutively (no gap, no reorder).
export class SenderSeqs {
  constructor() {
    this.last = {};
    this.others = 0;
  }
  // see takes a position; strict: consecutive, else only increasing (routes that drop by design)
  see(p, strict) {
    if (!p || typeof p.userId !== 'string' || typeof p.seq !== 'number') {
      ordered.add(false, { what: 'position' });
      return;
    }
    received.add(1);
    if (p.userId !== me()) {
      this.others++;
    }
    const prev = this.last[p.userId];
    if (prev !== undefined) {
      ordered.add(strict ? p.seq === prev + 1 : p.seq > prev, { what: 'per sender' });
    }
    this.last[p.userId] = p.seq;
  }
}

export function stompFrame(command, headers, body) {
  let s = command + '\n';
  for (const [k, v] of Object.entries(headers)) {
    s += `${k}:${v}\n`;
  }
  return s + '\n' + (body || '') + '\0';
}

// stompFrames parses the frames in one WebSocket message (heart-beats are skipped).
export function stompFrames(data) {
  const out = [];
  for (let chunk of data.split('\0')) {
    chunk = chunk.replace(/^[\r\n]+/, '');
    if (chunk === '') {
      continue;
    }
    const end = chunk.indexOf('\n\n');
    const head = (end < 0 ? chunk : chunk.slice(0, end)).split('\n');
    const headers = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      if (i > 0 && !(line.slice(0, i) in headers)) {
        headers[line.slice(0, i)] = line.slice(i + 1);
      }
    }
    out.push({ command: head[0], headers, body: end < 0 ? '' : chunk.slice(end + 2) });
  }
  return out;
}

// Offsets checks that a member's publications come with consecutive offsets.
export class Offsets {
  constructor() {
    this.last = 0;
  }
  see(offset) {
    if (this.last > 0) {
      ordered.add(offset === this.last + 1, { what: 'offsets' });
    }
    this.last = offset;
  }
}

export function parseJSON(s) {
  try {
    return JSON.parse(s);
  } catch (e) {
    return undefined;
  }
}

// closeWhen closes socket once done() holds, checking every 100 ms, or after maxMs whatever
// happened (the checks then tell what is missing).
export function closeWhen(socket, done, maxMs) {
  const deadline = Date.now() + maxMs;
  socket.setInterval(() => {
    if (done() || Date.now() > deadline) {
      socket.close();
    }
  }, 100);
}
