"""The shared ledger's transitions as one Lua script, run atomically by Redis.

Every call is ``EVALSHA script 1 PREFIX op now_ms chain_bytes principal_bytes
ledger_bytes new_call_share lease_ms late_ms args...`` (``now_ms``: the replica's
clock, for record deadlines; ``new_call_share``: ``principal_bytes`` less
``Limits.answer_headroom()``, the most a principal may hold after a new call;
``lease_ms``: the deployment's lease; ``late_ms``: the Redis time after which a
first run of ``begin``, ``commit`` or ``claim`` does nothing and answers ``late``,
or ``-1``). It first reads Redis's own clock, then *sweeps* (expired leases, then
expired records, each bounded per call), then applies one operation. Nothing here
ever waits: a transition is one script, and no lock exists outside it.

Two clocks:

* **Record deadlines** are the replicas' clock (``now_ms``): a deadline is what the
  caller was told (``expires_at``), and a skewed replica only shifts expiry.
* **Leases** are the *lease clock*: Redis ``TIME``, advancing by at most half a lease
  between two script runs (``clock`` below). Replicas' clocks never enter it, so a
  skewed replica cannot see a peer's lease as run out; and a Redis that was stopped
  (paused, swapped out) does not find every lease run out when it resumes: the
  renewals queued while it was stopped run before the leases can lapse. Holders
  renew every quarter lease, so the lease clock follows Redis time while anything
  is held.

Keys under ``PREFIX`` (one hash tag, so one slot)::

    used            string   bytes retained or reserved in the whole ledger
    scopes          hash     scope-key HMAC (hex) -> bytes retained or reserved
    clock           hash     r last Redis time seen (ms), e the lease clock then (ms)
    exp             zset     "<chain>:<record>" -> record deadline (ms, replica clock)
    lease           zset     "r:<chain>:<record>:<claim>" or "s:<reservation>"
                             -> lease deadline (ms, lease clock)
    res             hash     reservation id -> "<scope> <chain or -> <bytes>"
    rooms           hash     scope-key HMAC (hex) -> bytes of the ledger kept for its answers
    roomsum         string   their sum (admission keeps used + roomsum <= ledger_bytes)
    credits         hash     reservation id, or "a:<record>" for an answer in flight ->
                             bytes it took of its principal's room
    c:<chain>       hash     s scope, r retained (records + reservations), l live,
                             a fixed+arguments charge, g:<record> each live record's charge
    r:<record>      hash     the record: c chain, s state, n round, d deadline, b binding MAC,
                             i identity MAC, v state MAC, m sealed prompt, p parent, k child,
                             t sealed child token, a answer MAC, ac answer charge,
                             h claim holding it in flight, o the state it was claimed from,
                             w state MAC for a broken claim;
                             PEXPIRE'd once at commit (deadline + grace), never extended

Records are authenticated by the replicas, not here (a script cannot know the
secret): ``i`` is an HMAC over the record's key, chain, round, deadline and binding,
``v`` over its key, state and answer; the replica computes each MAC a script
writes, and verifies what it reads before acting on it. A state the script moves
to by itself (a claim whose lease ran out, ``w``) was MAC'd by the claiming replica
in advance. In flight, ``v`` still authenticates the state the claim started from.

The state table (``NEXT``) and the in-flight states are generated from
``opgate.ledger.TRANSITIONS``; every state change goes through ``move``, which
refuses an event the current state does not allow.

The accounting (``used``, ``scopes``, ``c:*``, ``exp``, ``lease``, ``res``, and the
answer rooms ``rooms``, ``roomsum``, ``credits``: the functions ``room_*``) has no
TTL and is authoritative: a record leaves it only through the sweep or a settle,
so the bytes it charged always come back, even when Redis already dropped the
record's payload by its TTL.

Every operation is safe to send twice (a connection that dropped after Redis ran
a script and before its reply arrived is retried on a new one, see ``_wire.py``):
``begin`` finds its reservation, ``claim`` its own claim id, ``commit`` its record
(the key is the hash of a token made for this commit) and answers as the first
run did, before ``late`` is considered; ``settle``, ``release`` and ``renew`` are
idempotent by themselves.

The sweep leaves a due record that is in flight to its settle, and looks at it
again when its lease is due (its ``exp`` score moves there), so that records in
flight never fill a batch and hold back the removal of the others.

Results are tables whose first item is a status (``ok``, ``expired``, ``busy``,
``busy_principal``, ``busy_ledger``, ``limit``, ``differs``, ``lost``, ``late``,
``illegal``) and whose second is Redis's time in ms (the replica's estimate of it
sets ``late_ms``).
"""

