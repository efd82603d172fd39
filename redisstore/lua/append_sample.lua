-- append_sample: the Go method that calls it (history.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local appended = append_sample(KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
  return {'OK', appended and 1 or 0}
end
