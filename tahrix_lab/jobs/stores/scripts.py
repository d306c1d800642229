"""The Lua scripts of ``RedisJobStore``: each changes one job's keys together or not at all.

Layout (``{p}`` is ``chatjob:``)::

    {p}{job}            hash: user, request (JSON), session_id, status, stop_reason (JSON),
                        content, reasoning, tool_calls (JSON), usage (JSON), next,
                        queue_position, cancel, message, history_len
    {p}{job}:chunks     stream: entry ``0-{n}`` holds chunk number n-1
    {p}user:{user}      set: the user's jobs that have not ended (the per-user cap)
    {p}session:{sid}    the job running in that session (the page reattaches to it)
    {p}leases           sorted set: job -> lease deadline (ms, Redis clock)
    {p}workers          sorted set: worker -> last renewal (ms, Redis clock)
    {p}queue            list: requests admitted by API processes, for the worker
    {p}unsaved          set: jobs a reaper ended whose interrupted answer no worker kept yet
    {p}epoch            when this Redis began holding jobs (ms): it restarted empty then
    channel {p}wake     one message per written batch: its news (wake.py), or job ids
"""

from __future__ import annotations

P = "chatjob:"

_NOW = (
    "local _t = redis.call('TIME'); local now = tonumber(_t[1]) * 1000 + math.floor(tonumber(_t[2]) / 1000)\n"
)

# Ending a job: leave the cap set, the session pointer and the leases.
_ENDED = f"""
local function ended(h, id)
  local user = redis.call('HGET', h, 'user')
  if user then redis.call('SREM', '{P}user:' .. user, id) end
  local sid = redis.call('HGET', h, 'session_id')
  if sid and sid ~= '' and redis.call('GET', '{P}session:' .. sid) == id then
    redis.call('DEL', '{P}session:' .. sid)
  end
  redis.call('ZREM', '{P}leases', id)
end
"""

# KEYS: hash, user set, queue. ARGV: job id, user, request JSON, queue position, ttl, cap (0: none),
# session id (or ''), enqueue ('1': push the request for a worker), lease ms. The job is leased
# from the start, so it is claimed even if its worker dies before the first renewal.
# Returns -1 when the cap refuses, else the queue length (or 0).
CREATE = f"""{_NOW}
local cap = tonumber(ARGV[6])
if cap > 0 then
  local n = 0
  for _, j in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    if redis.call('HGET', '{P}' .. j, 'status') == 'streaming' then n = n + 1
    else redis.call('SREM', KEYS[2], j) end
  end
  if n >= cap then return -1 end
end
redis.call('HSET', KEYS[1], 'user', ARGV[2], 'request', ARGV[3], 'status', 'streaming',
  'stop_reason', 'null', 'content', '', 'reasoning', '', 'tool_calls', '[]', 'usage', '{{}}',
  'next', 0, 'queue_position', ARGV[4], 'session_id', ARGV[7])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[5]))
redis.call('ZADD', '{P}leases', now + tonumber(ARGV[9]), ARGV[1])
if ARGV[8] == '1' then return redis.call('RPUSH', KEYS[3], ARGV[3]) end
return 0
"""

# ARGV: ttl, then per job: job id, status ('' keeps it), expected next, content delta,
# reasoning delta, n chunks, chunk JSON x n, tool_calls, usage, stop_reason (JSON), news.
# Returns per job -1: the job is gone (Redis lost it); -2: the log is not where the writer
# thinks (an earlier write's answer was lost); -3: it already ended (a reaper ended it); else
# the cancel flag (0/1). Publishes the news of the jobs whose chunks landed after the writes,
# so a woken poll finds them.
APPENDS = f"""{_ENDED}
local ttl = tonumber(ARGV[1])
local codes, news = {{}}, {{}}
local i = 2
while i <= #ARGV do
  local id, status, expect = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local n = tonumber(ARGV[i + 5])
  local after = i + 6 + n
  local h = '{P}' .. id
  local cur = redis.call('HMGET', h, 'status', 'next', 'cancel')
  local code
  if not cur[1] then code = -1
  elseif cur[1] ~= 'streaming' then code = -3
  elseif tonumber(cur[2] or '0') ~= expect then code = -2
  else
    for k = 1, n do redis.call('XADD', h .. ':chunks', '0-' .. (expect + k), 'c', ARGV[i + 5 + k]) end
    if ARGV[i + 3] ~= '' then
      redis.call('HSET', h, 'content', (redis.call('HGET', h, 'content') or '') .. ARGV[i + 3])
    end
    if ARGV[i + 4] ~= '' then
      redis.call('HSET', h, 'reasoning', (redis.call('HGET', h, 'reasoning') or '') .. ARGV[i + 4])
    end
    redis.call('HSET', h, 'next', expect + n, 'tool_calls', ARGV[after], 'usage', ARGV[after + 1],
      'stop_reason', ARGV[after + 2], 'queue_position', 0)
    redis.call('EXPIRE', h, ttl)
    redis.call('EXPIRE', h .. ':chunks', ttl)
    if status ~= '' then
      redis.call('HSET', h, 'status', status)
      ended(h, id)
    end
    if cur[3] == '1' then code = 1 else code = 0 end
    table.insert(news, ARGV[after + 3])
  end
  table.insert(codes, code)
  i = after + 4
end
if #news > 0 then
  redis.call('PUBLISH', '{P}wake', '{{"w":[' .. table.concat(news, ',') .. ']}}')
end
return codes
"""

