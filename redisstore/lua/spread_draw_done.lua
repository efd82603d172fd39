-- spread_draw_done: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, pre_key = KEYS[1], KEYS[2]
  local layout, entrants = ARGV[1], ARGV[2]

  local refused = sub_refusal(redis.call('HGET', scfg_key, 'layout'), layout)
  if refused then return refused end
  -- The sub-shard's part is written: its pre is read no more (kept a
  -- while for a drawer that must read the snapshot again, should the
  -- record not be published yet), and its tokens count their first use
  -- from the end of the entrants' first polls (spread_token_start).
  redis.call('HSET', scfg_key, 'drawn', '1', 'entrants', entrants)
  if redis.call('EXISTS', pre_key) == 1 then
    redis.call('EXPIRE', pre_key, 3600)
  end
  return 'OK'
end
