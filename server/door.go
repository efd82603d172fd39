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
	"net/http"
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

// DefaultVisitorRateLimit is the bound on new visitors per client address
// that the serve command sets by default: 50 a second with a burst of 100,
// so one script makes at most 150 places in its first second (and the
// default queue of 100,000 is not filled from one address in under half an
// hour), while a carrier's NAT with hundreds of shoppers on one address
// still lets them all in within seconds of a drop's opening, each one
// refused told when to try again. The zero value of Config keeps it off.
const DefaultVisitorRateLimit = 50

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

// joinOrigins refuses a join another site's page sent (by Sec-Fetch-Site,
// or by Origin from a browser too old for it): a cross-site form would
// put a visitor of that site's choosing into the shopper's browser, and
// SameSite=Lax does not keep a top-level POST from setting the cookie.
// Clients that are no browser send neither header and pass.
var joinOrigins = http.NewCrossOriginProtection()

func checkJoinOrigin(r *http.Request) error {
	if err := joinOrigins.Check(r); err != nil {
		return fmt.Errorf("%w: %v", errCrossSiteJoin, err)
	}
	return nil
}

// The join challenge: proof of work before a new place. A challenge names
// its kind, the room and the user it is for and when it was issued, under
// the server's MAC; a solution is a nonce such that SHA-256(challenge "."
// nonce) starts with difficulty zero bits. One solution buys one identity
// one place, so a scripted crowd pays CPU per place.
//
// A new visitor's challenge (kind n1) is also how the server issues its
// id: the join adopts the id the challenge names, and only once, so
// nobody joins as an id it merely knows (the entrants export lists them).
// A known user's challenge (c1) only proves work for the user its cookie
// or the user header already says.
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

	challengeForUser       = "c1"
	challengeForNewVisitor = "n1"
)

// newChallenge returns a challenge of kind for user to join room.
func (s *Server) newChallenge(kind, room, user string) string {
	payload := kind + "." + room + "." + base64.RawURLEncoding.EncodeToString([]byte(user)) + "." +
		strconv.FormatInt(s.visitors.now().Unix(), 10) + "." + strconv.Itoa(s.joinDifficulty)
	return payload + "." + s.challengeMAC(payload)
}

// newVisitorChallenge issues a new visitor's id, in a challenge to solve
// before the join adopts it.
func (s *Server) newVisitorChallenge(room string) *challengeRequired {
	return &challengeRequired{s.newChallenge(challengeForNewVisitor, room, visitorPrefix+newVisitorID()), s.joinDifficulty}
}

func (s *Server) challengeMAC(payload string) string {
	m := hmac.New(sha256.New, s.visitors.secret)
	m.Write([]byte(challengeContext))
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// challengeClaims is what a challenge this server issued says.
type challengeClaims struct {
	kind, room, user string
	issued           time.Time
	difficulty       int
}

var errNotAChallenge = waitroom.BadRequest("not a join challenge of this waiting room")

// readChallenge checks a challenge's MAC and shape and returns its claims.
func (s *Server) readChallenge(challenge string) (challengeClaims, error) {
	if len(challenge) > maxChallengeLen {
		return challengeClaims{}, waitroom.BadRequest("malformed join challenge or nonce")
	}
	cut := strings.LastIndexByte(challenge, '.')
	if cut < 0 || !hmac.Equal([]byte(challenge[cut+1:]), []byte(s.challengeMAC(challenge[:cut]))) {
		return challengeClaims{}, errNotAChallenge
	}
	parts := strings.Split(challenge[:cut], ".")
	if len(parts) != 5 || parts[0] != challengeForUser && parts[0] != challengeForNewVisitor {
		return challengeClaims{}, errNotAChallenge
	}
	subject, err := base64.RawURLEncoding.DecodeString(parts[2])
	issued, err2 := strconv.ParseInt(parts[3], 10, 64)
	difficulty, err3 := strconv.Atoi(parts[4])
	if err != nil || err2 != nil || err3 != nil {
		return challengeClaims{}, errNotAChallenge
	}
	return challengeClaims{kind: parts[0], room: parts[1], user: string(subject), issued: time.Unix(issued, 0), difficulty: difficulty}, nil
}

// checkSolution reports whether nonce solves challenge for user joining
// room, with a challenge this server issued, recently, at today's
// difficulty or above.
func (s *Server) checkSolution(room, user, challenge, nonce string) error {
	if len(nonce) == 0 || len(nonce) > maxNonceLen {
		return waitroom.BadRequest("malformed join challenge or nonce")
	}
	if _, err := strconv.ParseUint(nonce, 10, 64); err != nil {
		return waitroom.BadRequest("the nonce must be a decimal number")
	}
	c, err := s.readChallenge(challenge)
	switch {
	case err != nil:
		return err
	case c.room != room || c.user != user:
		return waitroom.BadRequest("the join challenge is for another room or user")
	case s.visitors.now().Sub(c.issued) > challengeTTL, c.difficulty < s.joinDifficulty:
		return errors.Join(errChallengeRequired, fmt.Errorf("stale challenge"))
	}
	sum := sha256.Sum256([]byte(challenge + "." + nonce))
	if leadingZeroBits(sum[:]) < c.difficulty {
		return waitroom.BadRequest("the nonce does not solve the join challenge")
	}
	return nil
}

// spentChallengeLimit lets one join per new visitor's challenge through
// while the challenge could still be solved (its TTL, and the clock skew
// an issue time may have): spent, it is refused until it is stale anyway.
var spentChallengeLimit = waitroom.Limit{Rate: 1 / (challengeTTL + cookieClockSkew).Seconds(), Burst: 1}

// adoptVisitor returns the id a new visitor joins room as: the one the
// server issued in the challenge the visitor solved, once, and never an
// id that holds a place already. Anything else is refused with a fresh
// challenge (a replay, a stale one) or as a bad request (forged, another
// room's, not a new visitor's).
func (s *Server) adoptVisitor(ctx context.Context, room, challenge, nonce string) (string, error) {
	if challenge == "" && nonce == "" {
		return "", s.newVisitorChallenge(room)
	}
	c, err := s.readChallenge(challenge)
	if err != nil {
		return "", err
	}
	id, ok := visitorID(c.user)
	if c.kind != challengeForNewVisitor || !ok || !validVisitorID(id) {
		return "", waitroom.BadRequest("the join challenge is not a new visitor's")
	}
	if err := s.checkSolution(room, c.user, challenge, nonce); err != nil {
		if errors.Is(err, errChallengeRequired) {
			return "", s.newVisitorChallenge(room)
		}
		return "", err
	}
	// Spent once, across the instances on a shared limiter. Without an
	// answer from the limiter the place check below still holds.
	spent, _, err := s.limiter.Allow(ctx, "join-challenge:"+id, spentChallengeLimit)
	if err != nil {
		s.log.DebugContext(ctx, "limiter failed; a join challenge is checked by its place alone", "err", err)
	}
	if err == nil && !spent {
		return "", s.newVisitorChallenge(room)
	}
	switch _, err := s.store.Status(ctx, room, c.user); {
	case err == nil:
		// The id has a place, so its challenge was spent already.
		return "", s.newVisitorChallenge(room)
	case !errors.Is(err, waitroom.ErrNotInQueue):
		return "", err
	}
	return id, nil
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
