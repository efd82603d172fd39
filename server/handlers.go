package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/jsonhttp"
)

// waitingBody is the answer to a user in the queue.
type waitingBody struct {
	State waitroom.State `json:"state"`
	Room  string         `json:"room"`
	waitingPlace
}

// waitingPlace is where a queued user stands and how long the wait looks:
// the status answer and the page's boot state (page.go) carry it alike.
type waitingPlace struct {
	// Position is 1-based: exact in a room on one shard; in a room spread
	// over shards exact but for users ahead on other sub-shards who left a
	// moment ago (OPERATIONS.md, "Spreading one room over K shards").
	Position    int64 `json:"position"`
	Ahead       int64 `json:"ahead"`
	ETASeconds  int64 `json:"eta_seconds"`
	PollAfterMS int64 `json:"poll_after_ms"`
	// ETALowSeconds and ETAHighSeconds bound about 80% of outcomes.
	ETALowSeconds  int64 `json:"eta_low_seconds"`
	ETAHighSeconds int64 `json:"eta_high_seconds"`
	// Paused says the room admits nobody for now, so the ETA is on hold.
	Paused bool `json:"paused,omitempty"`
	// UnitsLeft is set when the room's unreserved units are fewer than
	// the users up to this one take, units_per_order each
	// (waitroom.Status.FewLeft).
	UnitsLeft *int64 `json:"units_left,omitempty"`
}

// waitingPlace reads the room's settings and pace for st, a waiting user.
func (s *Server) waitingPlace(ctx context.Context, room string, st waitroom.Status) (waitingPlace, error) {
	cfg, err := s.roomConfig(ctx, room)
	if err != nil {
		return waitingPlace{}, err
	}
	est, poll := s.estimate(ctx, room, cfg, st.Position)
	p := waitingPlace{
		Position:    st.Position,
		Ahead:       st.Ahead(),
		PollAfterMS: poll.Milliseconds(),
		Paused:      cfg.State == waitroom.RoomPaused,
	}
	p.ETASeconds, p.ETALowSeconds, p.ETAHighSeconds = etaSeconds(est)
	if st.FewLeft {
		// A copy: the address of st's field would put all of st on the
		// heap for every answer.
		left := st.UnitsLeft
		p.UnitsLeft = &left
	}
	return p, nil
}

// scheduledBody is the answer to an early arrival of a scheduled room.
// Position is there only in a fifo room: a random room's places are not
// drawn yet.
type scheduledBody struct {
	State       waitroom.State `json:"state"`
	Room        string         `json:"room"`
	OpensAt     string         `json:"opens_at"`
	OpensInMS   int64          `json:"opens_in_ms"`
	PollAfterMS int64          `json:"poll_after_ms"`
	Order       string         `json:"prequeue_order"`
	Position    int64          `json:"position,omitempty"`
}

// soldOutBody is the answer to a user queued in a sold-out room.
type soldOutBody struct {
	State waitroom.State `json:"state"`
	Room  string         `json:"room"`
}

// admittedBody is the answer to a user holding an entry token.
type admittedBody struct {
	State waitroom.State `json:"state"`
	Room  string         `json:"room"`
	Token string         `json:"token"`
	// ExpiresIn is rounded down, so a client never counts on time it has not.
	ExpiresIn   int64 `json:"expires_in"`
	ExpiresInMS int64 `json:"expires_in_ms"`
}

// roomAndUser reads the two things every queue endpoint acts on.
func (s *Server) roomAndUser(r *http.Request) (room, user string, err error) {
	if room, err = s.room(r); err != nil {
		return "", "", err
	}
	user, err = s.user(r)
	return room, user, err
}

// inRoom adapts a handler of a room already read (the hot routes', which
// hotRoute reads without the ServeMux) to a route of the ServeMux.
func (s *Server) inRoom(fn func(w http.ResponseWriter, r *http.Request, room string) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		room, err := s.room(r)
		if err != nil {
			return err
		}
		return s.forRoom(w, r, room, func(s *Server, w http.ResponseWriter, r *http.Request, room string) error { return fn(w, r, room) })
	}
}

// forRoom calls fn for room, unless the store did not know room a moment
// ago: then it is not asked again until ConfigRefresh has passed
// (missingRooms).
func (s *Server) forRoom(w http.ResponseWriter, r *http.Request, room string, fn roomHandler) error {
	if s.missing.has(room, s.configRefresh) {
		return waitroom.ErrRoomNotFound
	}
	err := fn(s, w, r, room)
	if errors.Is(err, waitroom.ErrRoomNotFound) {
		s.missing.add(room, time.Now(), s.configRefresh)
	}
	return err
}

// enter: POST /rooms/{room}/enter and POST /queue/enter.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, room string) error {
	user, err := s.user(r)
	if err != nil {
		return err
	}
	body, err := readEnterBody(r)
	if err != nil {
		return err
	}
	st, err := s.enterOnce(r, room, user, body.Challenge, body.Nonce, body.Pass)
	if err != nil {
		return err
	}
	return s.answer(w, r, room, st)
}

