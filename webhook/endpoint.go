package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/waitroom/waitroom"
)

// Endpoint is a receiver of events: a URL, the secrets its messages are
// signed with, and which rooms' events of which types it wants.
type Endpoint struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Rooms it wants events of; empty: every room.
	Rooms []string `json:"rooms,omitempty"`
	// Events it wants; empty: every type.
	Events []string `json:"events,omitempty"`
	// Secrets sign every message, newest first; a rotated-out one signs
	// until its Until, so the receiver can switch over without a gap.
	Secrets []Secret `json:"secrets"`
	// Static: configured by flag (--webhook-url), not by the admin API.
	Static  bool      `json:"-"`
	Created time.Time `json:"created"`
}

// Secret is one signing secret of an endpoint.
type Secret struct {
	Value string `json:"value"`
	// Until is when a rotated-out secret stops signing; zero: it signs
	// until rotated out.
	Until time.Time `json:"until,omitzero"`
}

// Bounds of an endpoint.
const (
	MaxURLLen    = 2048
	MaxEndpoints = 64
	MaxRooms     = 100
	// MaxSecrets bounds the secrets that sign at once.
	MaxSecrets = 4
	// MaxOverlap bounds how long a rotated-out secret goes on signing.
	MaxOverlap     = 7 * 24 * time.Hour
	DefaultOverlap = 24 * time.Hour
)

// Input errors, answered 400 with their code by the admin API.
type InputError struct {
	Code    string
	Message string
}

func (e *InputError) Error() string { return e.Code + ": " + e.Message }

// The codes of InputError.
const (
	CodeURLInvalid    = "WEBHOOK_URL_INVALID"
	CodeSecretInvalid = "WEBHOOK_SECRET_INVALID"
	CodeEventUnknown  = "WEBHOOK_EVENT_UNKNOWN"
	CodeRoomInvalid   = "WEBHOOK_ROOM_INVALID"
	CodeOverlap       = "WEBHOOK_OVERLAP_INVALID"
	CodeTooMany       = "WEBHOOK_TOO_MANY"
	CodeNotFound      = "WEBHOOK_NOT_FOUND"
	CodeDeadNotFound  = "DEAD_LETTER_NOT_FOUND"
	CodeStatic        = "WEBHOOK_STATIC"
)

