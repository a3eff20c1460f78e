// What the test files share: fresh names, waiting, the server API and tokens.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let n = 0;

// namer returns a function that names a topic under prefix that no other test uses.
export const namer = (prefix) => (what) => `${prefix}/${what}-${Date.now().toString(36)}-${++n}`;

// waitFor polls cond, which may return a promise, until it is true, or fails after ms.
export async function waitFor(what, cond, ms = 10000) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// serverAPI calls the server API of the server at base (POST /api/server/publish, ...) with
// its --api-key and returns the answer, which must be 200.
export async function serverAPI(base, apiKey, method, path, body) {
  const res = await fetch(base + '/api/server/' + path, {
    method, headers: { Authorization: 'apikey ' + apiKey, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  const data = await res.json();
  assert.equal(res.status, 200, `server API ${path}: ${JSON.stringify(data)}`);
  return data;
}

// login returns the token POST /api/login of the open server at base gives user.
export async function login(base, user) {
  const res = await fetch(base + '/api/login', { method: 'POST', body: JSON.stringify({ user }) });
  return (await res.json()).token;
}

// mint returns an HS256 token for user signed with secret, expiring ttl ms from now (in the
// past when ttl is negative).
export function mint(secret, user, ttl) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const body = b64({ alg: 'HS256', typ: 'JWT' }) + '.' + b64({ sub: user, iat: now, exp: Math.floor((Date.now() + ttl) / 1000) });
  return body + '.' + createHmac('sha256', secret).update(body).digest('base64url');
}
