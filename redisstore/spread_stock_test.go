package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// spreadPromises: a room spread over 3 shards of a 3-primary Cluster
// keeps its stock and one order per buyer over its sub-shards, with two
// instances (s and peer, one prefix) racing at one signal and admission
// ticks killed part way (TestSpreadRoom runs it).
func spreadPromises(t *testing.T, s, peer *Store) {
	stores := []*Store{s, peer}
	ctx := t.Context()

	// The same buyer's order completed twice at one signal (the gate and
	// its retry, on two instances) while the buyer enters and polls:
	// exactly one Complete spends the token, the other finds it spent;
	// every entry and poll answers the buyer's token before the spend or
	// ALREADY_ORDERED after it, and only ALREADY_ORDERED from then on.
	t.Run("OneOrderCompletedTwiceAtOnce", func(t *testing.T) {
		room := testenv.Unique("spread-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, OneOrderPerUser: true})
		require.NoError(t, err)
		_, err = s.Enter(ctx, room, "buyer")
		require.NoError(t, err)
		a := admitN(t, s, room, 1)[0]
		hold, err := peer.Claim(ctx, room, a.User, a.Token)
		require.NoError(t, err)
		require.True(t, hold.OneOrderPerUser)

		outcomes := atOnce(20, func(i int) string {
			st := stores[i%2]
			var got waitroom.Status
			var err error
			switch {
			case i < 2:
				return codeOf(st.Complete(ctx, hold))
			case i%2 == 0:
				got, err = st.Enter(ctx, room, "buyer")
			default:
				got, err = st.Status(ctx, room, "buyer")
			}
			if err != nil {
				return "poll " + codeOf(err)
			}
			require.Equal(t, a.Token, got.Token, "before the spend: the buyer's own token")
			return "poll admitted"
		})
		require.ElementsMatch(t, []string{"ok", waitroom.ErrTokenNotFound.Code}, outcomes[:2], "one Complete spends the token")
		for _, o := range outcomes[2:] {
			require.Contains(t, []string{"poll admitted", "poll " + waitroom.ErrAlreadyOrdered.Code}, o)
		}
		after := atOnce(20, func(i int) string {
			if i%2 == 0 {
				_, err := stores[i%4/2].Enter(ctx, room, "buyer")
				return codeOf(err)
			}
			_, err := stores[i%4/2].Status(ctx, room, "buyer")
			return codeOf(err)
		})
		require.Equal(t, map[string]int{waitroom.ErrAlreadyOrdered.Code: 20}, tally(after))
		st := testenv.Stats(t, s, room)
		require.Equal(t, int64(1), st.Completed)
		require.Equal(t, int64(1), st.Sold)
		require.Equal(t, int64(1), st.Entered, "the buyer's entries took no place")

		// The buyer is remembered on its own sub-shard only: the one its
		// calls go to.
		l, err := s.layout(ctx, room)
		require.NoError(t, err)
		for i, k := range l.subs {
			in, err := s.client.SIsMember(ctx, k.buyers, "buyer").Result()
			require.NoError(t, err)
			require.Equal(t, i == l.of("buyer"), in, "sub-shard %d", i)
		}
		// A room that remembers a buyer keeps its shards.
		_, err = waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error { c.Shards = 2; return nil })
		require.ErrorIs(t, err, waitroom.ErrShardsNotEmpty)
	})

	// Stock 7, 40 users spread over the sub-shards, two admitters ticking
	// at one signal, a tick killed after sealing and one killed after
	// popping a single sub-shard, no-shows whose units come back and go to
	// users on other sub-shards; then every user tries to buy at one
	// signal: exactly 7 orders, the units sold over the sub-shards add up
	// to 7, reservations and sales never above 7 at any step, and everyone
	// still queued is told sold_out.
	t.Run("StockAcrossSubShards", func(t *testing.T) {
		const stock, users, noShows = 7, 40, 2
		room := testenv.Unique("spread-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, Stock: stock,
			TokenTTL: 30 * time.Second, FirstUseWithin: 3 * time.Second})
		require.NoError(t, err)
		name := func(i int) string { return fmt.Sprintf("s%02d", i) }
		errs := atOnce(users, func(i int) error {
			_, err := stores[i%2].Enter(ctx, room, name(i))
			return err
		})
		require.Equal(t, map[string]int{"ok": users}, tally(codes(errs)))
		l, err := s.layout(ctx, room)
		require.NoError(t, err)
		limit := int64(stock)
		within := func() {
			t.Helper()
			st := testenv.Stats(t, s, room)
			require.LessOrEqual(t, st.Active+st.Sold, limit, "reserved %d + sold %d", st.Active, st.Sold)
		}

		// Killed after sealing: nothing issued, nothing stranded.
		abandonedTick(ctx, t, s, room, l, -1)
		// Killed after popping sub-shard 0 only: its tokens count.
		admitted := abandonedTick(ctx, t, s, room, l, 0)
		require.NotEmpty(t, admitted)
		within()

		tick := func() {
			t.Helper()
			advance(t, s, 50*time.Millisecond)
			for _, got := range atOnce(2, func(i int) []waitroom.Admission {
				a, err := stores[i].Admit(ctx, room)
				require.NoError(t, err)
				return a
			}) {
				admitted = append(admitted, got...)
			}
			within()
		}
		// Two admitters at once (a handover) may each lose a tick to the
		// other's fence: tick until the stock is out, then some more.
		ticks := func(want int) {
			t.Helper()
			for i := 0; len(admitted) < want && i < 200; i++ {
				tick()
			}
			for range 5 {
				tick()
			}
		}
		ticks(stock)
		require.Len(t, admitted, stock, "the stock's tokens, no more")

		// The first noShows never come: their units go to the next in line.
		byUser := map[string]waitroom.Admission{}
		for _, a := range admitted {
			_, twice := byUser[a.User]
			require.False(t, twice, "%s admitted twice", a.User)
			byUser[a.User] = a
		}
		for _, a := range admitted[noShows:] {
			_, err := stores[0].Status(ctx, room, a.User) // told
			require.NoError(t, err)
			_, err = stores[1].Status(ctx, room, a.User) // confirmed
			require.NoError(t, err)
		}
		gone := admitted[:noShows]
		advance(t, s, 3200*time.Millisecond)
		before := len(admitted)
		ticks(stock + noShows)
		require.Len(t, admitted, stock+noShows, "the no-shows' units were given again")
		shards := map[int]bool{}
		for _, a := range admitted[before:] {
			_, twice := byUser[a.User]
			require.False(t, twice, "%s admitted twice", a.User)
			byUser[a.User] = a
		}
		for _, a := range admitted {
			shards[l.of(a.User)] = true
		}
		require.Len(t, shards, 3, "tokens on every sub-shard")

		// Every holder, no-shows included, buys at one signal (claim on
		// one instance, complete on the other).
		outcomes := atOnce(len(admitted), func(i int) string {
			a := admitted[i]
			hold, err := stores[i%2].Claim(ctx, room, a.User, a.Token)
			if err != nil {
				return "claim " + codeOf(err)
			}
			return "buy " + codeOf(stores[(i+1)%2].Complete(ctx, hold))
		})
		require.Equal(t, map[string]int{"buy ok": stock, "claim " + waitroom.ErrTokenNotFound.Code: noShows}, tally(outcomes))
		// Then everyone else at one signal: told sold_out on every
		// sub-shard, by either instance.
		var rest []string
		for i := range users {
			if _, ok := byUser[name(i)]; !ok {
				rest = append(rest, name(i))
			}
		}
		told := atOnce(len(rest)+len(gone), func(i int) string {
			who := ""
			if i < len(rest) {
				who = rest[i]
			} else {
				who = gone[i-len(rest)].User
			}
			got, err := stores[i%2].Status(ctx, room, who)
			if err != nil {
				return codeOf(err)
			}
			return string(got.State)
		})
		require.Equal(t, map[string]int{string(waitroom.StateSoldOut): users - stock - noShows,
			waitroom.ErrNotInQueue.Code: noShows}, tally(told), "the no-shows' tokens are gone")

		// Conserved: the sub-shards' sales add up to the stock.
		var sold int64
		for _, k := range l.subs {
			v, err := s.client.HGet(ctx, k.stats, "sold").Result()
			if err == nil {
				n, _ := strconv.ParseInt(v, 10, 64)
				sold += n
			}
		}
		require.Equal(t, int64(stock), sold)
		st := testenv.Stats(t, s, room)
		require.Equal(t, int64(stock), st.Sold)
		require.Equal(t, int64(stock), st.Completed)
		require.Equal(t, int64(noShows), st.NoShows)
		require.Equal(t, int64(stock+noShows), st.Admitted)
		require.Zero(t, st.Active)
		for _, st := range stores {
			_, err := st.Enter(ctx, room, "latecomer")
			require.ErrorIs(t, err, waitroom.ErrSoldOut)
		}
		tick()
		require.Len(t, admitted, stock+noShows, "sold out: nobody more")
		// From the tick on, a refused entry takes no ticket (no gap).
		seq := func() int64 {
			n, err := s.client.Get(ctx, s.keys(room).seq).Int64()
			require.NoError(t, err)
			return n
		}
		was := seq()
		for i, st := range stores {
			_, err := st.Enter(ctx, room, fmt.Sprintf("late%d", i))
			require.ErrorIs(t, err, waitroom.ErrSoldOut)
		}
		require.Equal(t, was, seq(), "no ticket for a sold-out room")

		// A room that sold keeps its shards; a restock reopens it.
		_, err = waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error { c.Shards = 2; return nil })
		require.ErrorIs(t, err, waitroom.ErrShardsNotEmpty)
		_, err = waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error { c.Stock = stock + 2; return nil })
		require.NoError(t, err)
		limit = stock + 2
		ticks(stock + noShows + 2)
		require.Len(t, admitted, stock+noShows+2, "the restock's units")
	})
}

