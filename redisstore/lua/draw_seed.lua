-- draw_seed: the Go method that calls it (drop.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  keep_seed(KEYS[1], ARGV[1], ARGV[2])
  return 'OK'
end
