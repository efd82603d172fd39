package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/jsonhttp"
)

// Passes let staff and invited buyers in without queueing. The operator
// mints them (POST /admin/rooms/{room}/passes); each comes as a link,
// /rooms/{room}?pass=CODE (/?pass=CODE for the default room), whose code is
// the pass's id and an HMAC of the room and id under the cookie secret:
// a forged or altered code is refused (PASS_INVALID) without asking the
// store, and a pass of one room does not open another. The store keeps the
// uses left, the expiry and the revocation (Store.EnterWithPass).
//
//	POST   /admin/rooms/{room}/passes       {"uses": N, "expires_in": "24h"} → 201 pass with code and link
//	GET    /admin/rooms/{room}/passes       {"passes": [pass…]}
//	DELETE /admin/rooms/{room}/passes/{id}  revoke → 200 pass

// Bounds of what a pass request may ask.
const (
	defaultPassUses     = 1
	defaultPassLifetime = 7 * 24 * time.Hour
	// passMACBytes of HMAC-SHA256 sign a code: 128 bits.
	passMACBytes = 16
	// maxPassCode bounds a code before any work: id, dot, MAC.
	maxPassCode = 64
)

// passKey derives the key that signs passes from the cookie secret, so a
// pass code and a visitor cookie never share a MAC.
func (v *visitors) passKey() []byte {
	m := hmac.New(sha256.New, v.secret)
	m.Write([]byte("waitroom pass v1"))
	return m.Sum(nil)
}

func (s *Server) passMAC(room, id string) []byte {
	m := hmac.New(sha256.New, s.visitors.passKey())
	m.Write([]byte(room))
	m.Write([]byte{0})
	m.Write([]byte(id))
	return m.Sum(nil)[:passMACBytes]
}

// passCode is the code of pass id to room.
func (s *Server) passCode(room, id string) string {
	return id + "." + base64.RawURLEncoding.EncodeToString(s.passMAC(room, id))
}

// passID checks a code for room and returns its pass id; a code that is
// malformed, forged or another room's is PASS_INVALID.
func (s *Server) passID(room, code string) (string, error) {
	if len(code) > maxPassCode {
		return "", waitroom.ErrPassInvalid
	}
	// The whole code is compared, not its decoded MAC: base64 has several
	// spellings of one MAC, and a pass has exactly one code.
	id, _, _ := strings.Cut(code, ".")
	if !waitroom.ValidToken(id) || !hmac.Equal([]byte(code), []byte(s.passCode(room, id))) {
		return "", waitroom.ErrPassInvalid
	}
	return id, nil
}

// passLink is where a pass holder goes: the room's page with the code.
func (s *Server) passLink(room, code string) string {
	page := "/rooms/" + room
	if room == s.defaultRoom {
		page = "/"
	}
	return page + "?pass=" + url.QueryEscape(code)
}

// enterWithPass lets user in with a pass code. The pass stands in for the
// join challenge: the server minted it.
func (s *Server) enterWithPass(r *http.Request, room, user, code string) (waitroom.Status, error) {
	id, err := s.passID(room, code)
	if err != nil {
		// Forged: the room name may be made up too, so it is no label.
		s.metrics.passes.WithLabelValues("", resultLabel(err)).Inc()
		return waitroom.Status{}, err
	}
	st, err := s.store.EnterWithPass(r.Context(), room, user, id)
	switch {
	case err == nil:
		s.metrics.passes.WithLabelValues(room, "admitted").Inc()
		s.log.InfoContext(r.Context(), "entered with a pass", "room", room, "pass", id[:6])
	case errors.Is(err, waitroom.ErrRoomNotFound), waitroom.ErrorCode(err) == "INTERNAL", errors.Is(err, waitroom.ErrStoreUnavailable):
		s.metrics.passes.WithLabelValues("", resultLabel(err)).Inc()
	default:
		// The pass was signed for this room, and the store answered about it.
		s.metrics.passes.WithLabelValues(room, resultLabel(err)).Inc()
	}
	return st, err
}

