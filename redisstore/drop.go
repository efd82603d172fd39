package redisstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/waitroom/waitroom"
)

// The draw of a scheduled room's opening is split so that no script call
// blocks Redis for long, whatever the number of early arrivals:
//
//  1. drawBeginScript takes the draw's lock (one instance draws; another
//     takes over when the lock's lease runs out) and returns the seed;
//  2. the Store reads the early arrivals (pre) in slices of drawReadSlice
//     and orders them in Go (HMAC-SHA256 in Lua would be slow, and Lua has
//     no HMAC);
//  3. drawChunkScript writes drawChunk places at a time: each entrant's
//     place (places) and, unless it left meanwhile, its place in the drawn
//     queue (drawn, scored as q is: place + the second it was seen);
//  4. drawDoneScript publishes the draw in one step: state done, and pre
//     renamed to ent (O(1)).
//
// Until step 4 every status reads the early arrivals as "scheduled" and
// counts all of them ahead of later arrivals, so no answer ever shows a
// half-made order. The places depend only on the seed and the entrants, so
// an instance that takes over a dead drawer's lock writes the same places.

// Slices of the draw: measured so that one call stays far below 50 ms.
const (
	drawReadSlice = 10_000
	drawChunk     = 1_000
	drawLease     = 10 * time.Second // renewed by every slice written
	drawTimeout   = 2 * time.Minute
)

// drawBeginScript takes the draw of a room whose opening has come.
//
// KEYS[1] cfg
// KEYS[2] draw
// KEYS[3] pre
// ARGV[1] owner: this Store's id
// ARGV[2] lease_ms of the lock
// ARGV[3] a fresh seed and ARGV[4] its commitment, kept only if the room
// has no seed yet
//
// Returns one of
//
//	{"DRAW", seed, commitment, order, entrants}  the lock is this owner's:
//	                                    draw; order is the one recorded when
//	                                    the draw began (its first owner's)
//	{"DONE"}                            the draw is done
//	{"BUSY"}                            another owner holds the lock
//	{"NOT_YET"}                         the opening has not come
//	{"NO_DRAW"}                         the room has no opening time
var drawBeginScript = newFunction("draw_begin")

// drawSeedScript gives a scheduled room the seed of its draw and stores
// the commitment to it, unless it has a seed: the commitment is published
// from the moment the room is scheduled.
//
// KEYS[1] draw
// ARGV[1] a fresh seed, ARGV[2] its commitment
//
// Returns "OK".
var drawSeedScript = newFunction("draw_seed")

// drawChunkScript writes one slice of the draw's places.
//
// KEYS[1] draw
// KEYS[2] pre
// KEYS[3] drawn
// KEYS[4] places
// ARGV[1] owner
// ARGV[2] lease_ms: the lock is extended by it, so a live drawer keeps it
// ARGV[3 ..] user, place, user, place, … (at most drawChunk pairs)
//
// Returns "OK", "DONE" (already published: nothing written) or "LOST" (the
// lock is another owner's now: nothing written).
var drawChunkScript = newFunction("draw_chunk")

// drawDoneScript publishes the draw.
//
// KEYS[1] draw
// KEYS[2] pre
// KEYS[3] ent
// ARGV[1] owner
// ARGV[2] took_ms: how long the owner took
// ARGV[3] digest: EntrantsDigest of the entrants in place order
//
// Returns "DONE" (now or before) or "LOST".
var drawDoneScript = newFunction("draw_done")

