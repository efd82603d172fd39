-- update_room: the Go method that calls it (room.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key, ver_key, draw_key, q_key, seq_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  local version = ARGV[1]
  local order_changed, opening_set, tickets = ARGV[2] == '1', ARGV[3] == '1', ARGV[4]
  local n = tonumber(ARGV[5]) + 4

  -- Updating must not create a room behind CreateRoom's back.
  if redis.call('EXISTS', cfg_key) == 0 then
    return 'ROOM_NOT_FOUND'
  end
  -- Someone else changed the room since the caller read it: writing would
  -- silently undo their change.
  for i = 6, n, 2 do
    local stored, expected = redis.call('HGET', cfg_key, ARGV[i]), ARGV[i + 1]
    -- A setting added after the room was made is absent: the caller read
    -- what parseConfig gives for it (its zero value or its default).
    if stored and stored ~= expected then
      -- Numbers may be spelled two ways ("100" and "100.0").
      local a, b = tonumber(stored), tonumber(expected)
      if not (a and b and a == b) then
        return 'ROOM_CHANGED'
      end
    end
  end
  -- The commitment is published: the order it was published with stays.
  if order_changed and redis.call('HEXISTS', draw_key, 'commitment') == 1 then
    return 'DRAW_PUBLISHED'
  end
  -- Early arrivals would be placed ahead of those already queued.
  if opening_set and redis.call('ZCARD', q_key) > 0 then
    return 'QUEUE_NOT_EMPTY'
  end
  -- A spread room's sub-queues were found empty with the ticket counter
  -- at tickets and none in flight: a ticket handed out since may be
  -- placed in one after this write, ahead of the early arrivals.
  if tickets ~= '' and counter(seq_key) ~= tonumber(tickets) then
    return 'TICKETED'
  end
  -- A reshard (KEYS[6..8] given): a token, sale or buyer in the room's
  -- own keys would be left behind by the new layout.
  if #KEYS > 5 then
    local c = redis.call('HMGET', KEYS[7], 'sold', 'completed')
    if live_tokens(KEYS[6]) > 0 or units_sold(c[1], c[2]) > 0 or redis.call('EXISTS', KEYS[8]) == 1 then
      return 'SHARDS_NOT_EMPTY'
    end
  end
  redis.call('HSET', cfg_key, unpack(ARGV, n + 2))
  -- A room made before its settings were kept a hash table becomes one.
  keep_hash_table(cfg_key)
  redis.call('SET', ver_key, version)
  return 'OK'
end
