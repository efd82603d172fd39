package server

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/waitroom/waitroom"
)

// paceRefresh is how old a room's measured pace may be: one Stats read per
// room per second per instance, whatever the polls.
const paceRefresh = time.Second

// cachedPace keeps a room's measured pace between refreshes.
type cachedPace struct {
	current    atomic.Pointer[paceSnapshot]
	refreshing atomic.Bool
}

type paceSnapshot struct {
	pace    waitroom.Pace
	fetched time.Time
}

// pace returns room's measured pace, at most paceRefresh old. One request
// per room refreshes it while the others use the previous one; when the
// store cannot say, the previous one (or none: the configured rate) stands,
// and the answer is still given. Called only for rooms roomConfig knows.
func (s *Server) pace(ctx context.Context, room string) waitroom.Pace {
	v, ok := s.paces.Load(room)
	if !ok {
		// LoadOrStore alone would make a cachedPace on every call.
		v, _ = s.paces.LoadOrStore(room, &cachedPace{})
	}
	c := v.(*cachedPace)
	snap := c.current.Load()
	if snap != nil && time.Since(snap.fetched) < paceRefresh || !c.refreshing.CompareAndSwap(false, true) {
		if snap == nil {
			return waitroom.Pace{}
		}
		return snap.pace
	}
	defer c.refreshing.Store(false)
	st, err := s.store.Stats(ctx, room)
	if err != nil {
		s.log.DebugContext(ctx, "reading the room's pace failed; the ETA uses the last one", "room", room, "err", err)
		if snap == nil {
			return waitroom.Pace{}
		}
		return snap.pace
	}
	pace := st.Pace
	pace.Waiting = st.Waiting
	c.current.Store(&paceSnapshot{pace: pace, fetched: time.Now()})
	return pace
}

// estimate is the waiting user's ETA and range under the room's measured
// pace, and its poll hint.
func (s *Server) estimate(ctx context.Context, room string, cfg waitroom.RoomConfig, position int64) (waitroom.Estimate, time.Duration) {
	est := cfg.Estimate(position, s.pace(ctx, room))
	return est, cfg.PollAfter(position, est.Rate)
}

// etaSeconds rounds an estimate to whole seconds for the answer: the ETA
// to the nearest second (rounding it up would promise half a second too
// much on average), at least one while the user waits; the range outwards,
// the bottom down and the top up.
func etaSeconds(e waitroom.Estimate) (eta, low, high int64) {
	return max(int64(math.Round(e.ETA.Seconds())), 1), int64(e.Low.Seconds()), int64(math.Ceil(e.High.Seconds()))
}
