/**
 * The Redis FIFO store's scripts (redis-fifo-store.ts). Each runs atomically in Redis, so the order
 * and concurrency decisions of a lane are made in one place for the whole cluster. Time is Redis's
 * own (`TIME`), never a node's clock. Payloads are stored as opaque JSON text: the scripts never
 * decode them (Lua's cjson would round large numbers and turn `[]` into `{}`).
 *
 * Keys of lane P (P = `<cluster>:queue:fifo:<lane>`):
 *   P:jobs   hash  id → job JSON            P:att   hash id → failed attempts
 *   P:meta   hash  id → "maxAttempts backoffMs group"
 *   P:g:<group> list of ids, head first     P:ready list of groups whose head may be leased
 *   P:delayed zset group → when its retry delay ends
 *   P:leases zset  id → lease end           P:lg    hash id → group (leased ids)
 *   P:dlq    list  ids, newest first        P:dead  hash id → job JSON   P:why hash id → "failedAt attempts error"
 *   P:stats  hash  retried, deadLettered
 * A group is in P:ready, or P:delayed, or has its head leased, or is empty: never two at once.
 */

const COMMON = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function meta(P, id)
  local m = redis.call('HGET', P .. ':meta', id)
  if not m then return nil end
  local maxAttempts, backoff, group = string.match(m, '^(%d+) (%d+) (.*)$')
  return tonumber(maxAttempts), tonumber(backoff), group
end
local function requeue(P, id, group)
  if redis.call('RPUSH', P .. ':g:' .. group, id) == 1 then redis.call('RPUSH', P .. ':ready', group) end
end
local function fail_one(P, id, err, now)
  if redis.call('ZREM', P .. ':leases', id) == 0 then return 'lost' end
  redis.call('HDEL', P .. ':lg', id)
  local maxAttempts, backoff, group = meta(P, id)
  if not maxAttempts then return 'lost' end
  local attempts = redis.call('HINCRBY', P .. ':att', id, 1)
  if attempts >= maxAttempts then
    redis.call('LPOP', P .. ':g:' .. group)
    redis.call('HSET', P .. ':dead', id, redis.call('HGET', P .. ':jobs', id))
    redis.call('HSET', P .. ':why', id, now .. ' ' .. attempts .. ' ' .. err)
    redis.call('HDEL', P .. ':jobs', id)
    redis.call('HDEL', P .. ':att', id)
    redis.call('LPUSH', P .. ':dlq', id)
    redis.call('HINCRBY', P .. ':stats', 'deadLettered', 1)
    if redis.call('LLEN', P .. ':g:' .. group) > 0 then redis.call('RPUSH', P .. ':ready', group) end
    return 'dead'
  end
  local delay = backoff * math.pow(2, attempts - 1)
  if delay > 2147483647 then delay = 2147483647 end
  redis.call('ZADD', P .. ':delayed', now + delay, group)
  redis.call('HINCRBY', P .. ':stats', 'retried', 1)
  return 'retry'
end
`;

/** KEYS: lanes set. ARGV: P, lane, id, job JSON, maxAttempts, backoffMs, group. → 1, or 0 for a duplicate id. */
export const ENQUEUE_LUA = `${COMMON}
local P = ARGV[1]
if redis.call('HSETNX', P .. ':jobs', ARGV[3], ARGV[4]) == 0 then return 0 end
redis.call('HSET', P .. ':meta', ARGV[3], ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[7])
requeue(P, ARGV[3], ARGV[7])
redis.call('SADD', KEYS[1], ARGV[2])
return 1
`;

/** ARGV: P, max, leaseMs, concurrency. → flat [id, job JSON, attempts, …]. Expired leases fail first. */
export const CLAIM_LUA = `${COMMON}
local P = ARGV[1]
local now = now_ms()
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. ':leases', '-inf', now)) do
  fail_one(P, id, 'lease expired: the process running it stopped or stalled', now)
