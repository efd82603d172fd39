package memstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/waitroom/waitroom"
)

var _ waitroom.HistoryStore = (*Store)(nil)

// RecordSamples appends a sample at now to each room's history
// (waitroom.HistoryStore).
func (s *Store) RecordSamples(ctx context.Context, now time.Time, rooms []string) error {
	if err := waitroom.CheckHistoryRooms(rooms); err != nil {
		return err
	}
	at := now.Truncate(waitroom.HistoryEvery)
	for _, name := range rooms {
		r, err := s.lockedRoom(ctx, name)
		if errors.Is(err, waitroom.ErrRoomNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		r.record(at, s.now())
		r.mu.Unlock()
	}
	return nil
}

// record appends r's sample at at, its figures read at now; r.mu is held.
func (r *room) record(at, now time.Time) {
	n := len(r.history)
	if n > 0 && !r.history[n-1].At.Before(at) {
		return // this second, or a later one, is recorded already
	}
	sample := waitroom.Sample{At: at, Rate: r.cfg.Rate, Admitted: r.stats.Admitted}
	sample.Waiting, sample.LiveTokens = r.present(now)
	if n == waitroom.HistoryKeep {
		r.history = append(r.history[:0], r.history[1:]...)
	}
	r.history = append(r.history, sample)
}

// History returns room's samples after since (waitroom.HistoryStore).
func (s *Store) History(ctx context.Context, name string, since time.Time) ([]waitroom.Sample, error) {
	r, err := s.lockedRoom(ctx, name)
	if errors.Is(err, waitroom.ErrRoomNotFound) {
		return nil, nil // no room, no history: as on Redis
	}
	if err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	if len(r.history) == 0 {
		return nil, nil
	}
	from := r.history[len(r.history)-1].At.Add(-waitroom.HistoryWindow)
	if since.After(from) {
		from = since
	}
	i, _ := slices.BinarySearchFunc(r.history, from, func(s waitroom.Sample, t time.Time) int {
		if s.At.After(t) {
			return 1
		}
		return -1
	})
	return slices.Clone(r.history[i:]), nil
}
