-- notified: the Go method that calls it (notice.go) says its KEYS, ARGV
-- and replies.
return function(KEYS, ARGV)
  local cfg_key, tok_key, active_key = KEYS[1], KEYS[2], KEYS[3]
  local user, nonce = ARGV[1], ARGV[2]

  local now = now_ms()
  local e = parse_entry(redis.call('HGET', tok_key, user))
  if not e or e.expires_at <= now then
    return 'ENTRY_TOKEN_NOT_FOUND'
  end
  -- Only a buyer who asked to be told gets its deadline from the notice;
  -- a watching one's (no link, or "w") is left as it is.
  local flag = 'w'
  if e.link then
    flag = string.sub(e.link, 1, 1)
  end
  if flag == 'n' and (e.state == 'new' or e.state == 'shown') then
    local ttl_ms = math.floor(tonumber(redis.call('HGET', cfg_key, 'ttl_ms') or '0'))
    local told_ms = tonumber(redis.call('HGET', cfg_key, 'notified_first_use_ms') or math.min(DEFAULT_NOTIFIED_FIRST_USE_MS, ttl_ms))
    e.expires_at = math.min(now + math.floor(told_ms), e.lease_until)
    redis.call('ZADD', active_key, e.expires_at, user)
  end
  e.link = flag .. nonce
  redis.call('HSET', tok_key, user, format_entry(e))
  return {'OK', time_left(e, now)}
end
