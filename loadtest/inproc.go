package loadtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/shop"
)

// InProcess is a waiting room that RunInProcess starts in this process for
// one run: the same server as 'waitroom serve', on a loopback port.
type InProcess struct {
	// Server is the instance's configuration; its rooms, room settings
	// and products are the run's: Config.Room at Config.Rate, holding
	// every user, and Config.ProductID with Config.Stock.
	Server instance.Config
	// RedisURL keeps the room in this Redis, under a fresh key prefix
	// deleted afterwards; empty: in this process (memstore).
	RedisURL string
	// Tick is the admitter's tick; 0: a quarter of the slice.
	Tick time.Duration
	// AbandonAfter and FirstUseWithin are the room's (0: their defaults);
	// RoomStock has the room track Config.Stock, so a live token reserves
	// a unit.
	AbandonAfter, FirstUseWithin time.Duration
	RoomStock                    bool
	// Log receives what fails after the run (deleting its Redis keys).
	Log io.Writer
}

// RunInProcess starts the waiting room in, runs cfg's crowd against it and
// stops it. The server-side figures are exact: every admission tick is
// seen alone, through the admitter's hook. With cfg.CheckPositions the
// admitter starts only once everyone has entered. Room settings the room
// cannot have are RoomConfig.Validate's error, before anything starts.
func RunInProcess(ctx context.Context, cfg Config, in InProcess) (*Report, ServerFigures, error) {
	if cfg.Room == "" {
		cfg.Room = DefaultRoom
	}
	in.Server.Room = waitroom.RoomConfig{Rate: cfg.Rate, MaxQueue: max(cfg.Users, waitroom.DefaultMaxQueue),
		AbandonAfter: in.AbandonAfter, FirstUseWithin: in.FirstUseWithin}.WithDefaults()
	if in.RoomStock {
		in.Server.Room.Stock = cfg.Stock
	}
	if cfg.OpensIn > 0 {
		in.Server.Room.OpensAt = time.Now().Add(cfg.OpensIn)
	}
	if err := in.Server.Room.Validate(); err != nil {
		return nil, ServerFigures{}, err
	}
	room := cfg.Room
	in.Server.Rooms = []string{room}
	in.Server.Products = []shop.Product{{ID: cfg.ProductID, Name: cfg.ProductID, Stock: int64(cfg.Stock)}}
	figs := ServerFigures{Source: "admitter", Exact: true, QueueAtAllEntered: -1, Rate: cfg.Rate, CheckQueue: cfg.CheckPositions,
		MakesUpNoShows: cfg.NoOrderShare > 0 || cfg.VanishShare > 0,
		Quota:          in.Server.Room.TickQuota(), Slice: in.Server.Room.Slice}
	var (
		recorder AdmissionRecorder
		ticks    TickLog
	)
	m := &instance.Instance{Config: in.Server, AdmitEvery: in.Tick, Hold: true, OnAdmit: func(r string, admitted []waitroom.Admission) {
		recorder.OnAdmit(r, admitted)
		if r == room {
			ticks.Add(time.Now(), len(admitted))
		}
	}}
	if in.RedisURL != "" {
		client, err := redisstore.Open(in.RedisURL)
		if err != nil {
			return nil, figs, err
		}
		defer client.Close()
		// A fresh prefix: the run starts from an empty room and leaves
		// nothing behind in a Redis that may serve others.
		prefix := "wrlt-" + strings.ToLower(rand.Text()[:10])
		defer func() {
			cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := redisstore.DeletePrefix(cleanCtx, client, prefix); err != nil && in.Log != nil {
				fmt.Fprintf(in.Log, "waitroom loadtest: deleting the run's Redis keys (%s:*): %v\n", prefix, err)
			}
		}()
		m.Store = redisstore.New(client, redisstore.Options{Prefix: prefix})
		if err := m.Store.Ping(ctx); err != nil {
			return nil, figs, fmt.Errorf("redis at %s: %w", instance.RedactURL(in.RedisURL), err)
		}
	}
	if err := m.Run(ctx); err != nil {
		_ = m.Close()
		return nil, figs, err
	}

	cfg.URL = "http://" + m.Addr()
	cfg.Admissions = &recorder
	if cfg.CheckPositions {
		// Nobody is admitted before everyone has a place, so the places
		// given are exactly 1..N and the queue peaks at N.
		cfg.OnAllEntered = func() {
			if st, err := m.Guarded().Stats(ctx, room); err == nil {
				figs.QueueAtAllEntered = st.Waiting
			}
			m.StartAdmitting()
		}
	} else {
		m.StartAdmitting()
	}
	rep, err := Run(ctx, cfg)
	_ = m.Close() // the run's figures are in; a slow shutdown changes none
	ticks.Summarize(&figs)
	return rep, figs, err
}
