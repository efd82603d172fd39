package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/waitroom/waitroom"
)

// Passes let staff and invited buyers in without queueing. The operator
// mints them (POST /admin/rooms/{room}/passes); each comes as a link,
// /rooms/{room}?pass=CODE (/?pass=CODE for the default room), whose code is
// the pass's id and an HMAC of the room and id under the cookie secret:
// a forged or altered code is refused (PASS_INVALID) without asking the
// store, and a pass of one room does not open another. The store keeps the
// uses left, the expiry and the revocation (Store.EnterWithPass).
//
// The operator's calls on passes are the admin package's (admin/passes.go);
// it asks this server for a pass's code and link (passCodeAndLink).

const (
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

// passCodeAndLink is the code of pass id to room and the link its holder
// follows, for the operator API.
func (s *Server) passCodeAndLink(room, id string) (code, link string) {
	code = s.passCode(room, id)
	return code, s.passLink(room, code)
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
