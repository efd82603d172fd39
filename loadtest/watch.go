package loadtest

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminclient"
)

// SampleEvery is how often RunWatched reads the room's admitted counter:
// well under one 100 ms admission tick, so a reading mostly sees one tick
// (a late tick and the next may share one).
const SampleEvery = 10 * time.Millisecond

// RunWatched is Run against a running server that it watches through the
// operator API: it reads the room's settings (cfg.Rate, when 0, becomes the
// room's rate), holds the room paused until everyone has entered when
// cfg.CheckPositions asks for places 1..N, and reads the store's admitted
// counter every SampleEvery to time the admission ticks from the server's
// side. The room is never left paused.
func RunWatched(ctx context.Context, cfg Config, admin *adminclient.Client) (*Report, ServerFigures, error) {
	figs := ServerFigures{QueueAtAllEntered: -1, Rate: cfg.Rate, CheckQueue: cfg.CheckPositions,
		MakesUpNoShows: cfg.NoOrderShare > 0 || cfg.VanishShare > 0}
	room, err := admin.Room(ctx, cfg.Room)
	if err != nil {
		return nil, figs, err
	}
	if cfg.Rate == 0 {
		cfg.Rate = room.Rate
	}
	slice, err := time.ParseDuration(room.Slice)
	if err != nil {
		return nil, figs, fmt.Errorf("the admin API gave slice %q: %w", room.Slice, err)
	}
	figs.Source, figs.Rate = "admin counter", room.Rate
	figs.Quota, figs.Slice = int(math.Ceil(room.Rate*slice.Seconds())), slice
	if cfg.CheckPositions {
		if room.Figures.Waiting != 0 {
			return nil, figs, fmt.Errorf("--check-positions needs an empty queue, but room %s has %d waiting", cfg.Room, room.Figures.Waiting)
		}
		if err := admin.SetState(ctx, cfg.Room, waitroom.RoomPaused); err != nil {
			return nil, figs, err
		}
		defer func() { _ = admin.SetState(context.WithoutCancel(ctx), cfg.Room, room.State) }()
		cfg.OnAllEntered = func() {
			if r, err := admin.Room(ctx, cfg.Room); err == nil {
				figs.QueueAtAllEntered = r.Figures.Waiting
			}
			_ = admin.SetState(ctx, cfg.Room, room.State)
		}
	}

	if cfg.OpensIn > 0 {
		// The opening: every user arrives before it (Config.validate).
		opens := time.Now().Add(cfg.OpensIn).UTC().Format(time.RFC3339Nano)
		if _, err := admin.Call(ctx, "PATCH", "/admin/rooms/"+url.PathEscape(cfg.Room), map[string]any{"opens_at": opens}); err != nil {
			return nil, figs, fmt.Errorf("scheduling the opening: %w", err)
		}
	}

	var ticks TickLog
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sampleAdmissions(sampleCtx, admin, cfg.Room, room.Figures.Admitted, &ticks)
	}()
	rep, err := Run(ctx, cfg)
	stopSampling()
	<-sampled
	ticks.Summarize(&figs)
	if rep != nil && figs.Ticks > 0 {
		// The sustained rate is the store's, not the users' polls': say
		// so, and give the counter's figure.
		a := &rep.Admissions
		a.Source = "admin counter"
		a.PerSecondMean, a.PerSecondRatio = figs.PerSecond, figs.Ratio
	}
	return rep, figs, err
}

// sampleAdmissions reads room's admitted counter every SampleEvery until
// ctx is done and logs each growth over last, the reading before the run.
func sampleAdmissions(ctx context.Context, admin *adminclient.Client, room string, last int64, ticks *TickLog) {
	ticker := time.NewTicker(SampleEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		r, err := admin.Room(ctx, room)
		if err != nil {
			continue
		}
		if n := r.Figures.Admitted - last; n > 0 {
			ticks.Add(time.Now(), int(n))
		}
		last = r.Figures.Admitted
	}
}