// drawOpening makes the room's draw, if the opening has come and no other
// instance is making it; it reports whether the draw is done. The draw
// runs to its end whatever the caller's deadline (one Admit is bounded by
// the store timeout, a large draw takes longer), within drawTimeout: cut
// short, the next tick would only start it again.
func (s *Store) drawOpening(ctx context.Context, room string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drawTimeout)
	defer cancel()
	began := time.Now()
	k := s.keys(room)
	d, code, err := s.beginDraw(ctx, room)
	switch {
	case err != nil:
		return false, err
	case code == "DONE":
		return true, nil
	case code != "DRAW":
		return false, nil
	}

	// The snapshot: nobody joins pre after the opening; leavers only turn
	// negative, so reading by index sees every entrant once.
	type arrival struct {
		user string
		seq  float64
	}
	arrivals := make([]arrival, 0, d.n)
	for from := int64(0); from < d.n; from += drawReadSlice {
		zs, err := s.client.ZRangeWithScores(ctx, k.pre, from, from+drawReadSlice-1).Result()
		if err != nil {
			return false, s.fail("draw", err)
		}
		for _, z := range zs {
			arrivals = append(arrivals, arrival{z.Member.(string), math.Abs(z.Score)})
		}
	}
	slices.SortFunc(arrivals, func(a, b arrival) int { return int(a.seq - b.seq) })
	users := make([]string, len(arrivals))
	for i, a := range arrivals {
		users[i] = a.user
	}
	placed, err := waitroom.DrawPlaces(d.order, d.seed, users)
	if err != nil {
		return false, fmt.Errorf("redisstore draw of %q: %w", room, err)
	}

	// On one connection to the room's primary, so that one WAIT after
	// the last chunk covers every place: none is told before the draw is
	// published, and by then a replica holds them all, as Admit's tokens.
	primary := s.onPrimary(ctx, k.cfg)
	defer primary.close()
	for from := 0; from < len(placed); from += drawChunk {
		args := []any{s.id, drawLease.Milliseconds()}
		for i := from; i < min(from+drawChunk, len(placed)); i++ {
			args = append(args, placed[i], i+1)
		}
		res, err := primary.call(ctx, drawChunkScript, []string{k.draw, k.pre, k.drawn, k.places}, args...)
		r, err := s.reply(ctx, "draw", res, err)
		if err != nil {
			return false, err
		}
		switch r.code() {
		case "OK":
		case "DONE":
			return true, nil
		case "LOST":
			return false, nil
		default:
			return false, s.unexpected(ctx, "draw", r)
		}
	}
	primary.waitReplica(ctx, room, s.watch(room), "drawn places", len(placed))
	return s.publishDraw(ctx, room, d, placed, began)
}

// drawStart is a draw whose lock this Store took: its seed (checked
// against the published commitment), the order recorded when the draw
// began, and the entrants in the room's own pre.
type drawStart struct {
	seed  string
	order waitroom.PrequeueOrder
	n     int64
}

// beginDraw runs drawBeginScript for room; code is its reply's ("DRAW",
// "DONE", "BUSY", "NOT_YET", "NO_DRAW"), the draw set when it is "DRAW".
// A seed replaced after its commitment was published draws nothing:
// ErrDrawSeedMismatch.
func (s *Store) beginDraw(ctx context.Context, room string) (drawStart, string, error) {
	k := s.keys(room)
	seed, commitment := newSeed()
	r, err := s.do(ctx, "draw", drawBeginScript, []string{k.cfg, k.draw, k.pre},
		s.id, drawLease.Milliseconds(), seed, commitment)
	if err != nil {
		return drawStart{}, "", err
	}
	switch r.code() {
	case "DRAW":
	case "DONE", "BUSY", "NOT_YET", "NO_DRAW":
		return drawStart{}, r.code(), nil
	default:
		return drawStart{}, "", s.unexpected(ctx, "draw", r)
	}
	seed, ok1 := r.str(1)
	commitment, ok2 := r.str(2)
	order, ok3 := r.str(3)
	n, ok4 := r.int(4)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return drawStart{}, "", s.unexpected(ctx, "draw", r)
	}
	if commitment, err = s.keptCommitment(ctx, room, seed, commitment); err != nil {
		return drawStart{}, "", err
	}
	if err := waitroom.CheckSeed(seed, commitment); err != nil {
		return drawStart{}, "", fmt.Errorf("redisstore draw of %q: %w", room, err)
	}
	return drawStart{seed, waitroom.RoomConfig{PrequeueOrder: waitroom.PrequeueOrder(order)}.Order(), n}, "DRAW", nil
}

// publishDraw publishes the draw d whose places (in place order) are
// written, and reports whether it is published: by this Store, or by
// another that took the lock over (false: LOST).
func (s *Store) publishDraw(ctx context.Context, room string, d drawStart, placed []string, began time.Time, logAttrs ...any) (bool, error) {
	k := s.keys(room)
	digest, err := waitroom.DrawnDigest(d.seed, placed)
	if err != nil {
		return false, fmt.Errorf("redisstore draw of %q: %w", room, err)
	}
	r, err := s.do(ctx, "draw", drawDoneScript, []string{k.draw, k.pre, k.ent}, s.id, time.Since(began).Milliseconds(), digest)
	if err != nil {
		return false, err
	}
	switch r.code() {
	case "DONE":
		s.log.InfoContext(ctx, "redisstore: the opening is drawn",
			append([]any{"room", room, "order", d.order, "entrants", len(placed), "took", time.Since(began)}, logAttrs...)...)
		return true, nil
	case "LOST":
		return false, nil
	default:
		return false, s.unexpected(ctx, "draw", r)
	}
}

// drawInfoScript reads a room's draw record, giving a scheduled room its
// seed if it has none yet (a room scheduled before seeds were made at
// scheduling); otherwise it only reads.
//
// KEYS[1] cfg
// KEYS[2] draw
// ARGV[1] a fresh seed, ARGV[2] its commitment
//
// Returns {"OK", state, seed, commitment, order, opens_at_ms, opens_in_ms,
// entrants, digest, drawn_at_ms, took_ms}, {"NO_DRAW"} or
// {"ROOM_NOT_FOUND"}. state is "" before the draw began; order is the
// draw's recorded one once it began, the setting's before.
var drawInfoScript = newFunction("draw_info")

