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
	// OpensIn is the time left before the opening by the store's clock;
	// zero once it has come. A cache of the record may keep a pending one
	// no longer than this: the seed is revealed only after the opening.
	OpensIn time.Duration
	// Commitment is hex SHA-256 of the seed, stored when the room was
	// scheduled and published from then on: it is served as stored, never
	// recomputed from the seed, so a replaced seed cannot change it.
	Commitment string
	// Seed is the hex seed, revealed once the draw is done.
	Seed string
	// Entrants is how many early arrivals were placed and Digest the
	// EntrantsDigest of their draw values in place order, both taken at
	// the draw; DrawnAt and Took say when and how long the placing took.
	// All set once done.
	Entrants int64
	Digest   string
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

// CheckSeed reports whether seedHex is still the seed commitment was
// published for: ErrDrawSeedMismatch when it is not (the seed was replaced
// after the commitment was published), so the store refuses the draw and
// its record instead of answering with a different one.
func CheckSeed(seedHex, commitment string) error {
	got, err := Commitment(seedHex)
	if err != nil || got != commitment {
		return fmt.Errorf("%w (stored commitment %.16s…)", ErrDrawSeedMismatch, commitment)
	}
	return nil
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

// EntrantsDigest is the digest the draw's record carries of its entrant
// list: hex SHA-256 over the entrants' draw values (32 bytes each) in
// place order. It is taken at the draw, so an entrant later removed from
// or added to a published list, or a list renumbered, no longer matches.
func EntrantsDigest(values [][]byte) string {
	h := sha256.New()
	for _, v := range values {
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DrawnDigest is EntrantsDigest of users, placed in this order, under
// seedHex.
func DrawnDigest(seedHex string, users []string) (string, error) {
	seed, err := decodeSeed(seedHex)
	if err != nil {
		return "", err
	}
	values := make([][]byte, len(users))
	for i, u := range users {
		values[i] = DrawValue(seed, u)
	}
	return EntrantsDigest(values), nil
}

// DrawnEntrant is one line of the public verification file: an entrant's
// draw value (hex) and its place, without its user id. A user finds their
// own line by computing DrawValue(seed, their id).
type DrawnEntrant struct {
	Value string `json:"value"`
	Place int64  `json:"place"`
}

// PublicEntrants turns the operator's entrant list into the public one:
// each user id replaced by its draw value under seedHex.
func PublicEntrants(seedHex string, entrants []Entrant) ([]DrawnEntrant, error) {
	seed, err := decodeSeed(seedHex)
	if err != nil {
		return nil, err
	}
	out := make([]DrawnEntrant, len(entrants))
	for i, e := range entrants {
		out[i] = DrawnEntrant{Value: hex.EncodeToString(DrawValue(seed, e.User)), Place: e.Place}
	}
	return out, nil
}

// DrawRecordCheck is what VerifyDraw checks a list of entrants against:
// the revealed record's seed, commitment, entrant count and digest, and
// the commitment a user saved before the opening ("" when none was).
type DrawRecordCheck struct {
	Seed, Commitment string
	Entrants         int64
	Digest           string
	SavedCommitment  string
}

// DrawDifference is one entrant whose recorded place is not the one the
// seed gives.
type DrawDifference struct {
	Value    string `json:"value"`
	Recorded int64  `json:"recorded"`
	Expected int64  `json:"expected"`
}

// VerifyDraw checks a random draw's public entrant list against its
// revealed record and returns every entrant whose place differs from the
// one the seed gives. The seed must match the commitment, the commitment
// the saved one (when given), and the list the record's count and digest
// (so no entrant was removed or added, whatever the renumbering), with
// places 1..N each once; each of these failing is an error.
func VerifyDraw(rec DrawRecordCheck, entrants []DrawnEntrant) ([]DrawDifference, error) {
	if rec.SavedCommitment != "" && rec.SavedCommitment != rec.Commitment {
		return nil, BadRequest(fmt.Sprintf("the record's commitment %s is not the one saved before the opening (%s)", rec.Commitment, rec.SavedCommitment))
	}
	if got, err := Commitment(rec.Seed); err != nil {
		return nil, err
	} else if got != rec.Commitment {
		return nil, BadRequest("the seed does not match the commitment published before the draw")
	}
	if int64(len(entrants)) != rec.Entrants {
		return nil, BadRequest(fmt.Sprintf("the list has %d entrants, the draw's record %d", len(entrants), rec.Entrants))
	}
	// Place order, each place once: the digest is taken in it.
	byPlace := make([][]byte, len(entrants))
	for i, e := range entrants {
		v, err := hex.DecodeString(e.Value)
		if err != nil || len(v) != sha256.Size {
			return nil, BadRequest(fmt.Sprintf("entrant %d: %q is not a draw value", i+1, e.Value))
		}
		if e.Place < 1 || e.Place > int64(len(entrants)) || byPlace[e.Place-1] != nil {
			return nil, BadRequest(fmt.Sprintf("entrant %d: place %d is out of 1..%d or given twice", i+1, e.Place, len(entrants)))
		}
		byPlace[e.Place-1] = v
	}
	if got := EntrantsDigest(byPlace); got != rec.Digest {
		return nil, BadRequest(fmt.Sprintf("the list's digest %s is not the draw's record's %s: entrants were changed after the draw", got, rec.Digest))
	}
	// A random draw places by ascending value.
	drawn := slices.Clone(byPlace)
	slices.SortFunc(drawn, bytes.Compare)
	expected := make(map[string]int64, len(drawn))
	for i, v := range drawn {
		expected[string(v)] = int64(i + 1)
	}
	var diffs []DrawDifference
	for i, v := range byPlace {
		if want := expected[string(v)]; want != int64(i+1) {
			diffs = append(diffs, DrawDifference{Value: hex.EncodeToString(v), Recorded: int64(i + 1), Expected: want})
		}
	}
	return diffs, nil
}
