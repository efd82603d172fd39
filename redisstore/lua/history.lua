-- history: the Go method that calls it (history.go) says its KEYS, ARGV
-- and replies.
return function(KEYS, ARGV)
  local hist_key = KEYS[1]
  local since_s = tonumber(ARGV[1])
  local window_s = tonumber(ARGV[2])
  -- A dashboard asks every second for the samples since its last: the
  -- tail answers it, the whole list only a first load.
  local tail = 16

  local function second(entry) return tonumber(string.match(entry, '^%d+')) end
  local entries = redis.call('LRANGE', hist_key, -tail, -1)
  if #entries == 0 then
    return {'OK'}
  end
  local from = math.max(since_s, second(entries[#entries]) - window_s)
  if #entries == tail and second(entries[1]) > from then
    entries = redis.call('LRANGE', hist_key, 0, -1)
  end
  local out = {'OK'}
  for i = 1, #entries do
    if second(entries[i]) > from then
      out[#out + 1] = entries[i]
    end
  end
  return out
end
