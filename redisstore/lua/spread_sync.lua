-- spread_sync: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, q_key, tok_key = KEYS[1], KEYS[2], KEYS[3]
  local stats_key, buyers_key, units_key, out_key = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
  local layout, expected, need_empty = ARGV[1], ARGV[2], ARGV[3] == '1'

  local stored = redis.call('HGET', scfg_key, 'layout')
  -- Another layout took this sub-shard meanwhile (a reshard): leave it.
  if expected ~= '' and stored and stored ~= expected and stored ~= layout then
    return 'ROOM_CHANGED'
  end
  -- A sub-shard whose users would be left behind by a reshard refuses it;
  -- so does one that sold units or remembers buyers: in another layout
  -- its users live elsewhere, and the stock and one order per buyer would
  -- forget them; and one whose outbox still holds events to relay.
  if need_empty then
    local c = redis.call('HMGET', stats_key, 'sold', 'completed')
    if redis.call('ZCARD', q_key) > 0 or live_tokens(tok_key) > 0 or units_sold(c[1], c[2]) > 0
      or redis.call('EXISTS', buyers_key) == 1 or redis.call('EXISTS', out_key) == 1 then
      return 'SHARDS_NOT_EMPTY'
    end
    -- What it was told of the other sub-shards is of the old layout.
    redis.call('DEL', units_key)
  end
  redis.call('HSET', scfg_key, 'layout', layout, unpack(ARGV, 4))
  keep_hash_table(scfg_key)
  return 'OK'
end
