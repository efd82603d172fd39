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
	"github.com/waitroom/waitroom/internal/baseline"
	"github.com/waitroom/waitroom/redisstore"
)

// baselineFigure is one round of one operation, the room's script beside the
// baseline one: Redis µs per call (per admitted user for admit) from
// INFO commandstats, and for enter the CPU of redis-server per call (INFO
// cpu), the baseline's sent in pipelines of 16.
type baselineFigure struct {
	op                    string
	ours, baseline        []float64 // µs per call (per user for admit), one per round
	oursCPU, baselineCPU  []float64 // redis-server CPU µs per call (enter; the room's status, for its shard's capacity)
	oursUsers, baselineUs []float64 // users per call: admit, and the room's enter (concurrent Enters share a call)
}

// Cadence of the admit comparison: a call per millisecond admits 14
// users, the design's slice quota; Redis idles between calls (cold).
const (
	baselineAdmitEvery = time.Millisecond
	baselineAdmitQuota = 14
)

// The hot admit comparison: hotAdmitCallers goroutines call Admit back to
// back over hotAdmitRooms rooms, each room's quota 14 (1,400/s in 10 ms
// slices), each room called again only once its slice has passed, so that
// every call admits its full quota while Redis never idles;
// hotAdmitVisits calls per room a round. The baseline side makes as many
// calls of 14 from as many goroutines, back to back.
const (
	hotAdmitRooms   = 256
	hotAdmitCallers = 4
	hotAdmitVisits  = 12
	hotAdmitSlice   = 10 * time.Millisecond
)

