-- use_return_link: the Go method that calls it (notice.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local tok_key, active_key = KEYS[1], KEYS[2]
  local user, nonce = ARGV[1], ARGV[2]

  local e = parse_entry(redis.call('HGET', tok_key, user))
  if not e or e.expires_at <= now_ms() then
    return 'ENTRY_TOKEN_NOT_FOUND'
  end
  if nonce == '' or not e.link or string.sub(e.link, 2) ~= nonce then
    return 'RETURN_LINK_USED'
  end
  -- Spent: the link goes, and the buyer is back, so its token is confirmed
  -- (its full TTL); a confirmed token's deadline never comes from a notice.
  e.link = nil
  confirm(tok_key, active_key, user, e)
  return 'OK'
end
