// The five transports, in the order the page offers them.
import { ShortPoll } from './shortpoll.js';
import { LongPoll } from './longpoll.js';
import { SSE } from './sse.js';
import { WS } from './ws.js';
import { Stomp } from './stomp.js';

export const transports = [ShortPoll, LongPoll, SSE, WS, Stomp];

export function transportById(id) {
  return transports.find((t) => t.id === id) || WS;
}