from __future__ import annotations

from ..ledger import IN_FLIGHT, TRANSITIONS, Event, RecordState, transition

__all__ = ["BREAK", "CLAIM_EVENTS", "GIVE_BACK", "SCRIPT"]

S, E = RecordState, Event

#: The events that take a record for a request, tried in this order.
CLAIM_EVENTS = (E.ANSWER, E.REPLAY, E.RECOVER)

#: What a claim in flight becomes when its lease runs out (its replica stopped).
BREAK = {S.ANSWERING: E.BROKEN, S.REPLAYING: E.REPLAYED, S.RECOVERING: E.BROKEN}

#: What a claim in flight becomes when its replica gives it back unused (its reply
#: never arrived, so nothing was dispatched).
GIVE_BACK = {S.ANSWERING: E.REVERT, S.REPLAYING: E.REPLAYED, S.RECOVERING: E.BROKEN}

for _state, _event in (*BREAK.items(), *GIVE_BACK.items()):
    transition(_state, _event)  # each is in the table (LedgerStateError otherwise)
assert set(BREAK) == set(GIVE_BACK) == IN_FLIGHT


def _lua_table(rows: dict[str, dict[str, str]]) -> str:
    lines = []
    for name, cells in rows.items():
        inner = ", ".join(f"{key} = '{value}'" for key, value in cells.items())
        lines.append(f"  {name} = {{{inner}}},")
    return "{\n" + "\n".join(lines) + "\n}"


def _generated() -> dict[str, str]:
    claimed = {}
    for moves in TRANSITIONS.values():
        for event in CLAIM_EVENTS:
            if event in moves:
                claimed[moves[event].value] = event.value
    return {
        "__NEXT__": _lua_table(
            {
                s.value: {e.value: t.value for e, t in moves.items()}
                for s, moves in TRANSITIONS.items()
            }
        ),
        "__IN_FLIGHT__": "{"
        + ", ".join(f"{s.value} = true" for s in sorted(IN_FLIGHT, key=lambda s: s.value))
        + "}",
        "__CLAIMED__": "{" + ", ".join(f"{s} = '{e}'" for s, e in sorted(claimed.items())) + "}",
        "__CLAIM_EVENTS__": "{" + ", ".join(f"'{e.value}'" for e in CLAIM_EVENTS) + "}",
        "__BREAK__": "{" + ", ".join(f"{s.value} = '{e.value}'" for s, e in BREAK.items()) + "}",
        "__GIVE_BACK__": "{"
        + ", ".join(f"{s.value} = '{e.value}'" for s, e in GIVE_BACK.items())
        + "}",
    }


