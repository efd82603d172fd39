package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// A room's history (waitroom.HistoryStore) is a list, wr:{ROOM}:hist, in
// the room's hash tag: one entry a sample, "second rate waiting live
// admitted" (about 25 bytes), appended in time order, trimmed to
// waitroom.HistoryKeep entries, and gone historyTTL after the last sample
// was recorded.

var _ waitroom.HistoryStore = (*Store)(nil)

// historyTTL: a room quiet for long is still recorded every
// waitroom.QuietHistoryEvery, so only a room nobody records loses its
// history, and by then every sample is older than the window.
const historyTTL = waitroom.HistoryWindow + waitroom.QuietHistoryEvery

// recordSamplesScript appends one sample to each room's history.
//
// KEYS per room, 8 each: cfg, q, pre, drawn, tok, active, stats, hist
// ARGV[1] the sample's second (unix)
// ARGV[2] the entries a history keeps (waitroom.HistoryKeep)
// ARGV[3] the history's TTL, ms
//
// Returns {"OK", samples recorded, i…}: i, from 1, each room of the call
// spread over shards, which it does not record (its users are on other
// shards: recordSpread does). A room without settings gets none, and one
// whose last entry is at the second or later keeps its history.
var recordSamplesScript = newFunction("record_samples")

// appendSampleScript appends a sample the Store made to a room's history.
//
// KEYS[1] hist
// ARGV[1] the sample's second (unix)
// ARGV[2] the entry, "second rate waiting live admitted"
// ARGV[3] the entries a history keeps (waitroom.HistoryKeep)
// ARGV[4] the history's TTL, ms
//
// Returns {"OK", 1} appended, {"OK", 0} a sample of that second or a
// later one is there.
var appendSampleScript = newFunction("append_sample")

// RecordSamples appends a sample at now to each room's history. The rooms
// of one slot go in one call (off Cluster, all of them), every call in
// one pipeline: on a Cluster go-redis sends each node its own calls.
func (s *Store) RecordSamples(ctx context.Context, now time.Time, rooms []string) error {
	if err := waitroom.CheckHistoryRooms(rooms); err != nil {
		return err
	}
	if len(rooms) == 0 {
		return nil
	}
	groups := s.slotGroups(rooms)
	args := s.withTestClock([]any{now.Unix(), waitroom.HistoryKeep, historyTTL.Milliseconds()})
	calls := make([][]string, len(groups))
	for g, group := range groups {
		keys := make([]string, 0, 8*len(group))
		for _, i := range group {
			k := s.keys(rooms[i])
			keys = append(keys, k.cfg, k.q, k.pre, k.drawn, k.tok, k.active, k.stats, k.hist)
		}
		calls[g] = keys
	}
	loads := s.loads.Load()
	for try := 0; ; try++ {
		cmds := make([]*redis.Cmd, len(calls))
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for g, keys := range calls {
				cmds[g] = p.FCall(ctx, recordSamplesScript.Name(), keys, args...)
			}
			return nil
		})
		if try == 0 && functionMissing(err) {
			// The library is not loaded (on some node): load it, and
			// call again, as every function call does (call.go).
			if err := s.loadLibrary(ctx, loads); err != nil {
				return s.fail("record samples", err)
			}
			continue
		}
		if err != nil {
			return s.fail("record samples", needsFunctions(err))
		}
		var spread []string
		for g, cmd := range cmds {
			r, ok := asReply(cmd.Val())
			if !ok || r.code() != "OK" {
				return s.unexpected(ctx, "record samples", cmd.Val())
			}
			for j := 2; j < len(r); j++ {
				i, ok := r.int(j)
				if !ok || i < 1 || int(i) > len(groups[g]) {
					return s.unexpected(ctx, "record samples", cmd.Val())
				}
				spread = append(spread, rooms[groups[g][i-1]])
			}
		}
		return s.recordSpread(ctx, now, spread)
	}
}

// recordSpread records rooms spread over shards from the figures their
// sub-shards sum to (Stats), one room after another: such rooms are few
// and busy, so a second's calls for each cost little beside their ticks.
func (s *Store) recordSpread(ctx context.Context, now time.Time, rooms []string) error {
	var errs []error
	for _, room := range rooms {
		cfg, err := s.RoomConfig(ctx, room)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st, err := s.Stats(ctx, room)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entry := strconv.FormatInt(now.Unix(), 10) + " " + strconv.FormatFloat(cfg.Rate, 'g', -1, 64) + " " +
			strconv.FormatInt(st.Waiting, 10) + " " + strconv.FormatInt(st.Active, 10) + " " + strconv.FormatInt(st.Admitted, 10)
		r, err := s.do(ctx, "record samples", appendSampleScript, []string{s.keys(room).hist},
			now.Unix(), entry, waitroom.HistoryKeep, historyTTL.Milliseconds())
		if err == nil && r.code() != "OK" {
			err = s.unexpected(ctx, "record samples", r)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// historyScript reads a room's samples after a second.
//
// KEYS[1] hist
// ARGV[1] the second (unix) after which samples are wanted
// ARGV[2] the window, seconds: none older than this before the newest
//
// Returns {"OK", entry, …}, oldest first.
var historyScript = newFunction("history", "no-writes")

// History returns room's samples after since, oldest first.
func (s *Store) History(ctx context.Context, room string, since time.Time) ([]waitroom.Sample, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	r, err := s.do(ctx, "history", historyScript, []string{s.keys(room).hist},
		since.Unix(), int64(waitroom.HistoryWindow/time.Second))
	if err != nil {
		return nil, err
	}
	if r.code() != "OK" {
		return nil, s.unexpected(ctx, "history", r)
	}
	out := make([]waitroom.Sample, 0, len(r)-1)
	for i := 1; i < len(r); i++ {
		entry, _ := r.str(i)
		sample, ok := parseSample(entry)
		if !ok {
			return nil, s.unexpected(ctx, "history", r[i])
		}
		out = append(out, sample)
	}
	return out, nil
}

// parseSample reads one history entry; false when it is not one.
func parseSample(entry string) (waitroom.Sample, bool) {
	f := strings.Fields(entry)
	if len(f) != 5 {
		return waitroom.Sample{}, false
	}
	var n [4]int64
	for i, j := range []int{0, 2, 3, 4} {
		v, err := strconv.ParseInt(f[j], 10, 64)
		if err != nil {
			return waitroom.Sample{}, false
		}
		n[i] = v
	}
	rate, err := strconv.ParseFloat(f[1], 64)
	if err != nil {
		return waitroom.Sample{}, false
	}
	return waitroom.Sample{At: time.Unix(n[0], 0), Rate: rate, Waiting: n[1], LiveTokens: n[2], Admitted: n[3]}, true
}
