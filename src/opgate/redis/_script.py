"""The shared ledger's transitions as one Lua script, run atomically by Redis.

Every call is ``EVALSHA script 1 PREFIX op now_ms chain_bytes principal_bytes
ledger_bytes new_call_share args...`` (``new_call_share``: ``principal_bytes`` less
``Limits.answer_headroom()``, the most a principal may hold after a new call): it
first *sweeps* (expired leases, then expired records, each bounded per call), then
applies one operation. Nothing here ever waits: a
transition is one script, and no lock exists outside it.

Keys under ``PREFIX`` (one hash tag, so one slot)::

    used            string   bytes retained or reserved in the whole ledger
    scopes          hash     scope-key HMAC (hex) -> bytes retained or reserved
    exp             zset     "<chain>:<record>" -> record deadline (ms)
    lease           zset     "r:<chain>:<record>:<claim>" or "s:<reservation>"
                             -> lease deadline (ms)
    res             hash     reservation id -> "<scope> <chain or -> <bytes>"
    rooms           hash     scope-key HMAC (hex) -> bytes of the ledger kept for its answers
    roomsum         string   their sum (admission keeps used + roomsum <= ledger_bytes)
    credits         hash     reservation id, or "a:<record>" for an answer in flight ->
                             bytes it took of its principal's room
    c:<chain>       hash     s scope, r retained (records + reservations), n prompts, l live,
                             a fixed+arguments charge, g:<record> each live record's charge
    r:<record>      hash     the record: c chain, s state, n round, d deadline, b binding MAC,
                             m sealed prompt, p parent, k child, t sealed child token,
                             a answer MAC, ac answer charge, h claim holding it in flight;
                             PEXPIRE'd once at commit (deadline + grace), never extended

The accounting (``used``, ``scopes``, ``c:*``, ``exp``, ``lease``, ``res``, and the
answer rooms ``rooms``, ``roomsum``, ``credits``: the functions ``room_*``) has no
TTL and is authoritative: a record leaves it only through the sweep or a settle,
so the bytes it charged always come back, even when Redis already dropped the
record's payload by its TTL.

Every operation is safe to send twice (a connection that dropped after Redis ran
a script and before its reply arrived is retried on a new one, see ``_wire.py``):
``begin`` finds its reservation, ``claim`` its own claim id, ``commit`` its record
(the key is the hash of a token made for this commit) and answers as the first
run did; ``settle``, ``release`` and ``renew`` are idempotent by themselves.

The sweep leaves a due record that is in flight to its settle, and looks at it
again when its lease is due (its ``exp`` score moves there), so that records in
flight never fill a batch and hold back the removal of the others.

States are the values of ``RecordState``. Results are tables whose first item is
a status: ``ok``, ``expired``, ``busy``, ``busy_principal``, ``busy_ledger``,
``limit``, ``differs``, ``lost``.
"""

from __future__ import annotations

__all__ = ["SCRIPT"]