// newSeed is a fresh seed and its commitment.
func newSeed() (seed, commitment string) {
	seed = waitroom.NewSeed()
	commitment, _ = waitroom.Commitment(seed) // a fresh seed is well formed
	return seed, commitment
}

// keptCommitment is the stored commitment, or, for a room seeded before
// commitments were stored (commitment ""), the one its seed gives, stored
// now once and for all.
func (s *Store) keptCommitment(ctx context.Context, room, seed, commitment string) (string, error) {
	if commitment != "" {
		return commitment, nil
	}
	c, err := waitroom.Commitment(seed)
	if err != nil {
		return "", fmt.Errorf("redisstore draw of %q: %w", room, waitroom.ErrDrawSeedMismatch)
	}
	k := s.keys(room).draw
	if err := s.client.HSetNX(ctx, k, "commitment", c).Err(); err != nil {
		return "", s.fail("draw", err)
	}
	kept, err := s.client.HGet(ctx, k, "commitment").Result()
	if err != nil {
		return "", s.fail("draw", err)
	}
	return kept, nil
}

// Draw returns the room's draw record: the commitment to its seed before
// the draw, the seed and figures after it. A seed that no longer matches
// the stored commitment is ErrDrawSeedMismatch, never a new commitment.
func (s *Store) Draw(ctx context.Context, room string) (waitroom.Draw, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Draw{}, err
	}
	k := s.keys(room)
	seed, commitment := newSeed()
	r, err := s.do(ctx, "draw", drawInfoScript, []string{k.cfg, k.draw}, seed, commitment)
	if err != nil {
		return waitroom.Draw{}, err
	}
	if r.code() == "NO_DRAW" {
		return waitroom.Draw{}, waitroom.ErrNoDraw
	}
	if r.code() != "OK" {
		return waitroom.Draw{}, s.unexpected(ctx, "draw", r)
	}
	var f [10]string
	var ok bool
	for i := range f {
		if f[i], ok = r.str(i + 1); !ok {
			return waitroom.Draw{}, s.unexpected(ctx, "draw", r)
		}
	}
	state, seed, order := f[0], f[1], f[3]
	if commitment, err = s.keptCommitment(ctx, room, seed, f[2]); err != nil {
		return waitroom.Draw{}, err
	}
	if err := waitroom.CheckSeed(seed, commitment); err != nil {
		return waitroom.Draw{}, fmt.Errorf("redisstore draw of %q: %w", room, err)
	}
	num := func(v string) int64 { n, _ := strconv.ParseInt(v, 10, 64); return n }
	cfg := waitroom.RoomConfig{PrequeueOrder: waitroom.PrequeueOrder(order)}
	d := waitroom.Draw{Order: cfg.Order(), State: waitroom.DrawPending, Commitment: commitment,
		OpensIn: time.Duration(num(f[5])) * time.Millisecond}
	if ms := num(f[4]); ms > 0 {
		d.OpensAt = time.UnixMilli(ms).UTC()
	}
	if state == "done" {
		d.State, d.Seed, d.OpensIn = waitroom.DrawDone, seed, 0
		d.Entrants, d.Digest = num(f[6]), f[7]
		if ms := num(f[8]); ms > 0 {
			d.DrawnAt = time.UnixMilli(ms).UTC()
		}
		d.Took = time.Duration(num(f[9])) * time.Millisecond
	}
	return d, nil
}

// Entrants returns the draw's entrants in place order, read in slices.
func (s *Store) Entrants(ctx context.Context, room string) ([]waitroom.Entrant, error) {
	d, err := s.Draw(ctx, room)
	if err != nil {
		return nil, err
	}
	if d.State != waitroom.DrawDone {
		return nil, waitroom.ErrDrawPending
	}
	k := s.keys(room)
	var out []waitroom.Entrant
	for from := int64(0); ; from += drawReadSlice {
		users, err := s.client.ZRange(ctx, k.ent, from, from+drawReadSlice-1).Result()
		if err != nil {
			return nil, s.fail("entrants", err)
		}
		if len(users) == 0 {
			break
		}
		places, err := s.client.HMGet(ctx, k.places, users...).Result()
		if err != nil {
			return nil, s.fail("entrants", err)
		}
		for i, u := range users {
			p, _ := places[i].(string)
			place, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				return nil, s.unexpected(ctx, "entrants", places[i])
			}
			out = append(out, waitroom.Entrant{User: u, Place: place})
		}
	}
	slices.SortFunc(out, func(a, b waitroom.Entrant) int { return int(a.Place - b.Place) })
	return out, nil
}