# KEYS: hash, stream. ARGV: ttl, status, n chunks, chunk JSON x n, then every header field/value.
# The whole job written anew under the same indexes.
RESTORE = f"""{_ENDED}
local cancel = redis.call('HGET', KEYS[1], 'cancel')
redis.call('DEL', KEYS[1], KEYS[2])
local n = tonumber(ARGV[3])
for i = 1, n do redis.call('XADD', KEYS[2], '0-' .. i, 'c', ARGV[3 + i]) end
for i = 4 + n, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], 'next', n, 'queue_position', 0, 'status', ARGV[2])
if cancel then redis.call('HSET', KEYS[1], 'cancel', cancel) end
local ttl = tonumber(ARGV[1])
redis.call('EXPIRE', KEYS[1], ttl)
if n > 0 then redis.call('EXPIRE', KEYS[2], ttl) end
local id = string.sub(KEYS[1], string.len('{P}') + 1)
if ARGV[2] ~= 'streaming' then ended(KEYS[1], id)
else
  local user = redis.call('HGET', KEYS[1], 'user')
  if user then redis.call('SADD', '{P}user:' .. user, id) end
end
if cancel == '1' then return 1 end
return 0
"""

# When this Redis began holding jobs ({p}epoch: set by the first process to look after it
# started empty), and how long ago (ms).
_EPOCH = f"""
redis.call('SET', '{P}epoch', now, 'NX')
local epoch = redis.call('GET', '{P}epoch')
"""

EPOCH = _NOW + _EPOCH + "return {epoch, now - tonumber(epoch)}\n"

# KEYS: hash, stream. ARGV: since. The state and the chunks from `since`; for a job Redis does
# not hold, the epoch and its age (a process that knew an earlier epoch sees Redis restarted).
READ = f"""{_NOW}
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then
  {_EPOCH}
  return {{h, {{}}, epoch, now - tonumber(epoch)}}
end
return {{h, redis.call('XRANGE', KEYS[2], '(0-' .. ARGV[1], '+')}}
"""

# KEYS: hash. Set the cancel flag only on a job that exists.
CANCEL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'cancel', '1')
return 1
"""

# ARGV: ttl, job ids... Which of the jobs were asked to cancel, refreshing their TTL on the way
# (quiet jobs, e.g. inside a long tool call, write nothing that would).
CANCELS = f"""
local ttl = tonumber(ARGV[1])
local out = {{}}
for i = 2, #ARGV do
  local h = '{P}' .. ARGV[i]
  if redis.call('HGET', h, 'cancel') == '1' then table.insert(out, ARGV[i]) end
  redis.call('EXPIRE', h, ttl)
  redis.call('EXPIRE', h .. ':chunks', ttl)
end
return out
"""

# ARGV: ttl, then job id / position pairs. Only on jobs that exist (HSET would recreate them).
POSITIONS = f"""
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV, 2 do
  local h = '{P}' .. ARGV[i]
  if redis.call('EXISTS', h) == 1 then
    redis.call('HSET', h, 'queue_position', ARGV[i + 1])
    redis.call('EXPIRE', h, ttl)
  end
end
return 1
"""

# KEYS: hash, session pointer. ARGV: job id, session id, message, history len, ttl.
SESSION = f"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'session_id', ARGV[2], 'message', ARGV[3], 'history_len', ARGV[4])
redis.call('SET', KEYS[2], ARGV[1], 'EX', tonumber(ARGV[5]))
redis.call('PUBLISH', '{P}wake', ARGV[1])
return 1
"""