func inputErr(code, format string, args ...any) error {
	return &InputError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CheckURL accepts an absolute http or https URL with a host, no user
// info and no fragment, of at most MaxURLLen bytes.
func CheckURL(raw string) error {
	if len(raw) == 0 || len(raw) > MaxURLLen {
		return inputErr(CodeURLInvalid, "the webhook url is 1 to %d bytes", MaxURLLen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return inputErr(CodeURLInvalid, "the webhook url does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return inputErr(CodeURLInvalid, "the webhook url must be absolute http or https, got scheme %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return inputErr(CodeURLInvalid, "the webhook url has no host")
	case u.User != nil:
		return inputErr(CodeURLInvalid, "the webhook url must not carry a user or password: sign with the secret")
	case u.Fragment != "" || u.RawFragment != "":
		return inputErr(CodeURLInvalid, "the webhook url must not have a fragment")
	}
	return nil
}

// CheckSecret accepts a whsec_<base64> secret (ParseSecret).
func CheckSecret(s string) error {
	if _, err := ParseSecret(s); err != nil {
		return inputErr(CodeSecretInvalid, "%s", err.Error())
	}
	return nil
}

// CheckFilter accepts room names and event types for an endpoint's filter.
func CheckFilter(rooms, events []string) error {
	if len(rooms) > MaxRooms {
		return inputErr(CodeRoomInvalid, "at most %d rooms per endpoint", MaxRooms)
	}
	for _, r := range rooms {
		if !waitroom.ValidRoomName(r) {
			return inputErr(CodeRoomInvalid, "bad room name %q", r)
		}
	}
	for _, e := range events {
		if !KnownType(e) {
			return inputErr(CodeEventUnknown, "unknown event %q; known: %v", e, Types)
		}
	}
	return nil
}

// Check validates e's URL, filter and secrets.
func (e Endpoint) Check() error {
	if err := CheckURL(e.URL); err != nil {
		return err
	}
	if err := CheckFilter(e.Rooms, e.Events); err != nil {
		return err
	}
	if len(e.Secrets) == 0 {
		return inputErr(CodeSecretInvalid, "an endpoint needs a secret")
	}
	if len(e.Secrets) > MaxSecrets {
		return inputErr(CodeSecretInvalid, "at most %d secrets sign at once", MaxSecrets)
	}
	for _, s := range e.Secrets {
		if err := CheckSecret(s.Value); err != nil {
			return err
		}
	}
	return nil
}

// Wants reports whether e takes an event of typ in room.
func (e Endpoint) Wants(typ, room string) bool {
	return (len(e.Rooms) == 0 || slices.Contains(e.Rooms, room)) &&
		(len(e.Events) == 0 || slices.Contains(e.Events, typ))
}

// keys are the keys of the secrets that sign at now, newest first.
func (e Endpoint) keys(now time.Time) [][]byte {
	var keys [][]byte
	for _, s := range e.Secrets {
		if !s.Until.IsZero() && !now.Before(s.Until) {
			continue
		}
		if key, err := ParseSecret(s.Value); err == nil {
			keys = append(keys, key)
		}
	}
	return keys
}

// Rotate puts a new secret first; the current ones sign until now+overlap
// (those already ending sooner keep their end).
func (e *Endpoint) Rotate(secret string, now time.Time, overlap time.Duration) {
	until := now.Add(overlap)
	kept := []Secret{{Value: secret}}
	for _, s := range e.Secrets {
		if !s.Until.IsZero() && !now.Before(s.Until) {
			continue
		}
		if s.Until.IsZero() || s.Until.After(until) {
			s.Until = until
		}
		kept = append(kept, s)
	}
	// A burst of rotations keeps the newest few signing, not a header that
	// grows with each.
	e.Secrets = kept[:min(len(kept), MaxSecrets)]
}

// StaticEndpoint is the endpoint of --webhook-url and --webhook-secret:
// every room, every event, signed with every secret given (the first is
// the new one during a rotation). Its id follows from the URL, so every
// instance and every restart shares its consumer group.
func StaticEndpoint(rawURL string, secrets []string) (Endpoint, error) {
	if err := CheckURL(rawURL); err != nil {
		return Endpoint{}, err
	}
	if len(secrets) == 0 {
		return Endpoint{}, inputErr(CodeSecretInvalid, "--webhook-url needs --webhook-secret")
	}
	if len(secrets) > MaxSecrets {
		return Endpoint{}, inputErr(CodeSecretInvalid, "at most %d secrets sign at once", MaxSecrets)
	}
	e := Endpoint{URL: rawURL, Static: true}
	for _, s := range secrets {
		if err := CheckSecret(s); err != nil {
			return Endpoint{}, err
		}
		e.Secrets = append(e.Secrets, Secret{Value: s})
	}
	sum := sha256.Sum256([]byte(rawURL))
	e.ID = "flag_" + hex.EncodeToString(sum[:8])
	return e, nil
}

// Redacted is e without its secrets, as the admin API lists it.
func (e Endpoint) Redacted() EndpointView {
	// Empty lists, not null: every room, every event.
	v := EndpointView{ID: e.ID, URL: e.URL, Rooms: append([]string{}, e.Rooms...), Events: append([]string{}, e.Events...),
		Static: e.Static, Created: e.Created, Secrets: []SecretView{}}
	for _, s := range e.Secrets {
		_, err := ParseSecret(s.Value)
		v.Secrets = append(v.Secrets, SecretView{Until: s.Until, Unreadable: err != nil})
	}
	return v
}

// EndpointView is an endpoint as the admin API shows it: no secret.
type EndpointView struct {
	ID      string       `json:"id"`
	URL     string       `json:"url"`
	Rooms   []string     `json:"rooms"`
	Events  []string     `json:"events"`
	Static  bool         `json:"static"`
	Created time.Time    `json:"created,omitzero"`
	Secrets []SecretView `json:"secrets"`
	// Secret is set only in the answer that made it: shown once.
	Secret string `json:"secret,omitempty"`
}

// SecretView says how long a secret signs; never its value.
type SecretView struct {
	Until time.Time `json:"until,omitzero"`
	// Unreadable: stored sealed under another key than this instance's
	// (its --cookie-secret changed), so it signs nothing here.
	Unreadable bool `json:"unreadable,omitempty"`
}
