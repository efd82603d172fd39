package memstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
)

// Queue lengths to compare: if Enter and Status are O(log n), going from 1k
// to 100k waiting costs a small constant factor, not 100×.
var benchWaiting = []int{1_000, 10_000, 100_000}

// benchRoom returns a store with waiting users u0…u(waiting-1) queued.
func benchRoom(b *testing.B, cfg waitroom.RoomConfig, waiting int) (*memstore.Store, *memstore.ManualClock, string) {
	b.Helper()
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now})
	const room = "bench"
	cfg.MaxQueue = waitroom.MaxMaxQueue
	if _, err := s.CreateRoom(b.Context(), room, cfg); err != nil {
		b.Fatal(err)
	}
	for i := range waiting {
		if _, err := s.Enter(b.Context(), room, "u"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	return s, clock, room
}

// randomQueued returns a fixed sequence of queued user ids, drawn before
// the timer starts so that it measures the store, not the generator.
func randomQueued(waiting int) []string {
	rng := rand.New(rand.NewPCG(7, 11))
	ids := make([]string, 1<<14)
	for i := range ids {
		ids[i] = "u" + strconv.Itoa(rng.IntN(waiting))
	}
	return ids
}

// eachQueued calls call (Enter or Status) once per iteration for a queued
// user, among waiting.
func eachQueued(b *testing.B, waiting int, call func(*memstore.Store, context.Context, string, string) (waitroom.Status, error)) {
	s, _, room := benchRoom(b, waitroom.RoomConfig{}, waiting)
	ctx := b.Context()
	ids := randomQueued(waiting)
	i := 0
	for b.Loop() {
		if _, err := call(s, ctx, room, ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkEnter(b *testing.B) {
	for _, waiting := range benchWaiting {
		// A new user joins the back while the oldest leaves, so the queue
		// stays at its length and the window keeps compacting.
		b.Run(fmt.Sprintf("waiting=%d/new+leave", waiting), func(b *testing.B) {
			s, _, room := benchRoom(b, waitroom.RoomConfig{}, waiting)
			ctx := b.Context()
			next, oldest := waiting, 0
			for b.Loop() {
				if _, err := s.Enter(ctx, room, "u"+strconv.Itoa(next)); err != nil {
					b.Fatal(err)
				}
				if err := s.Leave(ctx, room, "u"+strconv.Itoa(oldest)); err != nil {
					b.Fatal(err)
				}
				next++
				oldest++
			}
		})
		// A queued user enters again (a refresh): the answer is its place.
		b.Run(fmt.Sprintf("waiting=%d/again", waiting), func(b *testing.B) {
			eachQueued(b, waiting, (*memstore.Store).Enter)
		})
	}
}

func BenchmarkStatus(b *testing.B) {
	for _, waiting := range benchWaiting {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			eachQueued(b, waiting, (*memstore.Store).Status)
		})
		// Many request goroutines asking about one room at once.
		b.Run(fmt.Sprintf("waiting=%d/parallel", waiting), func(b *testing.B) {
			s, _, room := benchRoom(b, waitroom.RoomConfig{}, waiting)
			ctx := b.Context()
			ids := randomQueued(waiting)
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(len(ids))
				for pb.Next() {
					if _, err := s.Status(ctx, room, ids[i%len(ids)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

// BenchmarkAdmit is one 100 ms tick at the default 140 users/s with 100,000
// waiting: 14 users popped and issued tokens, and, once the first tokens
// reach their TTL, as many expired ones dropped.
func BenchmarkAdmit(b *testing.B) {
	const waiting = 100_000
	s, clock, room := benchRoom(b, waitroom.RoomConfig{}, waiting)
	ctx := b.Context()
	if _, err := s.Admit(ctx, room); err != nil {
		b.Fatal(err)
	}
	next := waiting
	admitted := 0
	for b.Loop() {
		clock.Advance(waitroom.DefaultSlice)
		adm, err := s.Admit(ctx, room)
		if err != nil {
			b.Fatal(err)
		}
		admitted += len(adm)
		if admitted%waiting < len(adm) { // refill: keep ~100,000 waiting
			b.StopTimer()
			for range waiting {
				if _, err := s.Enter(ctx, room, "u"+strconv.Itoa(next)); err != nil {
					b.Fatal(err)
				}
				next++
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(admitted)/float64(b.N), "users/op")
}

// BenchmarkClaim claims a live token and releases it again, among 10,000
// live tokens: the gate's work around one failed order.
func BenchmarkClaim(b *testing.B) {
	const holders = 10_000
	cfg := waitroom.RoomConfig{Rate: holders, Slice: time.Second, TokenTTL: waitroom.MaxTokenTTL}
	s, clock, room := benchRoom(b, cfg, holders)
	ctx := b.Context()
	if _, err := s.Admit(ctx, room); err != nil {
		b.Fatal(err)
	}
	clock.Advance(time.Second)
	adm, err := s.Admit(ctx, room)
	if err != nil {
		b.Fatal(err)
	}
	if len(adm) != holders {
		b.Fatalf("admitted %d, want %d", len(adm), holders)
	}
	i := 0
	for b.Loop() {
		a := adm[i%holders]
		h, err := s.Claim(ctx, room, a.User, a.Token)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, h); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