# ARGV: worker id, lease ms, job ids... Renews the leases and the worker's heartbeat; returns
# the jobs Redis no longer holds (it restarted empty), for their writer to write anew.
RENEW = f"""{_NOW}
local deadline = now + tonumber(ARGV[2])
redis.call('SET', '{P}epoch', now, 'NX')
redis.call('ZADD', '{P}workers', now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', '{P}workers', '-inf', now - 600000)
local missing = {{}}
for i = 3, #ARGV do
  local h = '{P}' .. ARGV[i]
  if redis.call('EXISTS', h) == 1 then
    redis.call('ZADD', '{P}leases', deadline, ARGV[i])
    redis.call('HSET', h, 'held', '1')  -- a worker holds it: a lapse means that worker stopped
  else table.insert(missing, ARGV[i]) end
end
return missing
"""

# ARGV: lease ms. How many workers renewed within one lease.
WORKERS = _NOW + f"return redis.call('ZCOUNT', '{P}workers', now - tonumber(ARGV[1]), '+inf')\n"

# ARGV: worker id ('' for an API process, which cannot run a job and only ends them), lease ms,
# error chunk JSON, ttl, then the jobs the claimer holds (their leases are renewed first, so a
# live worker never claims its own). Claims up to 200 lapsed jobs: one that produced nothing is
# leased to a worker claimer (it runs it) and left lapsed for a worker by an API claimer; any
# other ends with the error chunk and joins {p}unsaved, where a worker finds it to keep its
# interrupted answer in the transcript (UNSAVED). Returns {job id, 'take'|'end', request,
# session id} per claimed job.
CLAIM = f"""{_NOW}{_ENDED}
local out = {{}}
local woken = {{}}
for i = 5, #ARGV do redis.call('ZADD', '{P}leases', 'XX', now + tonumber(ARGV[2]), ARGV[i]) end
local api = ARGV[1] == ''
for _, id in ipairs(redis.call('ZRANGEBYSCORE', '{P}leases', '-inf', now, 'LIMIT', 0, 200)) do
  local h = '{P}' .. id
  local started = tonumber(redis.call('HGET', h, 'next') or '0') > 0
  if not api or started then redis.call('ZREM', '{P}leases', id) end
  if (not api or started) and redis.call('HGET', h, 'status') == 'streaming' then
    local request = redis.call('HGET', h, 'request') or '{{}}'
    local sid = ''  -- the session only once the worker stored the question in it
    if redis.call('HEXISTS', h, 'history_len') == 1 then sid = redis.call('HGET', h, 'session_id') end
    if not started then
      -- Not started. Still queued: taken out of the queue, so no other worker pops it too.
      -- Popped but never renewed (its worker took it a moment ago, or died at once): one
      -- more lease for that worker first. Held (renewed) and lapsed: its worker stopped.
      local queued = redis.call('LREM', '{P}queue', 1, request) > 0
      redis.call('ZADD', '{P}leases', now + tonumber(ARGV[2]), id)
      if queued or redis.call('HGET', h, 'held') == '1' or redis.call('HGET', h, 'grace') == '1' then
        table.insert(out, {{id, 'take', request, sid}})
      else
        redis.call('HSET', h, 'grace', '1')
      end
    else
      local idx = redis.call('HINCRBY', h, 'next', 1)
      redis.call('XADD', h .. ':chunks', '0-' .. idx, 'c', ARGV[3])
      redis.call('HSET', h, 'status', 'error', 'stop_reason', '"error"', 'queue_position', 0)
      redis.call('EXPIRE', h, tonumber(ARGV[4]))
      redis.call('EXPIRE', h .. ':chunks', tonumber(ARGV[4]))
      ended(h, id)
      if sid ~= '' then redis.call('SADD', '{P}unsaved', id) end
      table.insert(out, {{id, 'end', request, sid}})
      table.insert(woken, id)
    end
  end
end
if #woken > 0 then redis.call('PUBLISH', '{P}wake', table.concat(woken, ' ')) end
return out
"""

# ARGV: how many. Jobs a reaper ended mid-answer whose answer no worker has kept yet: popped
# (so one worker keeps each), with their session. Returns {job id, session id} per job.
UNSAVED = f"""
local out = {{}}
for _, id in ipairs(redis.call('SPOP', '{P}unsaved', tonumber(ARGV[1]))) do
  local sid = redis.call('HGET', '{P}' .. id, 'session_id')
  if sid and sid ~= '' then table.insert(out, {{id, sid}}) end
end
return out
"""