// spreadLostSalePush: an instance killed between a Complete and its
// push to the other sub-shards: the sale is made and counted by the
// admission at once (nobody more is admitted), a user on another
// sub-shard is told no units are left and sold_out from the next tick
// on, which tells every sub-shard the units sold.
func spreadLostSalePush(t *testing.T, s *Store) {
	ctx := t.Context()
	room := testenv.Unique("spread-")
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, Stock: 1})
	require.NoError(t, err)
	l, err := s.layout(ctx, room)
	require.NoError(t, err)
	buyer, other := "p0", ""
	for i := 1; other == ""; i++ {
		if u := fmt.Sprintf("p%d", i); l.of(u) != l.of(buyer) {
			other = u
		}
	}
	for _, u := range []string{buyer, other} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	a := admitN(t, s, room, 1)[0]
	require.Equal(t, buyer, a.User)
	hold, err := s.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	// The Complete's own call, and no push after it.
	r, err := s.doCall(ctx, "complete", l.subs[l.of(buyer)].complete, a.User, a.Token, hold.Units)
	require.NoError(t, err)
	require.Equal(t, "OK", r.code())

	st, err := s.Status(ctx, room, other)
	require.NoError(t, err)
	require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 1, FewLeft: true}, st,
		"no unit left to reserve, sold out not known yet")
	advance(t, s, 100*time.Millisecond)
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Empty(t, got, "the sale is counted by the admission at once")
	st, err = s.Status(ctx, room, other)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateSoldOut, st.State, "the tick told every sub-shard")
}

