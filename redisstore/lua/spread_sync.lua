-- spread_sync: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, q_key, tok_key = KEYS[1], KEYS[2], KEYS[3]
  local layout, expected, need_empty = ARGV[1], ARGV[2], ARGV[3] == '1'

  local stored = redis.call('HGET', scfg_key, 'layout')
  -- Another layout took this sub-shard meanwhile (a reshard): leave it.
  if expected ~= '' and stored and stored ~= expected and stored ~= layout then
    return 'ROOM_CHANGED'
  end
  -- A sub-shard whose users would be left behind by a reshard refuses it.
  if need_empty and (redis.call('ZCARD', q_key) > 0 or live_tokens(tok_key) > 0) then
    return 'SHARDS_NOT_EMPTY'
  end
  redis.call('HSET', scfg_key, 'layout', layout, unpack(ARGV, 4))
  keep_hash_table(scfg_key)
  return 'OK'
end
