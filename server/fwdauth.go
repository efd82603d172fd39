package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/seal"
	"github.com/waitroom/waitroom/jsonhttp"
)

// The forward-auth gate: a proxy the shop already runs (nginx
// auth_request, Caddy forward_auth, Traefik ForwardAuth) asks GET
// /gate/auth before its order route; the shop settles the hold it was
// given with POST /gate/settle.
const (
	// HoldHeader carries the hold's id to the shop, which settles with it.
	HoldHeader = waitroom.HoldHeader
	// ErrorHeader carries a refusal's code, since a proxy's auth request
	// passes on the status but not the body.
	ErrorHeader = "Waitroom-Error"
	// maxHoldID bounds a hold id before it is decoded: a sealed hold of
	// the longest room, user and lease names fits well within it.
	maxHoldID = 1024
)

// holdSealer turns a hold into the opaque id the shop settles with and
// back: sealed under a key derived from the cookie secret, so the id
// neither reveals the entry token nor can be forged or altered, and
// settling needs no store round trip beyond the settle itself. Every
// instance given the same cookie secret opens the others' ids.
type holdSealer struct{ s *seal.Sealer } // nil: forward auth is off

func newHoldSealer(secret []byte) holdSealer {
	sealer := seal.New(secret, "waitroom hold id v1")
	return holdSealer{&sealer}
}

// sealedHold is what a hold id carries: what Complete and Release need.
type sealedHold struct {
	Room     string        `json:"r"`
	User     string        `json:"u"`
	Token    string        `json:"t"`
	Lease    string        `json:"l"`
	LeaseFor time.Duration `json:"f,omitempty"`
	PerUser  bool          `json:"p,omitempty"`
	Units    int           `json:"n,omitempty"`
}

func (s holdSealer) seal(h waitroom.Hold) string {
	plain, _ := json.Marshal(sealedHold{h.Room, h.User, h.Token, h.Lease, h.LeaseFor, h.OneOrderPerUser, h.Units})
	return s.s.Seal(plain, nil)
}

// open returns the hold id sealed, or errHoldInvalid for anything this
// server did not seal (forged, altered, truncated, another secret's).
func (s holdSealer) open(id string) (waitroom.Hold, error) {
	if len(id) > maxHoldID {
		return waitroom.Hold{}, errHoldInvalid
	}
	plain, err := s.s.Open(id, nil)
	if err != nil {
		return waitroom.Hold{}, errHoldInvalid
	}
	var h sealedHold
	if err := json.Unmarshal(plain, &h); err != nil || !waitroom.ValidRoomName(h.Room) ||
		!waitroom.ValidUserID(h.User) || !waitroom.ValidToken(h.Token) {
		return waitroom.Hold{}, errHoldInvalid
	}
	return waitroom.Hold{Room: h.Room, User: h.User, Token: h.Token, Lease: h.Lease,
		LeaseFor: h.LeaseFor, OneOrderPerUser: h.PerUser, Units: h.Units}, nil
}

// gateAuth answers a proxy's auth request: 200 with the headers it copies
// onto the request to the shop, or a refusal only as 401 or 403 (nginx
// turns any other status of an auth request into a 500), with the gate's
// code in the body and in Waitroom-Error. The room is ?room=, default the
// default room.
func (s *Server) gateAuth(w http.ResponseWriter, r *http.Request) {
	s.tokenFromCookie(r)
	room, err := s.authRoom(r)
	if err == nil {
		var hold waitroom.Hold
		if hold, err = s.fwdGate.Admit(r, room); err == nil {
			for k, v := range s.fwdGate.Vouched(hold) {
				w.Header()[k] = v
			}
			w.Header().Set(HoldHeader, s.holds.seal(hold))
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			return
		}
	}
	a := classify(s.log, r, err)
	status := http.StatusForbidden
	if waitroom.NoEntryToken(err) {
		status = http.StatusUnauthorized
	}
	if a.RetryAfter > 0 {
		jsonhttp.RetryAfter(w, a.RetryAfter)
	}
	w.Header().Set(ErrorHeader, a.Code)
	jsonhttp.Error(w, status, a.Code, a.Message)
}

// authRoom is the room an auth request names with ?room=, once.
func (s *Server) authRoom(r *http.Request) (string, error) {
	rooms, named := r.URL.Query()["room"]
	switch {
	case !named:
		return s.defaultRoom, nil
	case len(rooms) != 1 || !waitroom.ValidRoomName(rooms[0]):
		return "", waitroom.BadRequest("room is one name, " + waitroom.RoomNameRule)
	}
	return rooms[0], nil
}

// CheckHold reports whether hold is one this server sealed and h carries
// exactly what the gate vouched for with it (the user, Idempotency-Key,
// Waitroom-Units): an order API in process (Settler.Check, as the
// built-in shop on --shop-addr) then refuses an order that did not come
// through /gate/auth, even from a client that reaches it directly.
func (s *Server) CheckHold(hold string, h http.Header) error {
	if s.holds.s == nil {
		return errForwardAuthOff
	}
	held, err := s.holds.open(hold)
	if err != nil {
		return err
	}
	for k, v := range s.fwdGate.Vouched(held) {
		if !slices.Equal(h.Values(k), v) {
			return errHoldMismatch
		}
	}
	return nil
}

