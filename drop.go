package waitroom

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// PrequeueOrder is how a scheduled room places the users who came before
// its opening.
type PrequeueOrder string

const (
	// PrequeueRandom draws their places once, at the opening, with a
	// committed seed (the default).
	PrequeueRandom PrequeueOrder = "random"
	// PrequeueFIFO places them in arrival order.
	PrequeueFIFO PrequeueOrder = "fifo"
)

// DrawState is how far a scheduled room's draw has come.
type DrawState string

const (
	// DrawPending: the opening has not been drawn yet; the commitment is
	// published, the seed is secret.
	DrawPending DrawState = "pending"
	// DrawDone: the early arrivals have their places and the seed is
	// revealed.
	DrawDone DrawState = "done"
)

// Draw is the public record of a scheduled room's opening: a commitment to
// the seed before it, the seed after it, so anyone can check the places.
type Draw struct {
	Order   PrequeueOrder
	OpensAt time.Time
	State   DrawState
	// Commitment is hex SHA-256 of the seed, published before the draw.
	Commitment string
	// Seed is the hex seed, revealed once the draw is done.
	Seed string
	// Entrants is how many early arrivals were placed; DrawnAt and Took
	// say when and how long the placing took. All set once done.
	Entrants int64
	DrawnAt  time.Time
	Took     time.Duration
}

// Entrant is one early arrival and the place the draw gave it.
type Entrant struct {
	User  string `json:"user"`
	Place int64  `json:"place"`
}

// SeedBytes is the size of a draw's seed.
const SeedBytes = 32

// NewSeed returns a fresh draw seed from crypto/rand, hex.
func NewSeed() string {
	var b [SeedBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// Commitment is what a room publishes before its draw: hex SHA-256 of the
// seed's bytes.
func Commitment(seedHex string) (string, error) {
	seed, err := decodeSeed(seedHex)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:]), nil
}

func decodeSeed(seedHex string) ([]byte, error) {
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) != SeedBytes {
		return nil, BadRequest(fmt.Sprintf("a draw seed is %d bytes in hex", SeedBytes))
	}
	return seed, nil
}

// DrawValue is a user's value in a draw: HMAC-SHA256 keyed by the seed's
// bytes, over the user id. Places go by ascending value.
func DrawValue(seed []byte, user string) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(user))
	return m.Sum(nil)
}

// DrawPlaces orders users as a draw does: random by ascending DrawValue
// under seedHex, or fifo as given (arrival order). The i-th user returned
// has place i+1. Equal values (never seen with SHA-256) fall back to the
// user id, so the order is total.
func DrawPlaces(order PrequeueOrder, seedHex string, users []string) ([]string, error) {
	out := slices.Clone(users)
	if order == PrequeueFIFO {
		return out, nil
	}
	seed, err := decodeSeed(seedHex)
	if err != nil {
		return nil, err
	}
	values := make(map[string][]byte, len(users))
	for _, u := range users {
		values[u] = DrawValue(seed, u)
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := bytes.Compare(values[a], values[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return out, nil
}

// DrawDifference is one entrant whose recorded place is not the one the
// seed gives.
type DrawDifference struct {
	User     string `json:"user"`
	Recorded int64  `json:"recorded"`
	Expected int64  `json:"expected"`
}

// VerifyDraw recomputes a random draw from its revealed seed and the
// exported entrants and returns every entrant whose recorded place
// differs, and whether the seed matches the commitment (when one is
// given).
func VerifyDraw(seedHex, commitment string, entrants []Entrant) ([]DrawDifference, error) {
	if commitment != "" {
		got, err := Commitment(seedHex)
		if err != nil {
			return nil, err
		}
		if got != commitment {
			return nil, BadRequest("the seed does not match the commitment published before the draw")
		}
	}
	users := make([]string, len(entrants))
	recorded := make(map[string]int64, len(entrants))
	for i, e := range entrants {
		// A list that was edited or cut short cannot be judged place by
		// place: say what is wrong with it instead.
		if !ValidUserID(e.User) {
			return nil, BadRequest(fmt.Sprintf("entrant %d: %q is not a user id", i+1, e.User))
		}
		if _, twice := recorded[e.User]; twice {
			return nil, BadRequest(fmt.Sprintf("entrant %d: %s is listed twice", i+1, e.User))
		}
		users[i] = e.User
		recorded[e.User] = e.Place
	}
	order, err := DrawPlaces(PrequeueRandom, seedHex, users)
	if err != nil {
		return nil, err
	}
	var diffs []DrawDifference
	for i, u := range order {
		if want := int64(i + 1); recorded[u] != want {
			diffs = append(diffs, DrawDifference{User: u, Recorded: recorded[u], Expected: want})
		}
	}
	return diffs, nil
}
