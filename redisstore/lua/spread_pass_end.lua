-- spread_pass_end: the Go method that calls it (passes.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local lock_key, passes_key = KEYS[1], KEYS[2]
  local owner, give_back = ARGV[1], ARGV[2]

  -- A use taken for a token never issued goes back.
  local p = give_back ~= '' and parse_pass(passes_key, give_back)
  if p then
    use_pass(passes_key, give_back, p, 1)
  end
  if redis.call('HGET', lock_key, 'owner') == owner then
    redis.call('DEL', lock_key)
  end
  return 'OK'
end
