package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

// rateLimited is a RATE_LIMITED refusal with the wait its Retry-After says.
type rateLimited struct{ wait time.Duration }

func (e *rateLimited) Error() string             { return errRateLimited.Error() }
func (e *rateLimited) RetryAfter() time.Duration { return e.wait }
func (e *rateLimited) Is(target error) bool      { return target == errRateLimited }
func (e *rateLimited) As(target any) bool {
	if p, ok := target.(**waitroom.Error); ok {
		*p = errRateLimited
		return true
	}
	return false
}

// limitBurst is the burst allowed at rate: two seconds' worth (at least 1),
// so that a page's join, poll and order in quick succession pass.
func limitBurst(rate float64) int {
	return max(1, int(math.Ceil(2*rate)))
}

// allow counts a request against limit under key; a zero limit is off. A
// limiter that fails lets the request through: the limit guards the store,
// and the request's own store call will tell whether the store is there.
func (s *Server) allow(ctx context.Context, key string, limit waitroom.Limit) error {
	if limit.Rate <= 0 {
		return nil
	}
	// In process, or a LocalShare that bounds its shared calls like a
	// store call (New).
	ok, wait, err := s.limiter.Allow(ctx, key, limit)
	switch {
	case err != nil:
		s.log.DebugContext(ctx, "rate limiter failed; letting the request through", "key", key, "err", err)
		return nil
	case !ok:
		return &rateLimited{wait: wait}
	}
	return nil
}

// The join challenge: proof of work before a new place. A challenge names
// the room and the user it is for and when it was issued, under the
// server's MAC; a solution is a nonce such that SHA-256(challenge "."
// nonce) starts with difficulty zero bits. One solution buys one identity
// one place, so a scripted crowd pays CPU per place.
const (
	// DefaultJoinDifficulty is what --join-challenge=on asks: about 2^14
	// hashes, a few seconds on a slow phone (BENCHMARKS.md).
	DefaultJoinDifficulty = 14
	// MaxJoinDifficulty bounds the setting: every bit doubles the work.
	MaxJoinDifficulty = 28
	challengeTTL      = 10 * time.Minute
	challengeContext  = "waitroom join challenge v1\x00"
	maxChallengeLen   = 400
	maxNonceLen       = 20
)

// newChallenge returns a challenge for user to join room.
func (s *Server) newChallenge(room, user string) string {
	payload := "c1." + room + "." + base64.RawURLEncoding.EncodeToString([]byte(user)) + "." +
		strconv.FormatInt(s.visitors.now().Unix(), 10) + "." + strconv.Itoa(s.joinDifficulty)
	return payload + "." + s.challengeMAC(payload)
}

func (s *Server) challengeMAC(payload string) string {
	m := hmac.New(sha256.New, s.visitors.secret)
	m.Write([]byte(challengeContext))
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkSolution reports whether nonce solves challenge for user joining
// room, with a challenge this server issued, recently, at today's
// difficulty or above.
func (s *Server) checkSolution(room, user, challenge, nonce string) error {
	if len(challenge) > maxChallengeLen || len(nonce) == 0 || len(nonce) > maxNonceLen {
		return waitroom.BadRequest("malformed join challenge or nonce")
	}
	if _, err := strconv.ParseUint(nonce, 10, 64); err != nil {
		return waitroom.BadRequest("the nonce must be a decimal number")
	}
	cut := strings.LastIndexByte(challenge, '.')
	if cut < 0 || !hmac.Equal([]byte(challenge[cut+1:]), []byte(s.challengeMAC(challenge[:cut]))) {
		return waitroom.BadRequest("not a join challenge of this waiting room")
	}
	parts := strings.Split(challenge[:cut], ".")
	if len(parts) != 5 || parts[0] != "c1" {
		return waitroom.BadRequest("not a join challenge of this waiting room")
	}
	subject, err := base64.RawURLEncoding.DecodeString(parts[2])
	issued, err2 := strconv.ParseInt(parts[3], 10, 64)
	difficulty, err3 := strconv.Atoi(parts[4])
	switch {
	case err != nil || err2 != nil || err3 != nil:
		return waitroom.BadRequest("not a join challenge of this waiting room")
	case parts[1] != room || string(subject) != user:
		return waitroom.BadRequest("the join challenge is for another room or user")
	case s.visitors.now().Sub(time.Unix(issued, 0)) > challengeTTL, difficulty < s.joinDifficulty:
		return errors.Join(errChallengeRequired, fmt.Errorf("stale challenge"))
	}
	sum := sha256.Sum256([]byte(challenge + "." + nonce))
	if leadingZeroBits(sum[:]) < difficulty {
		return waitroom.BadRequest("the nonce does not solve the join challenge")
	}
	return nil
}

func leadingZeroBits(b []byte) int {
	n := 0
	for _, c := range b {
		if c != 0 {
			return n + bits.LeadingZeros8(c)
		}
		n += 8
	}
	return n
}

// challengeRequired is a 428 refusal that carries a fresh challenge.
type challengeRequired struct {
	challenge  string
	difficulty int
}

func (e *challengeRequired) Error() string        { return errChallengeRequired.Error() }
func (e *challengeRequired) Is(target error) bool { return target == errChallengeRequired }
func (e *challengeRequired) As(target any) bool {
	if p, ok := target.(**waitroom.Error); ok {
		*p = errChallengeRequired
		return true
	}
	return false
}
