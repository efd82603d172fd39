-- spread_draw_leave: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  spread_leave_pre(KEYS[1], KEYS[2], ARGV[1])
  return 'OK'
end
