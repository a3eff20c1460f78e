// The REST calls of the page: JSON in and out, the token as Authorization: Bearer.
import { ApiError, authHeaders } from './transports/transport.js';

export async function api(method, path, { token = '', body } = {}) {
  const init = { method, headers: authHeaders(token), cache: 'no-store' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, data.error, data.reason || `${method} ${path}: HTTP ${res.status}`);
  return data;
}

// Names of groups and rooms become one path segment and part of a topic.
export const namePattern = /^[A-Za-z0-9_.:@-]{1,64}$/;
