// The REST calls of the page: JSON in and out, the token as Authorization: Bearer.
// ApiError is an error answer of the server: {error, reason} with an HTTP status.
export class ApiError extends Error {
  constructor(status, code, reason) {
    super(reason || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

export function authHeaders(token, extra = {}) {
  return token ? { ...extra, Authorization: 'Bearer ' + token } : extra;
}

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
