-- complete: the Go method that calls it (token.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local tok_key    = KEYS[1]
  local active_key = KEYS[2]
  local stats_key  = KEYS[3]
  local cfg_key    = KEYS[4]
  local buyers_key = KEYS[5]
  local user       = ARGV[1]
  local token      = ARGV[2]
  local sold_now   = tonumber(ARGV[3])

  local e = parse_entry(redis.call('HGET', tok_key, user))
  if not e then
    return 'ENTRY_TOKEN_NOT_FOUND'
  end
  if e.token ~= token then
    return 'ENTRY_TOKEN_INVALID'
  end

  -- Whatever the lease and expiry: the order succeeded, the token is spent.
  drop_tokens(tok_key, active_key, {user}, {user})
  -- Units sold from what was counted so far (units_sold: before this
  -- counter, one per completed order), then the order counted.
  local c = redis.call('HMGET', stats_key, 'sold', 'completed')
  local sold = units_sold(c[1], c[2]) + sold_now
  redis.call('HSET', stats_key, 'sold', sold)
  redis.call('HINCRBY', stats_key, 'completed', 1)
  local cfg = redis.call('HMGET', cfg_key, 'one_order', 'stock')
  if cfg[1] == '1' then
    redis.call('SADD', buyers_key, user)
  end
  -- The units sold here now, and whether the stock is tracked: a spread
  -- room's Complete tells its other sub-shards (spread.go, pushSold).
  local tracked = 0
  if tonumber(cfg[2] or '0') > 0 then tracked = 1 end
  return {'OK', sold, tracked}
end
