-- append_sample: the Go method that calls it (history.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  if recorded_since(KEYS[1], tonumber(ARGV[1])) then
    return {'OK', 0}
  end
  push_sample(KEYS[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
  return {'OK', 1}
end
