// rtlab's server API from Node 18+ (docs/protocol.md, "Server API for backends").
// Run: RTLAB_API_KEY=... node examples/server-api/server-api.mjs
async function rtlab(call, body) {
  const res = await fetch(`http://127.0.0.1:8080/api/server/${call}`, {
    method: 'POST',
    headers: { Authorization: `apikey ${process.env.RTLAB_API_KEY}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = await res.json();
  if (res.status !== 200) throw new Error(`rtlab ${call}: ${answer.error}: ${answer.reason}`);
  return answer;
}

console.log(await rtlab('publish', { topic: 'notify/ann', type: 'NOTIFY', data: { message: 'hi' } }));
console.log(await rtlab('disconnect', { user: 'ann', reason: 'account suspended' }));
console.log(await rtlab('presence', { topic: 'chat/lobby' }));
