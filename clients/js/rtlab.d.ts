// Type declarations of rtlab.js.

export type TransportName = 'ws' | 'stomp' | 'sse' | 'longpoll' | 'shortpoll';

export interface Publication<T = unknown> {
  topic: string;
  offset: number;
  epoch: string;
  time: string;
  sender?: string;
  type?: string;
  data: T;
}

export interface Gap {
  topic: string;
  /** The offset of the publication that follows the break, when the server says. */
  offset?: number;
  epoch: string;
  reason: string;
}

export interface ClientInfo {
  client: string;
  node: string;
  user?: string;
  transport?: string;
  joined: string;
}

export interface ClientOptions {
  /** Transports to try, best first. Default ['ws', 'stomp', 'sse', 'longpoll', 'shortpoll']. */
  transports?: TransportName[];
  /** A token (JWT) sent as access_token, STOMP passcode or Authorization: Bearer. */
  token?: string;
  /**
   * Returns a fresh token: called before the token expires and when the server refuses it. A
   * throw is an error event (token_error); null or '' means there is none: the client stops.
   */
  getToken?: () => Promise<string | null>;
  /** WebSocket implementation where there is no global one (Node 20: the ws package). */
  WebSocket?: unknown;
  fetch?: typeof fetch;
  minBackoff?: number;
  maxBackoff?: number;
  /** ms a transport has to come up (default 5000). */
  connectTimeout?: number;
  /** ms of silence after which a connection is dead (default 20000). */
  maxSilence?: number;
  /** ms since a transport last delivered within which it is retried before the next (60000). */
  keepRecent?: number;
  minLive?: number;
  failures?: number;
  retryBetter?: number;
  pollInterval?: number;
  longPollWait?: number;
  presenceInterval?: number;
  refreshBefore?: number;
}

export interface SubscribeOptions {
  /** Resume after this offset (0: from the oldest retained). Without it: from now. */
  since?: number;
  /** The epoch since belongs to. */
  epoch?: string;
  /** Ask for presence (implied by a presence, join or leave handler). */
  presence?: boolean;
}

export interface SubscriptionState {
  state: 'subscribing' | 'subscribed' | 'unsubscribed';
  transport: TransportName;
  reason: string;
}

export interface Handlers<T = unknown> {
  publication?(p: Publication<T>): void;
  gap?(g: Gap): void;
  state?(s: SubscriptionState): void;
  error?(e: RtlabError): void;
  presence?(clients: ClientInfo[]): void;
  join?(c: ClientInfo): void;
  leave?(c: ClientInfo): void;
}

export class RtlabError extends Error {
  code: string;
  status: number;
}

export class Subscription<T = unknown> {
  readonly topic: string;
  /** The position of the last publication delivered, where a reconnect resumes. */
  readonly position: { offset: number; epoch: string } | null;
  readonly state: SubscriptionState['state'];
  /** Who is present (when presence was asked for), by node/client. */
  readonly members: Map<string, ClientInfo>;
  unsubscribe(): void;
  /** Adds a handler; returns a function that removes it. */
  on<K extends keyof Handlers<T>>(event: K, fn: NonNullable<Handlers<T>[K]>): () => void;
}

export interface ClientState {
  state: 'connecting' | 'connected' | 'disconnected' | 'closed';
  transport: TransportName;
  reason: string;
}

export interface TransportEvent {
  transport: TransportName;
  event: 'trying' | 'connected' | 'failed' | 'upgrading';
  reason?: string;
}

export interface Ack {
  topic: string;
  offset: number;
  epoch: string;
  /** A retry found the publication published before, at offset. */
  duplicate?: boolean;
}

export class Client {
  constructor(url: string, opts?: ClientOptions);
  readonly transport: TransportName;
  readonly state: ClientState['state'];
  subscribe<T = unknown>(topic: string, opts?: SubscribeOptions, handlers?: Handlers<T>): Subscription<T>;
  /** idem: the idempotency key (default: a new one); retries: of an unknown outcome (5), which later publishes wait for. */
  publish(topic: string, data: unknown, opts?: { type?: string; idem?: string; retries?: number }): Promise<Ack>;
  presence(topic: string): Promise<{ topic: string; clients: ClientInfo[]; users: string[] }>;
  history(topic: string, opts?: { since?: number; limit?: number; epoch?: string }): Promise<{
    topic: string; epoch: string; offset: number; recovered: boolean; reason?: string; publications: Publication[];
  }>;
  /** Pages back: publications older than before (0: the newest), newest first, and the next cursor. */
  history(topic: string, opts: { before: number; limit?: number; epoch?: string }): Promise<{
    topic: string; epoch: string; offset: number; publications: Publication[]; next: { before: number; epoch: string } | null;
  }>;
  close(): void;
  on(event: 'state', fn: (s: ClientState) => void): () => void;
  on(event: 'transport', fn: (e: TransportEvent) => void): () => void;
  on(event: 'disconnect', fn: (d: { code: string; reason: string; reconnect: boolean }) => void): () => void;
  on(event: 'error', fn: (e: RtlabError) => void): () => void;
}