// settleRequest is the body of POST /gate/settle.
type settleRequest struct {
	Hold    string `json:"hold"`
	Outcome string `json:"outcome"`
}

// gateSettle settles a hold /gate/auth gave: "spent" sells its unit and
// spends the token, "released" gives the token back with the TTL it had
// left. A second settle of the same hold changes nothing and answers the
// store's refusal (ENTRY_TOKEN_NOT_FOUND after a spent).
func (s *Server) gateSettle(w http.ResponseWriter, r *http.Request) error {
	if err := s.settleAuthorized(r); err != nil {
		return err
	}
	var body settleRequest
	if err := jsonhttp.Decode(r, &body); err != nil {
		return waitroom.BadRequest(err.Error())
	}
	hold, err := s.holds.open(body.Hold)
	if err != nil {
		return err
	}
	switch body.Outcome {
	case "spent":
		err = s.store.Complete(r.Context(), hold)
	case "released":
		err = s.store.Release(r.Context(), hold)
	default:
		return waitroom.BadRequest(`outcome is "spent" or "released"`)
	}
	if err != nil {
		return err
	}
	// Counted and told as the built-in gate counts and tells its settles.
	outcome := map[string]string{"spent": waitroom.OutcomeCompleted, "released": waitroom.OutcomeReleased}[body.Outcome]
	s.fwdGate.OnOutcome(hold.Room, outcome)
	if s.fwdGate.OnSettled != nil {
		s.fwdGate.OnSettled(hold, outcome)
	}
	jsonhttp.Write(w, http.StatusOK, map[string]string{"outcome": body.Outcome})
	return nil
}

// settleAuthorized checks the bearer settle secret, in constant time.
func (s *Server) settleAuthorized(r *http.Request) error {
	given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || given == "" {
		return errSettleNoSecret
	}
	sum := sha256.Sum256([]byte(given))
	if subtle.ConstantTimeCompare(sum[:], s.settleSecret[:]) != 1 {
		return errSettleBadSecret
	}
	return nil
}

// forwardAuthRoutes are the forward-auth gate's routes: off (404
// NOT_CONFIGURED) without a settle secret, since a hold nobody can settle
// would only lapse.
func (s *Server) forwardAuthRoutes(routes map[string]http.Handler, settleSecret string) error {
	if settleSecret == "" {
		off := s.serve(func(http.ResponseWriter, *http.Request) error { return errForwardAuthOff })
		routes["/gate/auth"], routes["POST /gate/settle"] = off, off
		return nil
	}
	if len(settleSecret) < MinCookieSecret {
		return fmt.Errorf("server: Config.SettleSecret has %d bytes; at least %d are needed", len(settleSecret), MinCookieSecret)
	}
	s.settleSecret = sha256.Sum256([]byte(settleSecret))
	s.holds = newHoldSealer(s.visitors.secret)
	routes["/gate/auth"] = http.HandlerFunc(s.gateAuth)
	routes["POST /gate/settle"] = s.serve(s.gateSettle)
	return nil
}

// TokenCookie carries the entry token to /gate/auth from a browser on the
// shop's own pages, which cannot add X-Entry-Token: the waiting page sets
// it for Config.TokenCookieDomain when the visitor's turn comes.
const TokenCookie = "waitroom_token"

// setTokenCookie gives an admitted visitor the token as a cookie for the
// shop's domain, for as long as the token lives: HttpOnly (no script of
// the shop reads it), Secure, and SameSite=Lax, so another site's form
// cannot spend it.
func (s *Server) setTokenCookie(w http.ResponseWriter, st waitroom.Status) {
	if s.tokenCookieDomain == "" || st.State != waitroom.StateAdmitted {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     TokenCookie,
		Value:    st.Token,
		Domain:   s.tokenCookieDomain,
		Path:     "/",
		MaxAge:   max(int(st.ExpiresIn/time.Second), 1),
		HttpOnly: true,
		Secure:   true,
		SameSite: http.SameSiteLaxMode,
	})
}

// tokenFromCookie gives an auth request without X-Entry-Token the one
// token cookie it carries, as that header, so that the gate's one claim
// checks it. Several such cookies (one per domain level) are passed on
// as several headers, which the gate refuses: which one the buyer meant
// is unknown.
func (s *Server) tokenFromCookie(r *http.Request) {
	if s.tokenCookieDomain == "" || len(r.Header.Values(waitroom.EntryTokenHeader)) > 0 {
		return
	}
	for _, c := range r.CookiesNamed(TokenCookie) {
		r.Header.Add(waitroom.EntryTokenHeader, c.Value)
	}
}

// validCookieDomain reports whether d is a domain a cookie can name: DNS
// labels of letters, digits and hyphens, an optional leading dot.
func validCookieDomain(d string) bool {
	d = strings.TrimPrefix(d, ".")
	if d == "" || len(d) > 253 {
		return false
	}
	for label := range strings.SplitSeq(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
