package bench

import (
	"context"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/seedshape"
	"github.com/waitroom/waitroom/redisstore"
)

// seedFigure is one round of one operation, the room's script beside the
// seed-shaped one: Redis µs per call (per admitted user for admit) from
// INFO commandstats, and for enter the CPU of redis-server per call (INFO
// cpu), the seed's sent in pipelines of 16.
type seedFigure struct {
	op                string
	ours, seed        []float64 // µs per call (per user for admit), one per round
	oursCPU, seedCPU  []float64 // redis-server CPU µs per call (enter; the room's status, for its shard's capacity)
	oursUsers, seedUs []float64 // users per call: admit, and the room's enter (concurrent Enters share a call)
}

// Cadence of the admit comparison: a call per millisecond admits 14
// users, the design's slice quota; Redis idles between calls (cold).
const (
	seedAdmitEvery = time.Millisecond
	seedAdmitQuota = 14
)

// The hot admit comparison: hotAdmitCallers goroutines call Admit back to
// back over hotAdmitRooms rooms, each room's quota 14 (1,400/s in 10 ms
// slices), each room called again only once its slice has passed, so that
// every call admits its full quota while Redis never idles;
// hotAdmitVisits calls per room a round. The seed-shaped side makes as many
// calls of 14 from as many goroutines, back to back.
const (
	hotAdmitRooms   = 256
	hotAdmitCallers = 4
	hotAdmitVisits  = 12
	hotAdmitSlice   = 10 * time.Millisecond
)