func (s *Server) adminPass(room string, p waitroom.Pass) adminapi.Pass {
	code := s.passCode(room, p.ID)
	return adminapi.Pass{ID: p.ID, Uses: p.Uses, Left: p.Left, ExpiresAt: p.ExpiresAt.UTC(), Revoked: p.Revoked,
		Code: code, Link: s.passLink(room, code)}
}

// passRequest is the body of POST /admin/rooms/{room}/passes.
type passRequest struct {
	Uses      *int    `json:"uses"`
	ExpiresIn *string `json:"expires_in"`
}

// adminCreatePass: POST /admin/rooms/{room}/passes.
func (s *Server) adminCreatePass(w http.ResponseWriter, r *http.Request) error {
	room, req, err := pathRoomAndBody[passRequest](r)
	if err != nil {
		return err
	}
	uses, lifetime := defaultPassUses, defaultPassLifetime
	if req.Uses != nil {
		uses = *req.Uses
	}
	if uses < 1 || uses > waitroom.MaxPassUses {
		return waitroom.BadRequest(fmt.Sprintf("uses: must be in [1, %d], got %d", waitroom.MaxPassUses, uses))
	}
	if req.ExpiresIn != nil {
		lifetime, err = time.ParseDuration(strings.TrimSpace(*req.ExpiresIn))
		if err != nil {
			return waitroom.BadRequest(fmt.Sprintf("expires_in: %q is not a duration (such as 30m, 24h)", *req.ExpiresIn))
		}
	}
	if lifetime < time.Minute || lifetime > waitroom.MaxPassLifetime {
		return waitroom.BadRequest(fmt.Sprintf("expires_in: must be in [1m, %s], got %s", waitroom.MaxPassLifetime, lifetime))
	}
	// The expiry is this instance's clock plus the lifetime; the store
	// judges it on its own clock, which the instances share.
	p := waitroom.Pass{ID: newPassID(), Uses: uses, Left: uses, ExpiresAt: time.Now().Add(lifetime).Truncate(time.Millisecond)}
	if err := s.store.CreatePass(r.Context(), room, p); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "pass created", "room", room, "pass", p.ID[:6], "uses", uses, "expires_at", p.ExpiresAt, "remote", r.RemoteAddr)
	jsonhttp.Write(w, http.StatusCreated, s.adminPass(room, p))
	return nil
}

// adminListPasses: GET /admin/rooms/{room}/passes.
func (s *Server) adminListPasses(w http.ResponseWriter, r *http.Request) error {
	room, err := pathRoom(r)
	if err != nil {
		return err
	}
	passes, err := s.store.Passes(r.Context(), room)
	if err != nil {
		return err
	}
	out := make([]adminapi.Pass, len(passes))
	for i, p := range passes {
		out[i] = s.adminPass(room, p)
	}
	w.Header().Set("Cache-Control", "no-store")
	jsonhttp.Write(w, http.StatusOK, map[string]any{"passes": out})
	return nil
}

// adminRevokePass: DELETE /admin/rooms/{room}/passes/{id}.
func (s *Server) adminRevokePass(w http.ResponseWriter, r *http.Request) error {
	room, err := pathRoom(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if !waitroom.ValidToken(id) {
		return waitroom.ErrPassInvalid
	}
	if err := s.store.RevokePass(r.Context(), room, id); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "pass revoked", "room", room, "pass", id[:6], "remote", r.RemoteAddr)
	passes, err := s.store.Passes(r.Context(), room)
	if err != nil {
		return err
	}
	for _, p := range passes {
		if p.ID == id {
			jsonhttp.Write(w, http.StatusOK, s.adminPass(room, p))
			return nil
		}
	}
	return waitroom.ErrPassInvalid
}

// newPassID mints a pass id. Never one that starts with '-' (1 in 64 of
// tokens): an operator passes it to 'waitroom admin passes revoke', where
// it would read as a flag.
func newPassID() string {
	for {
		if id := waitroom.NewToken(); id[0] != '-' {
			return id
		}
	}
}
