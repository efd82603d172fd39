package waitroom

import (
	"fmt"
	"time"
)

// Pass lets its holder into a room without queueing: staff and invited
// buyers get an entry token at once, counted against MaxActive and the
// stock like any other; in a room that is InviteOnly a pass is the only
// way in. A pass is good for Uses entries by any users (each using one),
// until ExpiresAt or until revoked.
type Pass struct {
	ID        string // NewToken's shape: 128 random bits
	Uses      int    // as minted, 1..MaxPassUses
	Left      int    // uses left
	ExpiresAt time.Time
	Revoked   bool
}

// Bounds of a pass.
const (
	MaxPassUses     = 100_000
	MaxPassLifetime = 90 * 24 * time.Hour
	// MaxPasses bounds the passes a room keeps (expired ones included,
	// until revoked), so an operator's loop cannot grow the store.
	MaxPasses = 10_000
)

// Validate refuses a pass no store keeps, as a BAD_REQUEST error.
func (p Pass) Validate() error {
	switch {
	case !ValidToken(p.ID):
		return BadRequest("a pass id has NewToken's shape")
	case p.Uses < 1 || p.Uses > MaxPassUses:
		return BadRequest(fmt.Sprintf("a pass has 1..%d uses, got %d", MaxPassUses, p.Uses))
	case p.Left < 0 || p.Left > p.Uses:
		return BadRequest(fmt.Sprintf("a pass has 0..%d uses left, got %d", p.Uses, p.Left))
	case p.ExpiresAt.IsZero():
		return BadRequest("a pass needs an expiry")
	}
	return nil
}