// enterOnce enters user. A pass code lets it in at once (passes.go). With
// the join challenge on, a user without a place must bring a
// solution (challenge and nonce) for this room and itself; one who has a
// place gets it back without one.
func (s *Server) enterOnce(r *http.Request, room, user, challenge, nonce, pass string) (waitroom.Status, error) {
	if pass != "" {
		return s.enterWithPass(r, room, user, pass)
	}
	if s.joinDifficulty > 0 {
		if challenge == "" && nonce == "" {
			st, err := s.store.Status(r.Context(), room, user)
			if !errors.Is(err, waitroom.ErrNotInQueue) {
				return st, err
			}
			return waitroom.Status{}, &challengeRequired{s.newChallenge(challengeForUser, room, user), s.joinDifficulty}
		}
		if err := s.checkSolution(room, user, challenge, nonce); err != nil {
			if errors.Is(err, errChallengeRequired) {
				err = &challengeRequired{s.newChallenge(challengeForUser, room, user), s.joinDifficulty}
			}
			return waitroom.Status{}, err
		}
	}
	st, err := s.store.Enter(r.Context(), room, user)
	s.observeEnter(r.Context(), room, st, err)
	return st, err
}

// status: GET /rooms/{room}/status and GET /queue/position.
func (s *Server) status(w http.ResponseWriter, r *http.Request, room string) error {
	user, err := s.user(r)
	if err != nil {
		return err
	}
	st, err := s.store.Status(r.Context(), room, user)
	if err != nil {
		return err
	}
	return s.answer(w, r, room, st)
}

// leave: DELETE /rooms/{room}/queue and DELETE /queue.
func (s *Server) leave(w http.ResponseWriter, r *http.Request) error {
	room, user, err := s.roomAndUser(r)
	if err != nil {
		return err
	}
	if err := s.store.Leave(r.Context(), room, user); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, room string, st waitroom.Status) error {
	switch st.State {
	case waitroom.StateAdmitted:
		s.setTokenCookie(w, st)
		body := admittedBody{
			State:       st.State,
			Room:        room,
			Token:       st.Token,
			ExpiresIn:   int64(st.ExpiresIn.Seconds()),
			ExpiresInMS: st.ExpiresIn.Milliseconds(),
		}
		if !plainJSONString(room) || !plainJSONString(st.Token) {
			jsonhttp.Write(w, http.StatusOK, body)
			return nil
		}
		writeJSONAppended(w, body.appendJSON)
		return nil
	case waitroom.StateWaiting:
		place, err := s.waitingPlace(r.Context(), room, st)
		if err != nil {
			return err
		}
		body := waitingBody{State: st.State, Room: room, waitingPlace: place}
		if !plainJSONString(room) {
			jsonhttp.Write(w, http.StatusOK, body)
			return nil
		}
		writeJSONAppended(w, body.appendJSON)
		return nil
	case waitroom.StateSoldOut:
		jsonhttp.Write(w, http.StatusOK, soldOutBody{State: st.State, Room: room})
		return nil
	case waitroom.StateScheduled:
		body, err := s.scheduled(r, room, st)
		if err != nil {
			return err
		}
		jsonhttp.Write(w, http.StatusOK, body)
		return nil
	default:
		return fmt.Errorf("store answered an unknown state %q", st.State)
	}
}

// The enter and status answers are the hottest writes of the server, and
// their shapes are fixed: they are appended by hand, the same bytes
// encoding/json gives (Encoder.Encode's newline included), without its
// reflection, encoder and boxing. The profile of ENTER over HTTP showed
// jsonhttp.Write as most of what the handler adds to the store call.

// plainJSONString reports whether s needs no escaping in JSON: room names
// and tokens always qualify; anything else takes encoding/json's path.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// appendStateRoom opens an answer: its state and room, then a field follows.
func appendStateRoom(buf []byte, state waitroom.State, room string) []byte {
	buf = append(buf, `{"state":"`...)
	buf = append(buf, state...)
	buf = append(buf, `","room":"`...)
	return append(buf, room...)
}

func (b waitingBody) appendJSON(buf []byte) []byte {
	buf = appendStateRoom(buf, b.State, b.Room)
	buf = append(buf, `","position":`...)
	buf = strconv.AppendInt(buf, b.Position, 10)
	buf = append(buf, `,"ahead":`...)
	buf = strconv.AppendInt(buf, b.Ahead, 10)
	buf = append(buf, `,"eta_seconds":`...)
	buf = strconv.AppendInt(buf, b.ETASeconds, 10)
	buf = append(buf, `,"poll_after_ms":`...)
	buf = strconv.AppendInt(buf, b.PollAfterMS, 10)
	buf = append(buf, `,"eta_low_seconds":`...)
	buf = strconv.AppendInt(buf, b.ETALowSeconds, 10)
	buf = append(buf, `,"eta_high_seconds":`...)
	buf = strconv.AppendInt(buf, b.ETAHighSeconds, 10)
	if b.Paused {
		buf = append(buf, `,"paused":true`...)
	}
	if b.UnitsLeft != nil {
		buf = append(buf, `,"units_left":`...)
		buf = strconv.AppendInt(buf, *b.UnitsLeft, 10)
	}
	return append(buf, "}\n"...)
}