// abandonedTick is an admission tick of a spread room killed part way:
// begun and every sub-shard sealed and read, then, when popOn is a
// sub-shard, up to two users at its head admitted there within the stock
// left (as the tick would), and nothing more (no other pop, no commit). It
// returns whom it admitted.
func abandonedTick(ctx context.Context, t *testing.T, s *Store, room string, l *spreadLayout, popOn int) []waitroom.Admission {
	t.Helper()
	k := s.keys(room)
	cfg, err := s.RoomConfig(ctx, room)
	require.NoError(t, err)
	advance(t, s, 100*time.Millisecond)
	r, err := s.do(ctx, "admit", spreadBeginScript, []string{k.cfg, k.bucket, k.seq, k.inflight, k.fence}, l.id)
	require.NoError(t, err)
	fence, _ := r.int(1)
	stable, _ := r.int(4)
	heads := make([]*subHead, l.shards)
	for i, sk := range l.subs {
		r, err := s.spreadCall(ctx, "admit", spreadHeadScript, sk.headKeys(),
			l.id, fence, cfg.TickQuota(), stable, 0)
		require.NoError(t, err)
		h, ok := readHead(r)
		require.True(t, ok)
		heads[i] = h
	}
	if popOn < 0 {
		return nil
	}
	var sold, live int64
	for _, h := range heads {
		sold, live = sold+h.sold, live+h.live
	}
	h := heads[popOn]
	n := min(int64(len(h.users)), 2, cfg.TokensLeft(sold, live))
	if n == 0 {
		return nil
	}
	cutoff := h.tickets[n-1]
	sk := l.subs[popOn]
	args := []any{l.id, fence, cutoff, cutoff, n, 0, popOn, 0, "0"}
	for range n {
		args = append(args, waitroom.NewToken())
	}
	r, err = s.spreadCall(ctx, "admit", spreadPopScript, sk.popKeys(), args...)
	require.NoError(t, err)
	var out []waitroom.Admission
	for j := 4; j < len(r); j += 3 { // user, ticket, notice
		u, _ := r.str(j)
		out = append(out, waitroom.Admission{User: u, Token: args[spreadPopTokensAt+(j-4)/3].(string)})
	}
	return out
}

// codeOf is err's code, "ok" for nil.
func codeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return waitroom.ErrorCode(err)
}

func codes(errs []error) []string {
	out := make([]string, len(errs))
	for i, err := range errs {
		out[i] = codeOf(err)
	}
	return out
}

func tally(outcomes []string) map[string]int {
	m := map[string]int{}
	for _, o := range outcomes {
		m[o]++
	}
	return m
}