// measureBaseline compares the room's hot-path scripts with baseline ones
// in alternating rounds on the same Redis: ENTER and STATUS in hot loops
// of cfg.Clients callers (the room's through store, autopipelined as the
// server's), ADMIT a call per millisecond.
func (b *Result) measureBaseline(ctx context.Context, client redis.UniversalClient, store waitroom.Store, prefix string) error {
	b.progress("redis: room scripts against baseline scripts, %d rounds", b.cfg.Rounds)
	// The baseline's hash tag is as long as the room names of the comparison
	// (base-cmp-enter, bench-status, base-cmp-admit), so that both sides'
	// key names are as long: Redis's cost per declared key grows with it.
	tag := prefix + ":{base-cmp-base}:"
	baselineQ, baselineSeq, baselineTok := tag+"q", tag+"seq", tag+"tok:"
	statusQ := tag + "status"
	// The baseline's STATUS queue holds as many users as the room's.
	for from := 0; from < b.cfg.Waiting; from += 10_000 {
		p := client.Pipeline()
		for i := from; i < min(from+10_000, b.cfg.Waiting); i++ {
			p.ZAdd(ctx, statusQ, redis.Z{Score: float64(i), Member: waitingUser("w", i)})
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	for _, s := range []*redis.Script{baseline.Enter, baseline.Status, baseline.StatusSeen, baseline.Admit} {
		if err := s.Load(ctx, client).Err(); err != nil {
			return err
		}
	}
	enterRoom, admitRoom := "base-cmp-enter", "base-cmp-admit"
	if _, err := store.CreateRoom(ctx, enterRoom, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue}); err != nil {
		return err
	}
	admitCfg := waitroom.RoomConfig{Rate: baselineAdmitQuota * float64(time.Second/baselineAdmitEvery), Slice: 10 * time.Millisecond, MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour}
	if _, err := store.CreateRoom(ctx, admitRoom, admitCfg); err != nil {
		return err
	}

	hotRooms := make([]string, hotAdmitRooms)
	hotCfg := waitroom.RoomConfig{Rate: baselineAdmitQuota / hotAdmitSlice.Seconds(), Slice: hotAdmitSlice, MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour}
	for i := range hotRooms {
		hotRooms[i] = fmt.Sprintf("base-cmp-hot-admit-%03d", i)
		if _, err := store.CreateRoom(ctx, hotRooms[i], hotCfg); err != nil {
			return err
		}
		if _, err := store.Admit(ctx, hotRooms[i]); err != nil { // starts the bucket
			return err
		}
	}

	enter := baselineFigure{op: "enter (new place)"}
	status := baselineFigure{op: fmt.Sprintf("status (%d waiting)", b.cfg.Waiting)}
	seen := baselineFigure{op: fmt.Sprintf("status (%d waiting) against a baseline poll that marks the user seen", b.cfg.Waiting)}
	admit := baselineFigure{op: fmt.Sprintf("admit, per admitted user (%d per call, a call per %s: cold)", baselineAdmitQuota, baselineAdmitEvery)}
	hotAdmit := baselineFigure{op: fmt.Sprintf("admit, per admitted user (%d per call, %d callers back to back over %d rooms: hot)", baselineAdmitQuota, hotAdmitCallers, hotAdmitRooms)}
	hotPerRoom := (1 + hotAdmitVisits) * baselineAdmitQuota // the warm-up visit's too
	var users atomic.Int64
	newUser := func() string { return "e" + strconv.FormatInt(users.Add(1), 10) }
	perAdmit := int(b.cfg.Slice/baselineAdmitEvery) * baselineAdmitQuota

	type side struct {
		name string
		run  func() error
	}
	for round := range b.cfg.Rounds {
		// Fill the admit queues for this round (untimed).
		if err := fill(ctx, store, admitRoom, fmt.Sprintf("a%d-", round), perAdmit+baselineAdmitQuota, b.cfg.Clients); err != nil {
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
			hotFill += baselineAdmitQuota
		}
		if err := fillRooms(ctx, store, hotRooms, fmt.Sprintf("h%d-", round), hotFill, b.cfg.Clients); err != nil {
			return err
		}
		p := client.Pipeline()
		for i := range perAdmit + baselineAdmitQuota {
			p.ZAdd(ctx, baselineQ+"a", redis.Z{Score: float64(i), Member: fmt.Sprintf("a%d-%d", round, i)})
		}
		for i := range hotAdmitRooms * hotPerRoom {
			p.ZAdd(ctx, baselineHotQueue(baselineQ, i%hotAdmitRooms), redis.Z{Score: float64(i), Member: fmt.Sprintf("h%d-%d", round, i)})
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
			{"baseline enter", func() error {
				us, cpu, n, _, err := b.serverCost(ctx, client, func(int) error {
					p := client.Pipeline()
					for range 16 {
						p.EvalSha(ctx, baseline.Enter.Hash(), []string{baselineQ, baselineSeq}, newUser(), baselineTok, waitroom.MaxMaxQueue)
					}
					_, err := p.Exec(ctx)
					return err
				}, 16, false)
				enter.baseline, enter.baselineCPU = append(enter.baseline, us/n), append(enter.baselineCPU, cpu/n)
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
			{"baseline status, seen", func() error {
				us, _, n, _, err := b.serverCost(ctx, client, func(int) error {
					return baseline.StatusSeen.EvalSha(ctx, client, []string{statusQ}, waitingUser("w", mrand.IntN(b.cfg.Waiting)), baselineTok, mrand.Float64()).Err()
				}, 1, false)
				seen.baseline = append(seen.baseline, us/n)
				return err
			}},
			{"baseline status", func() error {
				us, _, n, _, err := b.serverCost(ctx, client, func(int) error {
					return baseline.Status.EvalSha(ctx, client, []string{statusQ}, waitingUser("w", mrand.IntN(b.cfg.Waiting)), baselineTok).Err()
				}, 1, false)
				status.baseline = append(status.baseline, us/n)
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
			{"baseline admit", func() error {
				var admitted int64
				us, _, n, _, err := b.serverCostEvery(ctx, client, func() error {
					args := []any{baselineAdmitQuota, 3600, baselineTok}
					for range baselineAdmitQuota {
						args = append(args, waitroom.NewToken())
					}
					got, err := baseline.Admit.EvalSha(ctx, client, []string{baselineQ + "a"}, args...).Int64()
					admitted += got
					return err
				})
				if admitted > 0 {
					admit.baseline, admit.baselineUs = append(admit.baseline, us/float64(admitted)), append(admit.baselineUs, float64(admitted)/n)
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
			side{"baseline admit, hot", func() error {
				us, admitted, calls, err := b.hotAdmit(ctx, client, func(i int) (int, error) {
					args := []any{baselineAdmitQuota, 3600, baselineTok}
					for range baselineAdmitQuota {
						args = append(args, waitroom.NewToken())
					}
					got, err := baseline.Admit.EvalSha(ctx, client, []string{baselineHotQueue(baselineQ, i)}, args...).Int64()
					return int(got), err
				}, false)
				if admitted > 0 {
					hotAdmit.baseline, hotAdmit.baselineUs = append(hotAdmit.baseline, us/admitted), append(hotAdmit.baselineUs, admitted/calls)
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
	b.baseline = []baselineFigure{enter, status, admit, seen, hotAdmit}
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

// baselineHotQueue is the baseline queue of the hot admit comparison's ith
// room: one per room, as the room's side has.
func baselineHotQueue(baselineQ string, i int) string { return baselineQ + "h" + strconv.Itoa(i) }

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

// serverCostEvery is serverCost for one caller, a call per baselineAdmitEvery.
func (b *Result) serverCostEvery(ctx context.Context, client redis.UniversalClient, op func() error) (usec, cpuUS, calls, seen float64, err error) {
	before, cpu0, err := b.costReading(ctx, client)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	ticker := time.NewTicker(baselineAdmitEvery)
	defer ticker.Stop()
	var n int64
	for range int(b.cfg.Slice / baselineAdmitEvery) {
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
// room's functions are FCALLs, the baseline scripts EVALSHAs, and a
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

// writeBaseline prints the comparison with the baseline scripts.
func (b *Result) writeBaseline(w io.Writer) {
	if len(b.baseline) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### The room's scripts against baseline ones (same Redis, alternating rounds)\n\n")
	fmt.Fprintf(w, "Hot loops of %d callers for ENTER and STATUS (the room's through the Store, automatically pipelined as the server's; the baseline's ENTER in pipelines of 16); ADMIT hot (%d callers back to back, the room's over %d rooms, each called again once its %s slice has passed) and cold (a call per %s, Redis idle between). µs are the server time per call (per admitted user for admit) of the room's FCALL and the baseline EVALSHA, from INFO commandstats; CPU is redis-server's whole CPU (INFO cpu: I/O included; clean only on a Redis serving nobody else) per call. A ratio is the median of the rounds' own ratios, with their range.\n\n", b.cfg.Clients, hotAdmitCallers, hotAdmitRooms, hotAdmitSlice, baselineAdmitEvery)
	fmt.Fprintf(w, "| operation | room µs | baseline µs | room ÷ baseline (target) | room CPU µs | baseline CPU µs | CPU room ÷ baseline (target) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	// ADMIT's target is the hot loop's; the cold figure is reported beside.
	targets := map[int]string{0: "≤ 1.0", 1: "≤ 1.0 + last-seen", 2: "reported", 3: "≤ 1.0", 4: "≤ 1.5"}
	cpuTargets := map[int]string{0: " (≤ 1.25)"}
	for i, f := range b.baseline {
		cpu := "| | |"
		switch {
		case len(f.baselineCPU) > 0:
			cpu = fmt.Sprintf("%.2f | %.2f | %s%s |", median(f.oursCPU), median(f.baselineCPU), spread(ratios(f.oursCPU, f.baselineCPU), "**"), cpuTargets[i])
		case len(f.oursCPU) > 0:
			// The baseline's polls go one by one, the room's pipelined: their
			// I/O is not alike, so no ratio.
			cpu = fmt.Sprintf("%.2f | | |", median(f.oursCPU))
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %s (%s) | %s\n", f.op, median(f.ours), median(f.baseline), spread(ratios(f.ours, f.baseline), "**"), targets[i], cpu)
	}
	fmt.Fprintf(w, "\nEvery round's ratio, in the order run:\n\n")
	for _, f := range b.baseline {
		fmt.Fprintf(w, "- %s: %s", f.op, roundList(ratios(f.ours, f.baseline)))
		if len(f.baselineCPU) > 0 {
			fmt.Fprintf(w, "; CPU %s", roundList(ratios(f.oursCPU, f.baselineCPU)))
		}
		fmt.Fprintln(w)
	}
	for _, i := range []int{4, 2} {
		if i < len(b.baseline) && len(b.baseline[i].oursUsers) > 0 {
			f := b.baseline[i]
			fmt.Fprintf(w, "\nUsers per admit call, %s: room %.1f, baseline %.1f.\n", map[int]string{2: "cold", 4: "hot"}[i], median(f.oursUsers), median(f.baselineUs))
		}
	}
	if f := b.baseline[0]; len(f.oursUsers) > 0 {
		fmt.Fprintf(w, "\nENTERs per room call (the Store sends a room's concurrent Enters in one call; its µs and CPU above are per ENTER): %.1f (each round: %s).\n", median(f.oursUsers), roundList(f.oursUsers))
	}
	// A room lives on one shard, and Redis runs its scripts on one core:
	// the CPU per call is what bounds the biggest room.
	enter, status := b.baseline[0], b.baseline[1]
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