func (b admittedBody) appendJSON(buf []byte) []byte {
	buf = appendStateRoom(buf, b.State, b.Room)
	buf = append(buf, `","token":"`...)
	buf = append(buf, b.Token...)
	buf = append(buf, `","expires_in":`...)
	buf = strconv.AppendInt(buf, b.ExpiresIn, 10)
	buf = append(buf, `,"expires_in_ms":`...)
	buf = strconv.AppendInt(buf, b.ExpiresInMS, 10)
	return append(buf, "}\n"...)
}

// Header values shared by every answer: assigned to the map directly, so
// the hot path neither canonicalises the keys nor allocates the slices.
// Their capacity is their length, so an Add elsewhere copies, never writes
// into them.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// answerBuffers hold the bytes of the hand-appended answers between
// requests: a Writer must not keep what it is given, so the buffer is free
// again once Write returns.
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// writeJSONAppended answers 200 with what appendJSON appends and
// jsonhttp.Write's headers.
func writeJSONAppended(w http.ResponseWriter, appendJSON func([]byte) []byte) {
	buf := answerBuffers.Get().(*[]byte)
	*buf = appendJSON((*buf)[:0])
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(*buf)
	answerBuffers.Put(buf)
}

// enterBody is what an enter may carry: the solution of the join
// challenge, when it is on.
type enterBody struct {
	Challenge string `json:"challenge"`
	Nonce     string `json:"nonce"`
	Pass      string `json:"pass"`
}

// readEnterBody accepts no body (curl users send none), whitespace, or a
// JSON object with at most the fields of enterBody; anything else is a
// client mistake worth telling about, not something to ignore.
func readEnterBody(r *http.Request) (enterBody, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return enterBody{}, nil
	}
	return readEnterJSON(r)
}

// readEnterJSON is readEnterBody's part for a body. Apart, so that req,
// which the decoder's reflection moves to the heap, is not made for the
// usual enter without one.
func readEnterJSON(r *http.Request) (enterBody, error) {
	var req enterBody
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, jsonhttp.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, waitroom.BadRequest(fmt.Sprintf("body larger than %d bytes", jsonhttp.MaxBody))
		}
		return req, waitroom.BadRequest("reading the body failed")
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return req, nil
	}
	if trimmed[0] != '{' {
		return req, waitroom.BadRequest("the body must be empty or a JSON object")
	}
	r.Body = io.NopCloser(bytes.NewReader(trimmed))
	if err := jsonhttp.Decode(r, &req); err != nil {
		return enterBody{}, waitroom.BadRequest(err.Error())
	}
	return req, nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	jsonhttp.Write(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	// The body names the failure policy; whether a down store makes this
	// instance unready depends on it (writeReady).
	s.writeReady(w, r, s.store.Ping(ctx))
	return nil
}

// scheduled is the answer to an early arrival. Its poll hint spreads the
// crowd over the seconds after the opening, each user at its own moment,
// over longer for a crowd of millions (the room's waiting count, from the
// pace the ETA reads too).
func (s *Server) scheduled(r *http.Request, room string, st waitroom.Status) (scheduledBody, error) {
	cfg, err := s.roomConfig(r.Context(), room)
	if err != nil {
		return scheduledBody{}, err
	}
	// The user was read (and counted against its limit) by the handler:
	// here only its id spreads the poll, so it is not counted again.
	h := fnv.New32a()
	h.Write([]byte(r.Header.Get(s.userHeader)))
	spread := float64(h.Sum32()) / (1 << 32)
	return scheduledBody{
		State:       st.State,
		Room:        room,
		OpensAt:     cfg.OpensAt.Format(time.RFC3339),
		OpensInMS:   st.OpensIn.Milliseconds(),
		PollAfterMS: waitroom.OpeningPollAfter(st.OpensIn, spread, s.pace(r.Context(), room).Waiting).Milliseconds(),
		Order:       string(cfg.Order()),
		Position:    st.Position,
	}, nil
}

// draw: GET /rooms/{room}/draw, public: the commitment before the opening,
// the seed after the draw; from the cache (drawcache.go).
func (s *Server) draw(w http.ResponseWriter, r *http.Request) error {
	room, err := s.room(r)
	if err != nil {
		return err
	}
	d, err := s.draws.get(r.Context(), s.store, room)
	if err != nil {
		return err
	}
	jsonhttp.Write(w, http.StatusOK, adminapi.NewDrawRecord(room, d))
	return nil
}