SCRIPT = r"""
local P = KEYS[1]
local op = ARGV[1]
local now = tonumber(ARGV[2])
local CHAIN_MAX = tonumber(ARGV[3])
local PRINCIPAL_MAX = tonumber(ARGV[4])
local LEDGER_MAX = tonumber(ARGV[5])
local PRINCIPAL_NEW = tonumber(ARGV[6])  -- the share new calls may fill (answers, the rest)
local A = 7  -- first operation argument

local USED, SCOPES, EXP = P .. 'used', P .. 'scopes', P .. 'exp'
local LEASE, RES = P .. 'lease', P .. 'res'
local IN_FLIGHT = {answering = true, replaying = true, recovering = true}
local CLAIMED = {answering = 'answer', replaying = 'replay', recovering = 'recover'}

local function num(v) return tonumber(v) or 0 end
-- (negative amounts are written 0 - n: Lua's -0 would reach Redis as "-0", not an integer)

-- Answer rooms (opgate._ledger.answer_room): every principal holding data keeps up to
-- ROOM bytes of the ledger for its answers; new calls set it to ROOM, an answer's
-- reservation is paid from it first and gives back what it did not retain. Admission
-- keeps used + roomsum <= LEDGER_MAX. Keys: rooms (scope -> room), roomsum, credits
-- (reservation -> what it took of its principal's room).
local ROOMS, ROOMSUM, CREDITS = P .. 'rooms', P .. 'roomsum', P .. 'credits'
local ROOM = PRINCIPAL_MAX - PRINCIPAL_NEW  -- Limits.answer_headroom()

local function room_kept(scope) return num(redis.call('HGET', ROOMS, scope)) end

-- the ledger bytes beyond the rooms kept that reserving n takes (ck: an answer's chain)
local function room_need(scope, n, ck)
  local kept = room_kept(scope)
  if not ck then return n + ROOM - kept end
  return n - math.min(kept, n)
end

local function room_set(scope, room)
  local kept = room_kept(scope)
  if room == kept then return end
  redis.call('HSET', ROOMS, scope, room)
  redis.call('INCRBY', ROOMSUM, room - kept)
end

-- after reserving n (admitted by room_need): a new call's room, or an answer's credit.
-- An answer's reservation keeps n - ac (the answer's ac moves to its record at once):
-- what the room paid for each part is kept apart, so that both come back exactly.
local function room_take(scope, n, ck, res, key, ac)
  if not ck then room_set(scope, ROOM) return end
  local kept = room_kept(scope)
  local rest = math.min(kept, n - ac)
  local answer = math.min(kept - rest, ac)
  room_set(scope, kept - rest - answer)
  if rest > 0 then redis.call('HSET', CREDITS, res, rest) end
  if answer > 0 then redis.call('HSET', CREDITS, 'a:' .. key, answer) end
end

-- a reservation of scope gives back left bytes: its credit comes back to the room
local function room_give(scope, res, left)
  local credit = num(redis.call('HGET', CREDITS, res))
  if credit == 0 then return end
  redis.call('HDEL', CREDITS, res)
  if left > 0 then room_set(scope, math.min(ROOM, room_kept(scope) + math.min(credit, left))) end
end

-- a settled answer: what the room paid for it comes back if it was reverted
local function room_settle(scope, key, reverted)
  local answer = num(redis.call('HGET', CREDITS, 'a:' .. key))
  if answer == 0 then return end
  redis.call('HDEL', CREDITS, 'a:' .. key)
  if reverted and scope and redis.call('HEXISTS', SCOPES, scope) == 1 then
    room_set(scope, math.min(ROOM, room_kept(scope) + answer))
  end
end

local function room_drop(scope)
  local kept = room_kept(scope)
  redis.call('HDEL', ROOMS, scope)
  if kept ~= 0 then redis.call('DECRBY', ROOMSUM, kept) end
end

local function uncharge(scope, n)
  if n == 0 then return end
  redis.call('DECRBY', USED, n)
  if redis.call('HINCRBY', SCOPES, scope, 0 - n) <= 0 then
    redis.call('HDEL', SCOPES, scope)
    room_drop(scope)
  end
end

local function charge(scope, n)
  redis.call('INCRBY', USED, n)
  redis.call('HINCRBY', SCOPES, scope, n)
end

local function drop_chain_if_empty(ck)
  local l, r = unpack(redis.call('HMGET', ck, 'l', 'r'))
  if num(l) <= 0 and num(r) <= 0 then redis.call('DEL', ck) end
end

-- room for n more bytes: nil, or the status refusing it
local function room(scope, n, ck)
  if ck and num(redis.call('HGET', ck, 'r')) + n > CHAIN_MAX then return 'limit' end
  local share = PRINCIPAL_MAX
  if not ck then share = PRINCIPAL_NEW end
  if num(redis.call('HGET', SCOPES, scope)) + n > share then return 'busy_principal' end
  local rooms = num(redis.call('GET', ROOMSUM))
  if num(redis.call('GET', USED)) + rooms + room_need(scope, n, ck) > LEDGER_MAX then
    return 'busy_ledger'
  end
  return nil
end

local function release(id)
  local entry = redis.call('HGET', RES, id)
  redis.call('ZREM', LEASE, 's:' .. id)
  if not entry then return end
  redis.call('HDEL', RES, id)
  local scope, chain, n = string.match(entry, '^(%S+) (%S+) (%-?%d+)$')
  n = tonumber(n)
  room_give(scope, id, n)
  uncharge(scope, n)
  if chain ~= '-' then
    local ck = P .. 'c:' .. chain
    if redis.call('EXISTS', ck) == 1 then
      redis.call('HINCRBY', ck, 'r', 0 - n)
      drop_chain_if_empty(ck)
    end
  end
end

-- take n bytes out of a reservation (they stay charged, now to a record or chain)
local function spend(id, n)
  local entry = redis.call('HGET', RES, id)
  local scope, chain, left = string.match(entry, '^(%S+) (%S+) (%-?%d+)$')
  redis.call('HSET', RES, id, scope .. ' ' .. chain .. ' ' .. (tonumber(left) - n))
end

local function remove(chain, key)
  local ck = P .. 'c:' .. chain
  redis.call('ZREM', EXP, chain .. ':' .. key)
  redis.call('DEL', P .. 'r:' .. key)
  redis.call('HDEL', CREDITS, 'a:' .. key)  -- an answer that broke with its replica
  local g = redis.call('HGET', ck, 'g:' .. key)
  if not g then return end
  local scope = redis.call('HGET', ck, 's')
  g = tonumber(g)
  uncharge(scope, g)
  redis.call('HDEL', ck, 'g:' .. key)
  redis.call('HINCRBY', ck, 'r', 0 - g)
  if redis.call('HINCRBY', ck, 'l', -1) <= 0 then
    local a = num(redis.call('HGET', ck, 'a'))
    uncharge(scope, a)
    redis.call('HINCRBY', ck, 'r', 0 - a)
    redis.call('HSET', ck, 'a', 0)
  end
  drop_chain_if_empty(ck)
end

local function is_live(chain, key)
  return redis.call('HEXISTS', P .. 'c:' .. chain, 'g:' .. key) == 1
end

local SWEEP = 64
local function sweep()
  local expired = redis.call('ZRANGEBYSCORE', LEASE, '-inf', now, 'LIMIT', 0, SWEEP)
  -- records first: a broken answer keeps its charge; then the reservations' rest
  for _, member in ipairs(expired) do
    local chain, key, claim = string.match(member, '^r:(%w+):(%w+):(%w+)$')
    if chain then
      redis.call('ZREM', LEASE, member)
      local rk = P .. 'r:' .. key
      local s, h = unpack(redis.call('HMGET', rk, 's', 'h'))
      if s and h == claim and IN_FLIGHT[s] then
        -- its holder stopped renewing (died): the transition broke
        redis.call('HSET', rk, 's', (s == 'replaying') and 'answered' or 'needs_recovery')
        redis.call('HDEL', rk, 'h')
      end
    end
  end
  for _, member in ipairs(expired) do
    local id = string.match(member, '^s:(%w+)$')
    if id then release(id) end
  end
  local due = redis.call('ZRANGEBYSCORE', EXP, '-inf', now, 'LIMIT', 0, SWEEP)
  for _, member in ipairs(due) do
    local chain, key = string.match(member, '^(%w+):(%w+)$')
    local s, h = unpack(redis.call('HMGET', P .. 'r:' .. key, 's', 'h'))
    local until_lease = nil
    if s and IN_FLIGHT[s] and h then
      until_lease = redis.call('ZSCORE', LEASE, 'r:' .. chain .. ':' .. key .. ':' .. h)
    end
    if until_lease then
      -- in flight: its settle removes it. Look again once its lease is due, so that
      -- records in flight never fill the batch and hold the others back.
      redis.call('ZADD', EXP, math.max(tonumber(until_lease), now + 1), member)
    else
      remove(chain, key)
    end
  end
end

sweep()

if op == 'begin' then
  local scope, chain, res, n, a, lease = ARGV[A], ARGV[A+1], ARGV[A+2], tonumber(ARGV[A+3]),
    tonumber(ARGV[A+4]), tonumber(ARGV[A+5])
  if redis.call('HEXISTS', RES, res) == 1 then return {'ok'} end  -- this run, again
  local refused = room(scope, n, nil)
  if refused then return {refused} end
  charge(scope, n)
  room_take(scope, n, nil, res)
  redis.call('HSET', P .. 'c:' .. chain, 's', scope, 'r', n, 'n', 0, 'l', 0, 'a', a)
  redis.call('HSET', RES, res, scope .. ' ' .. chain .. ' ' .. n)
  redis.call('ZADD', LEASE, lease, 's:' .. res)
  return {'ok'}

elseif op == 'commit' then
  local res, chain, parent, claim, key, pcharge, wanted, grace, binding, prompt, token =
    ARGV[A], ARGV[A+1], ARGV[A+2], ARGV[A+3], ARGV[A+4], tonumber(ARGV[A+5]),
    tonumber(ARGV[A+6]), tonumber(ARGV[A+7]), ARGV[A+8], ARGV[A+9], ARGV[A+10]
  local ck = P .. 'c:' .. chain
  local rk = P .. 'r:' .. key
  local done_c, done_n, done_d = unpack(redis.call('HMGET', rk, 'c', 'n', 'd'))
  if done_c == chain then return {'ok', tonumber(done_n), tonumber(done_d)} end  -- this run, again
  if redis.call('HEXISTS', RES, res) == 0 or redis.call('EXISTS', ck) == 0 then
    return {'expired'}
  end
  local deadline = wanted
  local pk = P .. 'r:' .. parent
  if parent ~= '' then
    local s, h, d = unpack(redis.call('HMGET', pk, 's', 'h', 'd'))
    if s ~= 'answering' or h ~= claim then return {'expired'} end
    deadline = math.min(deadline, tonumber(d))
  end
  if deadline <= now then return {'expired'} end
  local round = redis.call('HINCRBY', ck, 'n', 1)
  redis.call('HINCRBY', ck, 'l', 1)
  redis.call('HSET', ck, 'g:' .. key, pcharge)
  redis.call('HSET', rk, 'c', chain, 's', 'pending', 'n', round, 'd', deadline, 'b', binding,
    'm', prompt, 'p', parent)
  redis.call('PEXPIRE', rk, deadline - now + grace)
  redis.call('ZADD', EXP, deadline, chain .. ':' .. key)
  spend(res, pcharge)
  if parent == '' then
    spend(res, num(redis.call('HGET', ck, 'a')))
  else
    redis.call('HSET', pk, 's', 'answered', 'k', key, 't', token)
    redis.call('HDEL', pk, 'h')
    redis.call('ZREM', LEASE, 'r:' .. chain .. ':' .. parent .. ':' .. claim)
  end
  release(res)
  return {'ok', round, deadline}

elseif op == 'find' then
  local key = ARGV[A]
  local rk = P .. 'r:' .. key
  local c, s, n, d, b, m = unpack(redis.call('HMGET', rk, 'c', 's', 'n', 'd', 'b', 'm'))
  if not c or not is_live(c, key) then return {'expired'} end
  return {'ok', c, s, n, d, b, m}

elseif op == 'claim' then
  local key, chain, answer, ac, n, res, claim, lease = ARGV[A], ARGV[A+1], ARGV[A+2],
    tonumber(ARGV[A+3]), tonumber(ARGV[A+4]), ARGV[A+5], ARGV[A+6], tonumber(ARGV[A+7])
  local rk = P .. 'r:' .. key
  local s, d, a, h = unpack(redis.call('HMGET', rk, 's', 'd', 'a', 'h'))
  if not s or not is_live(chain, key) or tonumber(d) <= now then return {'expired'} end
  if IN_FLIGHT[s] then
    if h == claim then return {'ok', CLAIMED[s]} end  -- this run, again
    return {'busy'}
  end
  local ck = P .. 'c:' .. chain
  if s == 'pending' then
    local scope = redis.call('HGET', ck, 's')
    local refused = room(scope, n, ck)
    if refused then return {refused} end
    charge(scope, n)
    room_take(scope, n, ck, res, key, ac)
    redis.call('HINCRBY', ck, 'r', n)
    -- the answer is retained with the record from now on; the rest is the next prompt's
    redis.call('HINCRBY', ck, 'g:' .. key, ac)
    redis.call('HSET', RES, res, scope .. ' ' .. chain .. ' ' .. (n - ac))
    redis.call('ZADD', LEASE, lease, 's:' .. res)
    redis.call('HSET', rk, 's', 'answering', 'a', answer, 'ac', ac, 'h', claim)
    redis.call('ZADD', LEASE, lease, 'r:' .. chain .. ':' .. key .. ':' .. claim)
    return {'ok', 'answer'}
  end
  if a ~= answer then return {'differs'} end
  local event = (s == 'answered') and 'replay' or 'recover'
  redis.call('HSET', rk, 's', (s == 'answered') and 'replaying' or 'recovering', 'h', claim)
  redis.call('ZADD', LEASE, lease, 'r:' .. chain .. ':' .. key .. ':' .. claim)
  return {'ok', event}

elseif op == 'settle' then
  local key, chain, event, claim, res = ARGV[A], ARGV[A+1], ARGV[A+2], ARGV[A+3], ARGV[A+4]
  local rk = P .. 'r:' .. key
  local s, h, d, ac = unpack(redis.call('HMGET', rk, 's', 'h', 'd', 'ac'))
  local status = 'ok'
  if not s or h ~= claim or not IN_FLIGHT[s] then
    status = 'lost'  -- its lease ran out and the record moved on, or it left the ledger
  else
    redis.call('ZREM', LEASE, 'r:' .. chain .. ':' .. key .. ':' .. claim)
    redis.call('HDEL', rk, 'h')
    local nexts = {revert = 'pending', finished = 'completed', broken = 'needs_recovery',
      replayed = 'answered', recovered = 'completed'}
    if event == 'revert' then
      local ck = P .. 'c:' .. chain
      ac = num(ac)
      if ac > 0 and is_live(chain, key) then
        uncharge(redis.call('HGET', ck, 's'), ac)
        redis.call('HINCRBY', ck, 'g:' .. key, 0 - ac)
        redis.call('HINCRBY', ck, 'r', 0 - ac)
      end
      redis.call('HDEL', rk, 'a', 'ac')
    end
    room_settle(redis.call('HGET', P .. 'c:' .. chain, 's'), key, event == 'revert')
    redis.call('HSET', rk, 's', nexts[event])
    if tonumber(d) <= now then remove(chain, key) end
  end
  if res ~= '' then release(res) end
  return {status}

elseif op == 'child' then
  local key = ARGV[A]
  local child, token = unpack(redis.call('HMGET', P .. 'r:' .. key, 'k', 't'))
  if not child then return {'expired'} end
  local c, n, d, m = unpack(redis.call('HMGET', P .. 'r:' .. child, 'c', 'n', 'd', 'm'))
  if not c or not is_live(c, child) then return {'expired'} end
  if tonumber(d) <= now then
    remove(c, child)
    return {'expired'}
  end
  return {'ok', child, c, n, d, m, token}

elseif op == 'release' then
  release(ARGV[A])
  return {'ok'}

elseif op == 'renew' then
  local lease = tonumber(ARGV[A])
  local renewed = 0
  for i = A + 1, #ARGV do
    renewed = renewed + redis.call('ZADD', LEASE, 'XX', 'CH', lease, ARGV[i])
  end
  return {'ok', renewed}

elseif op == 'stats' then
  return {'ok', num(redis.call('GET', USED)), redis.call('HLEN', SCOPES),
    redis.call('ZCARD', EXP), redis.call('HLEN', RES)}
end
return redis.error_reply('opgate ledger: unknown operation ' .. tostring(op))
"""