// measureSeed compares the room's hot-path scripts with seed-shaped ones
// in alternating rounds on the same Redis: ENTER and STATUS in hot loops
// of cfg.Clients callers (the room's through store, autopipelined as the
// server's), ADMIT a call per millisecond.
func (b *Result) measureSeed(ctx context.Context, client redis.UniversalClient, store waitroom.Store, prefix string) error {
	b.progress("redis: room scripts against seed-shaped scripts, %d rounds", b.cfg.Rounds)
	// The seed's hash tag is as long as the room names of the comparison
	// (seed-cmp-enter, bench-status, seed-cmp-admit), so that both sides'
	// key names are as long: Redis's cost per declared key grows with it.
	tag := prefix + ":{seed-cmp-seed}:"
	seedQ, seedSeq, seedTok := tag+"q", tag+"seq", tag+"tok:"
	statusQ := tag + "status"
	// The seed's STATUS queue holds as many users as the room's.
	for from := 0; from < b.cfg.Waiting; from += 10_000 {
		p := client.Pipeline()
		for i := from; i < min(from+10_000, b.cfg.Waiting); i++ {
			p.ZAdd(ctx, statusQ, redis.Z{Score: float64(i), Member: waitingUser("w", i)})
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	for _, s := range []*redis.Script{seedshape.Enter, seedshape.Status, seedshape.StatusSeen, seedshape.Admit} {
		if err := s.Load(ctx, client).Err(); err != nil {
			return err
		}
	}
	enterRoom, admitRoom := "seed-cmp-enter", "seed-cmp-admit"
	if _, err := store.CreateRoom(ctx, enterRoom, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue}); err != nil {
		return err
	}
	admitCfg := waitroom.RoomConfig{Rate: seedAdmitQuota * float64(time.Second/seedAdmitEvery), Slice: 10 * time.Millisecond, MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour}
	if _, err := store.CreateRoom(ctx, admitRoom, admitCfg); err != nil {
		return err
	}

	hotRooms := make([]string, hotAdmitRooms)
	hotCfg := waitroom.RoomConfig{Rate: seedAdmitQuota / hotAdmitSlice.Seconds(), Slice: hotAdmitSlice, MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour}
	for i := range hotRooms {
		hotRooms[i] = fmt.Sprintf("seed-cmp-hot-admit-%03d", i)
		if _, err := store.CreateRoom(ctx, hotRooms[i], hotCfg); err != nil {
			return err
		}
		if _, err := store.Admit(ctx, hotRooms[i]); err != nil { // starts the bucket
			return err
		}
	}

	enter := seedFigure{op: "enter (new place)"}
	status := seedFigure{op: fmt.Sprintf("status (%d waiting)", b.cfg.Waiting)}
	seen := seedFigure{op: fmt.Sprintf("status (%d waiting) against a seed-shaped poll that marks the user seen", b.cfg.Waiting)}
	admit := seedFigure{op: fmt.Sprintf("admit, per admitted user (%d per call, a call per %s: cold)", seedAdmitQuota, seedAdmitEvery)}
	hotAdmit := seedFigure{op: fmt.Sprintf("admit, per admitted user (%d per call, %d callers back to back over %d rooms: hot)", seedAdmitQuota, hotAdmitCallers, hotAdmitRooms)}
	hotPerRoom := (1 + hotAdmitVisits) * seedAdmitQuota // the warm-up visit's too
	var users atomic.Int64
	newUser := func() string { return "e" + strconv.FormatInt(users.Add(1), 10) }
	perAdmit := int(b.cfg.Slice/seedAdmitEvery) * seedAdmitQuota

	type side struct {
		name string
		run  func() error
	}
	for round := range b.cfg.Rounds {
		// Fill the admit queues for this round (untimed).
		if err := fill(ctx, store, admitRoom, fmt.Sprintf("a%d-", round), perAdmit+seedAdmitQuota, b.cfg.Clients); err != nil {
			return err
		}
		if _, err := store.Admit(ctx, admitRoom); err != nil { // starts or refills the bucket
			return err
		}
		// The first round leaves a quota waiting in each room, so that the
		// Store's every call brings the tokens it will use, as it does in a
		// room whose queue never empties (a call after one that left nobody
		// waiting brings none, and is made again when users came).
		hotFill := hotPerRoom
		if round == 0 {
			hotFill += seedAdmitQuota
		}
		if err := fillRooms(ctx, store, hotRooms, fmt.Sprintf("h%d-", round), hotFill, b.cfg.Clients); err != nil {
			return err
		}
		p := client.Pipeline()
		for i := range perAdmit + seedAdmitQuota {
			p.ZAdd(ctx, seedQ+"a", redis.Z{Score: float64(i), Member: fmt.Sprintf("a%d-%d", round, i)})
		}
		for i := range hotAdmitRooms * hotPerRoom {
			p.ZAdd(ctx, seedHotQueue(seedQ, i%hotAdmitRooms), redis.Z{Score: float64(i), Member: fmt.Sprintf("h%d-%d", round, i)})
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}

		sides := []side{
			{"ours enter", func() error {
				us, cpu, n, seen, err := b.serverCost(ctx, client, func(int) error {
					_, err := store.Enter(ctx, enterRoom, newUser())
					return err
				}, 1, true)
				enter.ours, enter.oursCPU = append(enter.ours, us/n), append(enter.oursCPU, cpu/n)
				enter.oursUsers = append(enter.oursUsers, n/max(seen, 1))
				return err
			}},
			{"seed enter", func() error {
				us, cpu, n, _, err := b.serverCost(ctx, client, func(int) error {
					p := client.Pipeline()
					for range 16 {
						p.EvalSha(ctx, seedshape.Enter.Hash(), []string{seedQ, seedSeq}, newUser(), seedTok, waitroom.MaxMaxQueue)
					}
					_, err := p.Exec(ctx)
					return err
				}, 16, false)
				enter.seed, enter.seedCPU = append(enter.seed, us/n), append(enter.seedCPU, cpu/n)
				return err
			}},
			{"ours status", func() error {
				us, cpu, n, _, err := b.serverCost(ctx, client, func(int) error {
					_, err := store.Status(ctx, benchStatusRoom, waitingUser("w", mrand.IntN(b.cfg.Waiting)))
					return err
				}, 1, true)
				status.ours, seen.ours = append(status.ours, us/n), append(seen.ours, us/n)
				status.oursCPU, seen.oursCPU = append(status.oursCPU, cpu/n), append(seen.oursCPU, cpu/n)
				return err
			}},
			{"seed status, seen", func() error {
				us, _, n, _, err := b.serverCost(ctx, client, func(int) error {
					return seedshape.StatusSeen.EvalSha(ctx, client, []string{statusQ}, waitingUser("w", mrand.IntN(b.cfg.Waiting)), seedTok, mrand.Float64()).Err()
				}, 1, false)
				seen.seed = append(seen.seed, us/n)
				return err
			}},
			{"seed status", func() error {
				us, _, n, _, err := b.serverCost(ctx, client, func(int) error {
					return seedshape.Status.EvalSha(ctx, client, []string{statusQ}, waitingUser("w", mrand.IntN(b.cfg.Waiting)), seedTok).Err()
				}, 1, false)
				status.seed = append(status.seed, us/n)
				return err
			}},
			{"ours admit", func() error {
				var admitted int64
				us, _, n, _, err := b.serverCostEvery(ctx, client, func() error {
					got, err := store.Admit(ctx, admitRoom)
					admitted += int64(len(got))
					return err
				})
				if admitted > 0 {
					admit.ours, admit.oursUsers = append(admit.ours, us/float64(admitted)), append(admit.oursUsers, float64(admitted)/n)
				}
				return err
			}},
			{"seed admit", func() error {
				var admitted int64
				us, _, n, _, err := b.serverCostEvery(ctx, client, func() error {
					args := []any{seedAdmitQuota, 3600, seedTok}
					for range seedAdmitQuota {
						args = append(args, waitroom.NewToken())
					}
					got, err := seedshape.Admit.EvalSha(ctx, client, []string{seedQ + "a"}, args...).Int64()
					admitted += got
					return err
				})
				if admitted > 0 {
					admit.seed, admit.seedUs = append(admit.seed, us/float64(admitted)), append(admit.seedUs, float64(admitted)/n)
				}
				return err
			}},
		}
		sides = append(sides,
			side{"ours admit, hot", func() error {
				us, admitted, calls, err := b.hotAdmit(ctx, client, func(i int) (int, error) {
					got, err := store.Admit(ctx, hotRooms[i])
					return len(got), err
				}, true)
				if admitted > 0 {
					hotAdmit.ours, hotAdmit.oursUsers = append(hotAdmit.ours, us/admitted), append(hotAdmit.oursUsers, admitted/calls)
				}
				return err
			}},
			side{"seed admit, hot", func() error {
				us, admitted, calls, err := b.hotAdmit(ctx, client, func(i int) (int, error) {
					args := []any{seedAdmitQuota, 3600, seedTok}
					for range seedAdmitQuota {
						args = append(args, waitroom.NewToken())
					}
					got, err := seedshape.Admit.EvalSha(ctx, client, []string{seedHotQueue(seedQ, i)}, args...).Int64()
					return int(got), err
				}, false)
				if admitted > 0 {
					hotAdmit.seed, hotAdmit.seedUs = append(hotAdmit.seed, us/admitted), append(hotAdmit.seedUs, admitted/calls)
				}
				return err
			}})
		// Rotate the order of the groups each round, and within a group
		// run the room's side first and last in turn.
		groups := [][]side{sides[0:2], sides[2:5], sides[5:7], sides[7:9]}
		for i := range groups {
			group := slices.Clone(groups[(i+round)%len(groups)])
			if round%2 == 1 {
				slices.Reverse(group)
			}
			for _, s := range group {
				if err := s.run(); err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
			}
		}
	}
	b.seed = []seedFigure{enter, status, admit, seen, hotAdmit}
	return nil
}

// hotAdmit makes a warm-up visit, untimed, then hotAdmitVisits timed
// visits of every room (0 to hotAdmitRooms-1), calling admit from
// hotAdmitCallers goroutines back to back: each goroutine takes every
// hotAdmitCallers-th room in turn and, paced, calls a room again no sooner
// than hotAdmitSlice after its last call, so that the room's bucket allows
// its full quota. (Without the warm-up, the side that ran first in a round
// paid for bringing Redis's caches back to its keys.) It returns the
// script µs (FCALL and EVALSHA), the users admitted and the calls made by
// the timed visits.
func (b *Result) hotAdmit(ctx context.Context, client redis.UniversalClient, admit func(room int) (int, error), paced bool) (usec, admitted, calls float64, err error) {
	last := make([]time.Time, hotAdmitRooms)
	var users, n atomic.Int64
	visit := func(visits int) error {
		var wg sync.WaitGroup
		var once sync.Once
		var err error
		for g := range hotAdmitCallers {
			wg.Go(func() {
				for range visits {
					for room := g; room < hotAdmitRooms; room += hotAdmitCallers {
						if paced {
							time.Sleep(time.Until(last[room].Add(hotAdmitSlice + time.Millisecond)))
							last[room] = time.Now()
						}
						got, e := admit(room)
						if e != nil {
							once.Do(func() { err = e })
							return
						}
						users.Add(int64(got))
						n.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return err
	}
	if err := visit(1); err != nil {
		return 0, 0, 0, err
	}
	users.Store(0)
	n.Store(0)
	before, _, err := b.costReading(ctx, client)
	if err != nil {
		return 0, 0, 0, err
	}
	err = visit(hotAdmitVisits)
	after, _, rerr := b.costReading(ctx, client)
	if err == nil {
		err = rerr
	}
	if seen := after.Calls - before.Calls; seen != n.Load() {
		b.scriptsShared = true
	}
	return float64(after.Usec - before.Usec), float64(users.Load()), float64(max(n.Load(), 1)), err
}

// seedHotQueue is the seed-shaped queue of the hot admit comparison's ith
// room: one per room, as the room's side has.
func seedHotQueue(seedQ string, i int) string { return seedQ + "h" + strconv.Itoa(i) }

// fillRooms fills each of rooms with n users named prefix + room index +
// number, the rooms one after another.
func fillRooms(ctx context.Context, store waitroom.Store, rooms []string, prefix string, n, workers int) error {
	for i, room := range rooms {
		if err := fill(ctx, store, room, fmt.Sprintf("%s%d-", prefix, i), n, workers); err != nil {
			return err
		}
	}
	return nil
}

// serverCost runs op from cfg.Clients goroutines for one slice and returns
// the script µs (FCALL and EVALSHA) and the redis-server CPU µs it cost Redis, and the calls
// made (each op call makes per calls); batched, the Store gathers
// concurrent operations into fewer calls (Enter, Status).
func (b *Result) serverCost(ctx context.Context, client redis.UniversalClient, op func(int) error, per int, batched bool) (usec, cpuUS, calls, seen float64, err error) {
	before, cpu0, err := b.costReading(ctx, client)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	deadline := time.Now().Add(b.cfg.Slice)
	for i := range b.cfg.Clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if e := op(i); e != nil {
					once.Do(func() { err = e })
					return
				}
				n.Add(int64(per))
			}
		})
	}
	wg.Wait()
	after, cpu1, rerr := b.costReading(ctx, client)
	if err == nil {
		err = rerr
	}
	calls = float64(max(n.Load(), 1))
	seen = float64(after.Calls - before.Calls)
	// A batched operation (Enter, Status) takes fewer calls than operations;
	// another client's calls then show only if they are more than ours.
	if seen != calls && !(batched && seen < calls) {
		b.scriptsShared = true
	}
	return float64(after.Usec - before.Usec), cpu1 - cpu0, calls, seen, err
}

// serverCostEvery is serverCost for one caller, a call per seedAdmitEvery.
func (b *Result) serverCostEvery(ctx context.Context, client redis.UniversalClient, op func() error) (usec, cpuUS, calls, seen float64, err error) {
	before, cpu0, err := b.costReading(ctx, client)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	ticker := time.NewTicker(seedAdmitEvery)
	defer ticker.Stop()
	var n int64
	for range int(b.cfg.Slice / seedAdmitEvery) {
		<-ticker.C
		if err = op(); err != nil {
			break
		}
		n++
	}
	after, cpu1, rerr := b.costReading(ctx, client)
	if err == nil {
		err = rerr
	}
	return float64(after.Usec - before.Usec), cpu1 - cpu0, float64(max(n, 1)), float64(after.Calls - before.Calls), err
}

// costReading reads the script counters and redis-server's CPU (µs): the
// room's functions are FCALLs, the seed-shaped scripts EVALSHAs, and a
// slice runs only one side, so the two counters are added.
func (b *Result) costReading(ctx context.Context, client redis.UniversalClient) (redisstore.CommandStat, float64, error) {
	stats, err := redisstore.CommandStats(ctx, client)
	if err != nil {
		return redisstore.CommandStat{}, 0, err
	}
	cpu, err := redisstore.ServerCPU(ctx, client)
	if err != nil {
		return redisstore.CommandStat{}, 0, err
	}
	f, e := stats["fcall"], stats["evalsha"]
	return redisstore.CommandStat{Calls: f.Calls + e.Calls, Usec: f.Usec + e.Usec}, float64(cpu.Microseconds()), nil
}

// writeSeed prints the comparison with the seed-shaped scripts.
func (b *Result) writeSeed(w io.Writer) {
	if len(b.seed) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### The room's scripts against seed-shaped ones (same Redis, alternating rounds)\n\n")
	fmt.Fprintf(w, "Hot loops of %d callers for ENTER and STATUS (the room's through the Store, automatically pipelined as the server's; the seed's ENTER in pipelines of 16); ADMIT hot (%d callers back to back, the room's over %d rooms, each called again once its %s slice has passed) and cold (a call per %s, Redis idle between). µs are the server time per call (per admitted user for admit) of the room's FCALL and the seed-shaped EVALSHA, from INFO commandstats; CPU is redis-server's whole CPU (INFO cpu: I/O included; clean only on a Redis serving nobody else) per call. A ratio is the median of the rounds' own ratios, with their range.\n\n", b.cfg.Clients, hotAdmitCallers, hotAdmitRooms, hotAdmitSlice, seedAdmitEvery)
	fmt.Fprintf(w, "| operation | room µs | seed-shaped µs | room ÷ seed (target) | room CPU µs | seed CPU µs | CPU room ÷ seed (target) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	// ADMIT's target is the hot loop's; the cold figure is reported beside.
	targets := map[int]string{0: "≤ 1.0", 1: "≤ 1.0 + last-seen", 2: "reported", 3: "≤ 1.0", 4: "≤ 1.5"}
	cpuTargets := map[int]string{0: " (≤ 1.25)"}
	for i, f := range b.seed {
		cpu := "| | |"
		switch {
		case len(f.seedCPU) > 0:
			cpu = fmt.Sprintf("%.2f | %.2f | %s%s |", median(f.oursCPU), median(f.seedCPU), spread(ratios(f.oursCPU, f.seedCPU), "**"), cpuTargets[i])
		case len(f.oursCPU) > 0:
			// The seed's polls go one by one, the room's pipelined: their
			// I/O is not alike, so no ratio.
			cpu = fmt.Sprintf("%.2f | | |", median(f.oursCPU))
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %s (%s) | %s\n", f.op, median(f.ours), median(f.seed), spread(ratios(f.ours, f.seed), "**"), targets[i], cpu)
	}
	fmt.Fprintf(w, "\nEvery round's ratio, in the order run:\n\n")
	for _, f := range b.seed {
		fmt.Fprintf(w, "- %s: %s", f.op, roundList(ratios(f.ours, f.seed)))
		if len(f.seedCPU) > 0 {
			fmt.Fprintf(w, "; CPU %s", roundList(ratios(f.oursCPU, f.seedCPU)))
		}
		fmt.Fprintln(w)
	}
	for _, i := range []int{4, 2} {
		if i < len(b.seed) && len(b.seed[i].oursUsers) > 0 {
			f := b.seed[i]
			fmt.Fprintf(w, "\nUsers per admit call, %s: room %.1f, seed %.1f.\n", map[int]string{2: "cold", 4: "hot"}[i], median(f.oursUsers), median(f.seedUs))
		}
	}
	if f := b.seed[0]; len(f.oursUsers) > 0 {
		fmt.Fprintf(w, "\nENTERs per room call (the Store sends a room's concurrent Enters in one call; its µs and CPU above are per ENTER): %.1f (each round: %s).\n", median(f.oursUsers), roundList(f.oursUsers))
	}
	// A room lives on one shard, and Redis runs its scripts on one core:
	// the CPU per call is what bounds the biggest room.
	enter, status := b.seed[0], b.seed[1]
	if len(enter.oursCPU) > 0 && len(status.oursCPU) > 0 {
		fmt.Fprintf(w, "\nOne room's shard, one core at these costs (clean only on a Redis serving nobody else): about %s ENTERs/s (each round, thousands: %s) or %s STATUS polls/s (each round: %s), not both at once.\n",
			perCore(median(enter.oursCPU)), roundList(perCoreAll(enter.oursCPU)), perCore(median(status.oursCPU)), roundList(perCoreAll(status.oursCPU)))
	}
}

// perCore is how many calls a second one core makes at cpuUS µs a call,
// rounded to the thousand.
func perCore(cpuUS float64) string {
	if cpuUS <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.0fk", 1e3/cpuUS)
}

// perCoreAll is perCore's figure (thousands a second) for every round.
func perCoreAll(cpuUS []float64) []float64 {
	out := make([]float64, len(cpuUS))
	for i, c := range cpuUS {
		if c > 0 {
			out[i] = 1e3 / c
		}
	}
	return out
}