end
for _, group in ipairs(redis.call('ZRANGEBYSCORE', P .. ':delayed', '-inf', now)) do
  redis.call('ZREM', P .. ':delayed', group)
  redis.call('RPUSH', P .. ':ready', group)
end
local n = math.min(tonumber(ARGV[2]), tonumber(ARGV[4]) - redis.call('ZCARD', P .. ':leases'))
local out = {}
while n > 0 do
  local group = redis.call('LPOP', P .. ':ready')
  if not group then break end
  local id = redis.call('LINDEX', P .. ':g:' .. group, 0)
  if id then
    redis.call('ZADD', P .. ':leases', now + tonumber(ARGV[3]), id)
    redis.call('HSET', P .. ':lg', id, group)
    table.insert(out, id)
    table.insert(out, redis.call('HGET', P .. ':jobs', id) or 'null')
    table.insert(out, redis.call('HGET', P .. ':att', id) or '0')
    n = n - 1
  end
end
return out
`;

/** ARGV: P, id. → 1 done, 0 the lease was lost. */
export const ACK_LUA = `${COMMON}
local P, id = ARGV[1], ARGV[2]
if redis.call('ZREM', P .. ':leases', id) == 0 then return 0 end
local group = redis.call('HGET', P .. ':lg', id)
redis.call('HDEL', P .. ':lg', id)
redis.call('HDEL', P .. ':jobs', id)
redis.call('HDEL', P .. ':att', id)
redis.call('HDEL', P .. ':meta', id)
if group then
  redis.call('LPOP', P .. ':g:' .. group)
  if redis.call('LLEN', P .. ':g:' .. group) > 0 then redis.call('RPUSH', P .. ':ready', group) end
end
return 1
`;

/** ARGV: P, id, error. → 'retry' | 'dead' | 'lost'. */
export const FAIL_LUA = `${COMMON}
return fail_one(ARGV[1], ARGV[2], ARGV[3], now_ms())
`;

/** ARGV: P, leaseMs, id…. Extends only leases still held. */
export const RENEW_LUA = `${COMMON}
local P = ARGV[1]
local until_ms = now_ms() + tonumber(ARGV[2])
for i = 3, #ARGV do
  if redis.call('ZSCORE', P .. ':leases', ARGV[i]) then redis.call('ZADD', P .. ':leases', 'XX', until_ms, ARGV[i]) end
end
return 1
`;

const RESTORE = `
local function restore(P, id)
  local job = redis.call('HGET', P .. ':dead', id)
  local _, _, group = meta(P, id)
  redis.call('HDEL', P .. ':dead', id)
  redis.call('HDEL', P .. ':why', id)
  if not job or not group then return 0 end
  redis.call('HSET', P .. ':jobs', id, job)
  redis.call('HSET', P .. ':att', id, 0)
  requeue(P, id, group)
  return 1
end
`;

/** ARGV: P. → how many dead letters went back (oldest first, so groups keep their order). */
export const REDRIVE_LUA = `${COMMON}${RESTORE}
local P = ARGV[1]
local ids = redis.call('LRANGE', P .. ':dlq', 0, -1)
redis.call('DEL', P .. ':dlq')
local count = 0
for i = #ids, 1, -1 do count = count + restore(P, ids[i]) end
return count
`;

/** ARGV: P, id. → 1 when it was there. */
export const REDRIVE_ONE_LUA = `${COMMON}${RESTORE}
local P = ARGV[1]
if redis.call('LREM', P .. ':dlq', 1, ARGV[2]) == 0 then return 0 end
return restore(P, ARGV[2])
`;

/** ARGV: P, id. → 1 when it was there. */
export const DISCARD_LUA = `
local P = ARGV[1]
if redis.call('LREM', P .. ':dlq', 1, ARGV[2]) == 0 then return 0 end
redis.call('HDEL', P .. ':dead', ARGV[2])
redis.call('HDEL', P .. ':why', ARGV[2])
redis.call('HDEL', P .. ':meta', ARGV[2])
return 1
`;
