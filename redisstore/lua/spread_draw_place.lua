-- spread_draw_place: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, pre_key, q_key = KEYS[1], KEYS[2], KEYS[3]
  local mirror_key, left_key = KEYS[4], KEYS[5]
  local layout = ARGV[1]

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'drawn')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  -- Written and published: a drawer that lost its lock writes nothing
  -- (admission may have popped these users already).
  if cfg[2] == '1' then
    return {'DONE'}
  end
  local s = math.floor(now_ms() / 1000)
  local out, processed = {'OK'}, 0
  for i = 2, #ARGV, 2 do
    local user, ticket = ARGV[i], tonumber(ARGV[i + 1])
    local early = tonumber(redis.call('ZSCORE', pre_key, user) or '0')
    local queued = redis.call('ZSCORE', q_key, user)
    queued = queued and math.floor(tonumber(queued))
    -- Placed by an earlier run of this draw (queued == ticket): nothing to do.
    if queued ~= ticket and early > 0 then
      -- A queue score: silence counts from the draw. One who entered again
      -- after the opening, before this, holds a later ticket: its drawn
      -- place wins and the later ticket is gone.
      redis.call('ZADD', q_key, queue_score(ticket, s), user)
      if queued then
        spread_gone(mirror_key, left_key, queued)
        out[#out + 1] = queued
      end
      processed = processed + 1
    elseif queued ~= ticket then
      -- One who left during the draw keeps its recorded place but is not
      -- queued: its ticket is gone.
      if redis.call('ZSCORE', mirror_key, ticket) == false then
        processed = processed + 1
      end
      spread_gone(mirror_key, left_key, ticket)
      out[#out + 1] = ticket
    end
  end
  redis.call('HINCRBY', scfg_key, 'placed', processed)
  return out
end
