package redis

import goredis "github.com/redis/go-redis/v9"

// Keys and channels, for a topic T under prefix P:
//
//	P:m:{T}   hash: e = epoch, o = top offset. Outlives the stream by IdleTTL.
//	P:s:{T}   stream: one entry per retained publication, ID "<offset>-0", fields t (ms) and p
//	          (the encoded publication, as published on the channel).
//	P:c:T     pub/sub channel of T's publications, in offset order; P:c:{T}, a shard channel in
//	          the keys' slot, on a Redis Cluster.
//	P:i:{T}:N:S:K  string "<offset> <epoch> <time-ms>": the publication sender S (N its length)
//	          published with idempotency key K; expires with T's history TTL (10 minutes for a
//	          durable topic). Only keyed publishes make one.
//	P:durable sorted set: durable topics (no TTL), scored by their latest publish time (ms), for
//	          archive sweeps (Broker.TopicsSince). On a cluster it lives on another slot than
//	          the topic's keys, and is updated before the script instead of by it.
//
// A durable topic's keys never expire and its stream is trimmed by MAXLEN only; a TTL of 0 in
// the scripts' arguments means that.
//
// The braces make a topic's keys (and on a cluster its channel) hash to the same Redis Cluster
// slot, as scripts need.
//
// The encoded publication is package replica's: "<offset> <epoch> <time-ms> <len(sender)>
// <len(type)> " followed by sender, type and data with no separators. The node builds the tail
// (everything after the epoch, replica.AppendTail); the script prepends the head, offset and
// epoch, which only it knows. replica.Decode reads it back.

// trimLua drops the expired head of a stream (entries whose t is before cutoff) and returns the
// offset of the oldest entry left, 0 when none is. Publication times come from the nodes'
// clocks; the head is trimmed up to the first unexpired entry.
const trimLua = `
local function trim(stream, cutoff)
  local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
  if #first == 0 then return 0 end
  if tonumber(first[1][2][2]) >= cutoff then
    return tonumber(string.match(first[1][1], '^(%d+)'))
  end
  for _ = 1, 64 do
    local head = redis.call('XRANGE', stream, '-', '+', 'COUNT', 32)
    if #head == 0 then return 0 end
    for i, e in ipairs(head) do
      if tonumber(e[2][2]) >= cutoff then
        if i > 1 then redis.call('XTRIM', stream, 'MINID', e[1]) end
        return tonumber(string.match(e[1], '^(%d+)'))
      end
    end
    local last = tonumber(string.match(head[#head][1], '^(%d+)'))
    redis.call('XTRIM', stream, 'MINID', string.format('%d-0', last + 1))
  end
  local head = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
  if #head == 0 then return 0 end
  return tonumber(string.match(head[1][1], '^(%d+)'))
end

-- expire keeps key for ttl ms more, or for good when ttl is 0 (durable topics).
local function expire(key, ttl)
  if tonumber(ttl) > 0 then
    redis.call('PEXPIRE', key, ttl)
  else
    redis.call('PERSIST', key)
  end
end

-- meta returns the topic's epoch, starting a new one (and dropping any stale stream) when the
-- topic has none, and keeps the meta key for metaTTL more.
local function meta(stream, m, newEpoch, metaTTL)
  local epoch = redis.call('HGET', m, 'e')
  if not epoch then
    epoch = newEpoch
    redis.call('DEL', stream)
    redis.call('HSET', m, 'e', epoch, 'o', 0)
  end
  expire(m, metaTTL)
  return epoch
end
`

// publishScript assigns the next offset, appends to the stream and publishes on the channel in
// one step, so the channel's order is offset order and history never lags delivery.
//
// It is the cost of a publication in Redis, so it makes few calls: the meta and trim helpers
// are inlined, and the expired head is trimmed at every 16th offset only (history reads trim
// it before reading, so this only bounds what expired entries hold in memory, and MAXLEN
// bounds that too).
//
// A keyed publish first looks for its key: a retry of a publication of this epoch returns the
// original's position and publishes nothing.
//
// KEYS: stream, meta, for a durable topic the durable set, and for a keyed publish the key's
// key, last. ARGV: channel, new epoch, size, TTL ms, meta TTL ms, cutoff ms, time ms, body (the
// encoding after the epoch), topic, the publish command (PUBLISH, or SPUBLISH on a cluster,
// where the channel shares the keys' slot), the key's TTL ms ('0': no key), and '1' when the
// durable set is in KEYS. Returns {offset, epoch}, or {offset, epoch, 1, time ms} for a retry.
var publishScript = goredis.NewScript(trimLua + `
local stream, m = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', m, 'e')
if not epoch then
  epoch = ARGV[2]
  redis.call('DEL', stream)
  redis.call('HSET', m, 'e', epoch, 'o', 0)
end
local idem = nil
if ARGV[11] ~= '0' then
  idem = KEYS[#KEYS]
  local seen = redis.call('GET', idem)
  if seen then
    local o, e, t = string.match(seen, '^(%d+) (%S+) (%d+)$')
    if e == epoch then return {tonumber(o), epoch, 1, tonumber(t)} end
  end
end
local off = redis.call('HINCRBY', m, 'o', 1)
local payload = string.format('%d ', off) .. epoch .. ' ' .. ARGV[8]
redis.call('XADD', stream, 'MAXLEN', ARGV[3], string.format('%d-0', off), 't', ARGV[7], 'p', payload)
if ARGV[4] ~= '0' then
  redis.call('PEXPIRE', m, ARGV[5])
  redis.call('PEXPIRE', stream, ARGV[4])
  if off % 16 == 0 then trim(stream, tonumber(ARGV[6])) end
else
  redis.call('PERSIST', m)
  redis.call('PERSIST', stream)
end
if ARGV[12] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[9])
end
if idem then
  redis.call('SET', idem, string.format('%d ', off) .. epoch .. ' ' .. ARGV[7], 'PX', ARGV[11])
end
redis.call(ARGV[10], ARGV[1], payload)
return {off, epoch}
`)

// historyScript reads a topic's position and retained publications after since in one step.
//
// KEYS: stream, meta. ARGV: new epoch, first offset wanted (since+1), count (0 = all),
// cutoff ms, meta TTL ms. Returns {epoch, top, oldest, payload...}.
var historyScript = goredis.NewScript(trimLua + `
local stream, m = KEYS[1], KEYS[2]
local epoch = meta(stream, m, ARGV[1], ARGV[5])
local top = tonumber(redis.call('HGET', m, 'o'))
local oldest = trim(stream, tonumber(ARGV[4]))
local res = {epoch, top, oldest}
if oldest > 0 and tonumber(ARGV[2]) <= top then
  local entries
  if tonumber(ARGV[3]) > 0 then
    entries = redis.call('XRANGE', stream, ARGV[2], '+', 'COUNT', ARGV[3])
  else
    entries = redis.call('XRANGE', stream, ARGV[2], '+')
  end
  for _, e in ipairs(entries) do
    res[#res + 1] = e[2][4]
  end
end
return res
`)