_TEMPLATE = r"""
local P = KEYS[1]
local op = ARGV[1]
local now = tonumber(ARGV[2])
local CHAIN_MAX = tonumber(ARGV[3])
local PRINCIPAL_MAX = tonumber(ARGV[4])
local LEDGER_MAX = tonumber(ARGV[5])
local PRINCIPAL_NEW = tonumber(ARGV[6])  -- the share new calls may fill (answers, the rest)
local LEASE_MS = tonumber(ARGV[7])
local LATE = tonumber(ARGV[8])
local A = 9  -- first operation argument

local USED, SCOPES, EXP = P .. 'used', P .. 'scopes', P .. 'exp'
local LEASE, RES, CLOCK = P .. 'lease', P .. 'res', P .. 'clock'

-- generated from opgate.ledger.TRANSITIONS
local NEXT = __NEXT__
local IN_FLIGHT = __IN_FLIGHT__
local CLAIMED = __CLAIMED__
local CLAIM_EVENTS = __CLAIM_EVENTS__
local BREAK = __BREAK__
local GIVE_BACK = __GIVE_BACK__

-- the state after event in state s, or nil when the table does not allow it
local function move(s, event)
  local row = NEXT[s or '']
  return row and row[event]
end

-- Redis time, and the lease clock (see the module docstring); writes after TIME
-- need effects replication, the only mode of Redis 7 (and a no-op there)
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local rnow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lnow = rnow
do
  local r, e = unpack(redis.call('HMGET', CLOCK, 'r', 'e'))
  if r and e then
    local step = rnow - tonumber(r)
    if step < 0 then step = 0 end
    local most = math.floor(LEASE_MS / 2)
    if step > most then step = most end
    lnow = tonumber(e) + step
  end
  redis.call('HSET', CLOCK, 'r', rnow, 'e', lnow)
end

local function out(status, ...) return {status, rnow, ...} end
local function is_late() return LATE >= 0 and rnow > LATE end

local function num(v) return tonumber(v) or 0 end
-- (negative amounts are written 0 - n: Lua's -0 would reach Redis as "-0", not an integer)

-- Answer rooms (opgate.ledger.answer_room): every principal holding data keeps up to
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

-- give back the answer's charge of a record whose answer is reverted
local function unanswer(chain, key, rk)
  local ac = num(redis.call('HGET', rk, 'ac'))
  if ac > 0 and is_live(chain, key) then
    local ck = P .. 'c:' .. chain
    uncharge(redis.call('HGET', ck, 's'), ac)
    redis.call('HINCRBY', ck, 'g:' .. key, 0 - ac)
    redis.call('HINCRBY', ck, 'r', 0 - ac)
  end
  redis.call('HDEL', rk, 'a', 'ac')
end

local SWEEP = 64
local function sweep()
  local expired = redis.call('ZRANGEBYSCORE', LEASE, '-inf', lnow, 'LIMIT', 0, SWEEP)
  -- records first: a broken answer keeps its charge; then the reservations' rest
  for _, member in ipairs(expired) do
    local chain, key, claim = string.match(member, '^r:(%w+):(%w+):(%w+)$')
    if chain then
      redis.call('ZREM', LEASE, member)
      local rk = P .. 'r:' .. key
      local s, h, w = unpack(redis.call('HMGET', rk, 's', 'h', 'w'))
      local to = BREAK[s or '']
      if to and h == claim and move(s, to) then
        -- its holder stopped renewing (died): the transition broke
        redis.call('HSET', rk, 's', move(s, to), 'v', w or '')
        redis.call('HDEL', rk, 'h', 'w', 'o')
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
      local left = tonumber(until_lease) - lnow
      redis.call('ZADD', EXP, math.max(now + left, now + 1), member)
    else
      remove(chain, key)
    end
  end
end

sweep()

if op == 'begin' then
  local scope, chain, res, n, a = ARGV[A], ARGV[A+1], ARGV[A+2], tonumber(ARGV[A+3]),
    tonumber(ARGV[A+4])
  if redis.call('HEXISTS', RES, res) == 1 then return out('ok') end  -- this run, again
  if is_late() then return out('late') end
  local refused = room(scope, n, nil)
  if refused then return out(refused) end
  charge(scope, n)
  room_take(scope, n, nil, res)
  redis.call('HSET', P .. 'c:' .. chain, 's', scope, 'r', n, 'n', 0, 'l', 0, 'a', a)
  redis.call('HSET', RES, res, scope .. ' ' .. chain .. ' ' .. n)
  redis.call('ZADD', LEASE, lnow + LEASE_MS, 's:' .. res)
  return out('ok')

elseif op == 'commit' then
  local res, chain, parent, claim, key, pcharge, round, deadline, grace, binding, prompt,
    token, identity, state_mac, parent_mac = ARGV[A], ARGV[A+1], ARGV[A+2], ARGV[A+3],
    ARGV[A+4], tonumber(ARGV[A+5]), tonumber(ARGV[A+6]), tonumber(ARGV[A+7]),
    tonumber(ARGV[A+8]), ARGV[A+9], ARGV[A+10], ARGV[A+11], ARGV[A+12], ARGV[A+13],
    ARGV[A+14]
  local ck = P .. 'c:' .. chain
  local rk = P .. 'r:' .. key
  if redis.call('HGET', rk, 'c') == chain then return out('ok') end  -- this run, again
  if is_late() then return out('late') end
  if redis.call('HEXISTS', RES, res) == 0 or redis.call('EXISTS', ck) == 0 then
    return out('expired')
  end
  local pk = P .. 'r:' .. parent
  if parent ~= '' then
    local s, h = unpack(redis.call('HMGET', pk, 's', 'h'))
    if h ~= claim or not move(s, 'prompted') then return out('expired') end
  end
  if deadline <= now then return out('expired') end
  redis.call('HINCRBY', ck, 'l', 1)
  redis.call('HSET', ck, 'g:' .. key, pcharge)
  redis.call('HSET', rk, 'c', chain, 's', 'pending', 'n', round, 'd', deadline, 'b', binding,
    'i', identity, 'v', state_mac, 'm', prompt, 'p', parent)
  redis.call('PEXPIRE', rk, deadline - now + grace)
  redis.call('ZADD', EXP, deadline, chain .. ':' .. key)
  spend(res, pcharge)
  if parent == '' then
    spend(res, num(redis.call('HGET', ck, 'a')))
  else
    local s = redis.call('HGET', pk, 's')
    redis.call('HSET', pk, 's', move(s, 'prompted'), 'v', parent_mac, 'k', key, 't', token)
    redis.call('HDEL', pk, 'h', 'w', 'o')
    redis.call('ZREM', LEASE, 'r:' .. chain .. ':' .. parent .. ':' .. claim)
  end
  release(res)
  return out('ok')

elseif op == 'find' then
  local key = ARGV[A]
  local rk = P .. 'r:' .. key
  local c, n, d, b, m, i = unpack(redis.call('HMGET', rk, 'c', 'n', 'd', 'b', 'm', 'i'))
  if not c or not is_live(c, key) then return out('expired') end
  return out('ok', c, n or false, d or false, b or false, m or false, i or false)

elseif op == 'claim' then
  local key, chain, answer, ac, n, res, claim, broken_mac, answered_mac = ARGV[A], ARGV[A+1],
    ARGV[A+2], tonumber(ARGV[A+3]), tonumber(ARGV[A+4]), ARGV[A+5], ARGV[A+6], ARGV[A+7],
    ARGV[A+8]
  local rk = P .. 'r:' .. key
  local s, d, a, h, v = unpack(redis.call('HMGET', rk, 's', 'd', 'a', 'h', 'v'))
  if not s or not is_live(chain, key) or num(d) <= now then return out('expired') end
  if IN_FLIGHT[s] then
    if h ~= claim then return out('busy') end
    -- this run, again: answer as the first run did (o: the state it claimed from)
    return out('ok', CLAIMED[s], redis.call('HGET', rk, 'o') or '', v or '')
  end
  if is_late() then return out('late') end
  local event = nil
  for _, e in ipairs(CLAIM_EVENTS) do
    if move(s, e) then event = e; break end
  end
  if not event then return out('illegal', s) end
  local ck = P .. 'c:' .. chain
  local lease = lnow + LEASE_MS
  if event == 'answer' then
    local scope = redis.call('HGET', ck, 's')
    local refused = room(scope, n, ck)
    if refused then return out(refused) end
    charge(scope, n)
    room_take(scope, n, ck, res, key, ac)
    redis.call('HINCRBY', ck, 'r', n)
    -- the answer is retained with the record from now on; the rest is the next prompt's
    redis.call('HINCRBY', ck, 'g:' .. key, ac)
    redis.call('HSET', RES, res, scope .. ' ' .. chain .. ' ' .. (n - ac))
    redis.call('ZADD', LEASE, lease, 's:' .. res)
    redis.call('HSET', rk, 'a', answer, 'ac', ac)
  elseif a ~= answer then
    return out('differs')
  end
  local to = move(s, event)
  local w = broken_mac
  if move(to, BREAK[to]) == 'answered' then w = answered_mac end
  redis.call('HSET', rk, 's', to, 'h', claim, 'w', w, 'o', s)
  redis.call('ZADD', LEASE, lease, 'r:' .. chain .. ':' .. key .. ':' .. claim)
  return out('ok', event, s, v or '')

elseif op == 'settle' then
  -- event: a settling event, 'abandon' (the claim's reply never arrived: give it back
  -- as GIVE_BACK says) or 'forged' (the replica refused the record: remove it)
  local key, chain, event, claim, res, state_mac = ARGV[A], ARGV[A+1], ARGV[A+2], ARGV[A+3],
    ARGV[A+4], ARGV[A+5]
  local rk = P .. 'r:' .. key
  local s, h, d, w = unpack(redis.call('HMGET', rk, 's', 'h', 'd', 'w'))
  local status = 'ok'
  if not s or h ~= claim or not IN_FLIGHT[s] then
    status = 'lost'  -- its lease ran out and the record moved on, or it left the ledger
  elseif event == 'forged' then
    redis.call('ZREM', LEASE, 'r:' .. chain .. ':' .. key .. ':' .. claim)
    remove(chain, key)
  else
    if event == 'abandon' then
      event = GIVE_BACK[s]
      if event ~= 'revert' then state_mac = w or '' end
    end
    local to = move(s, event)
    if not to then
      status = 'illegal'
    else
      redis.call('ZREM', LEASE, 'r:' .. chain .. ':' .. key .. ':' .. claim)
      redis.call('HDEL', rk, 'h', 'w', 'o')
      if event == 'revert' then unanswer(chain, key, rk) end
      room_settle(redis.call('HGET', P .. 'c:' .. chain, 's'), key, event == 'revert')
      redis.call('HSET', rk, 's', to, 'v', state_mac)
      if num(d) <= now then remove(chain, key) end
    end
  end
  if res ~= '' then release(res) end
  return out(status, s or '')

elseif op == 'child' then
  local key = ARGV[A]
  local child, token = unpack(redis.call('HMGET', P .. 'r:' .. key, 'k', 't'))
  if not child then return out('expired') end
  local c, n, d, b, m, i = unpack(redis.call('HMGET', P .. 'r:' .. child, 'c', 'n', 'd', 'b',
    'm', 'i'))
  if not c or not is_live(c, child) then return out('expired') end
  if num(d) <= now then
    remove(c, child)
    return out('expired')
  end
  return out('ok', child, c, n or false, d, b or false, m or false, i or false, token or false)

elseif op == 'release' then
  release(ARGV[A])
  return out('ok')

elseif op == 'renew' then
  -- every member given that is still leased gets a full lease; the rest are listed
  local lost = {}
  for i = A, #ARGV do
    if redis.call('ZADD', LEASE, 'XX', 'CH', lnow + LEASE_MS, ARGV[i]) == 0
        and not redis.call('ZSCORE', LEASE, ARGV[i]) then
      lost[#lost + 1] = ARGV[i]
    end
  end
  return out('ok', unpack(lost))

elseif op == 'time' then
  return out('ok')

elseif op == 'stats' then
  return out('ok', num(redis.call('GET', USED)), redis.call('HLEN', SCOPES),
    redis.call('ZCARD', EXP), redis.call('HLEN', RES))
end
return redis.error_reply('opgate ledger: unknown operation ' .. tostring(op))
"""


def _render() -> str:
    script = _TEMPLATE
    for name, value in _generated().items():
        script = script.replace(name, value)
    return script


SCRIPT = _render()
