-- The draw's helpers, for the functions that write a draw under its lock.

-- keep_seed: the draw's seed and the commitment to it (SHA-256, computed
-- in Go: Lua has none) are written together and once; afterwards both
-- are only read, so the published commitment is the stored one.
local function keep_seed(draw_key, seed, commitment)
  if redis.call('HEXISTS', draw_key, 'seed') == 0 then
    redis.call('HSET', draw_key, 'seed', seed, 'commitment', commitment)
  end
end

-- not_owner: 'DONE' when the draw is published, 'LOST' when the lock is
-- another owner's (it took over a lapsed lock); nil: owner may write.
local function not_owner(draw_key, owner)
  local d = redis.call('HMGET', draw_key, 'state', 'lock')
  if d[1] == 'done' then
    return 'DONE'
  end
  if d[2] ~= owner then
    return 'LOST'
  end
  return nil
end
