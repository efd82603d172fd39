package admin

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/jsonhttp"
)

// The operator's calls on passes (the server's passes.go signs and checks
// them; Config.PassCode gives a pass's code and link):
//
//	POST   /admin/rooms/{room}/passes       {"uses": N, "expires_in": "24h"} → 201 pass with code and link
//	GET    /admin/rooms/{room}/passes       {"passes": [pass…]}
//	DELETE /admin/rooms/{room}/passes/{id}  revoke → 200 pass

// Bounds of what a pass request may ask.
const (
	defaultPassUses     = 1
	defaultPassLifetime = 7 * 24 * time.Hour
)

func (s *Handler) adminPass(room string, p waitroom.Pass) adminapi.Pass {
	code, link := s.passCode(room, p.ID)
	return adminapi.Pass{ID: p.ID, Uses: p.Uses, Left: p.Left, ExpiresAt: p.ExpiresAt.UTC(), Revoked: p.Revoked,
		Code: code, Link: link}
}

// passRequest is the body of POST /admin/rooms/{room}/passes.
type passRequest struct {
	Uses      *int    `json:"uses"`
	ExpiresIn *string `json:"expires_in"`
}

// adminCreatePass: POST /admin/rooms/{room}/passes.
func (s *Handler) adminCreatePass(w http.ResponseWriter, r *http.Request) error {
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
func (s *Handler) adminListPasses(w http.ResponseWriter, r *http.Request) error {
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
func (s *Handler) adminRevokePass(w http.ResponseWriter, r *http.Request) error {
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
