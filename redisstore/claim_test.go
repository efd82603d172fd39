package redisstore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// TestReleaseOfAnUnansweredClaim: a gate whose claim got no answer
// releases the hold that claim would make. Landed first, the release
// gives the token back; not landed yet, the release voids it, so that
// the claim arriving after it holds nothing. Either way the buyer's next
// claim succeeds at once rather than meeting TOKEN_IN_USE for a lease.
func TestReleaseOfAnUnansweredClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, got := admittedInOneCall(t, waitroom.RoomConfig{}, 1, 1)
	a := got[0]
	k := s.keys(room)
	lateClaim := func(lease string) error {
		_, err := s.do(ctx, "claim", claimScript, []string{k.cfg, k.tok, k.active, k.stats}, a.User, a.Token, lease)
		return err
	}
	unanswered := waitroom.Hold{Room: room, User: a.User, Token: a.Token, Lease: waitroom.NewToken()}

	// Landed, then released.
	require.NoError(t, lateClaim(unanswered.Lease))
	_, err := s.Claim(ctx, room, a.User, a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse)
	require.NoError(t, s.Release(ctx, unanswered))
	hold, err := s.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err, "given back")
	require.NoError(t, s.Release(ctx, hold))

	// Released, then landed.
	unanswered.Lease = waitroom.NewToken()
	require.NoError(t, s.Release(ctx, unanswered))
	require.ErrorIs(t, lateClaim(unanswered.Lease), waitroom.ErrTokenInUse, "the voided claim holds nothing")
	hold, err = s.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, hold))
}
