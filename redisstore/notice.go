package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

// Notices (waitroom.NoticeStore): a queued user's channels are kept in
// the room's notice hash until its turn; Admit hands them back in
// Admission.Notice and forgets them (admitScript), as do leaving, a pass
// and a drop for silence (mark_seen in lua/shared.lua). Admit reads the
// hash only while the room's bucket marks that it may hold some, so a
// room where nobody asked pays nothing for it. The token Admit issues to
// such a user carries its link in its entry (lua/shared.lua): that it came
// with a notice, and the return link's nonce once one was sent. In a room
// spread over shards the hash, the place and the token are the user's
// sub-shard's, so every call is one call there; the sub-shard's tick
// reads the notices of the users it pops while the hash holds any
// (spread_pop).

var _ waitroom.NoticeStore = (*Store)(nil)

// setNoticeScript keeps a queued user's channels.
//
// KEYS[1] cfg
// KEYS[2] q
// KEYS[3] pre
// KEYS[4] drawn
// KEYS[5] draw
// KEYS[6] stats
// KEYS[7] notice
// KEYS[8] bucket
// ARGV[1] user
// ARGV[2] channels; empty: forget them
//
// Returns "OK", "NOT_IN_QUEUE" (not waiting, or silent too long: then
// dropped and counted abandoned, as status would) or "ROOM_NOT_FOUND".
var setNoticeScript = newFunction("set_notice")

// SetNotice keeps channels with user's place (waitroom.NoticeStore).
func (s *Store) SetNotice(ctx context.Context, room, user string, channels []byte) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if err := waitroom.CheckUserID(user); err != nil {
		return err
	}
	if len(channels) > waitroom.MaxNoticeBytes {
		return waitroom.BadRequest("a notice request is at most 4 KiB")
	}
	l, sk, err := s.userSub(ctx, room, user)
	if err != nil {
		return err
	}
	if sk != nil {
		return s.spreadSetNotice(ctx, room, l, sk, user, channels)
	}
	k := s.keys(room)
	r, err := s.do(ctx, "set notice", setNoticeScript, []string{k.cfg, k.q, k.pre, k.drawn, k.draw, k.stats, k.notice, k.bucket}, user, channels)
	if err != nil {
		return err
	}
	switch r.code() {
	case "OK":
		return nil
	case "NOT_IN_QUEUE":
		return waitroom.ErrNotInQueue
	}
	return s.unexpected(ctx, "set notice", r)
}

// userSub is the sub-shard user lives in when room is spread over
// shards (with the room's layout), nil when it is on one.
func (s *Store) userSub(ctx context.Context, room, user string) (*spreadLayout, *subKeys, error) {
	l, err := s.layout(ctx, room)
	if err != nil || l.shards <= 1 {
		return l, nil, err
	}
	return l, l.subs[l.of(user)], nil
}

// spreadSetNoticeScript keeps a queued user's channels in its sub-shard.
//
// KEYS[1] sub cfg
// KEYS[2] sub q
// KEYS[3] sub pre (early arrivals, spread_draw.go)
// KEYS[4] sub stats
// KEYS[5] sub notice
// KEYS[6] sub mirror
// KEYS[7] sub left
// ARGV[1] layout id
// ARGV[2] user
// ARGV[3] channels; empty: forget them
//
// Returns {"OK"}, {"NOT_IN_QUEUE"}, {"NOT_IN_QUEUE", ticket} (silent too
// long: dropped, counted abandoned, its ticket gone), {"ROOM_NOT_FOUND"}
// or {"RESHARDED"}.
var spreadSetNoticeScript = newFunction("spread_set_notice")

func (s *Store) spreadSetNotice(ctx context.Context, room string, l *spreadLayout, sk *subKeys, user string, channels []byte) error {
	r, err := s.do(ctx, "set notice", spreadSetNoticeScript,
		[]string{sk.cfg, sk.q, sk.pre, sk.stats, sk.notice, sk.mirror, sk.left}, l.id, user, channels)
	if err != nil {
		return err
	}
	switch r.code() {
	case "OK":
		return nil
	case "NOT_IN_QUEUE":
		s.pushGone(ctx, l, l.of(user), r[1:])
		return waitroom.ErrNotInQueue
	case "RESHARDED":
		// Resharded since this Store read the layout: the next call
		// reads it again.
		s.forgetLayout(room)
		return fmt.Errorf("%w: redisstore set notice: the room is being resharded", waitroom.ErrStoreUnavailable)
	}
	return s.unexpected(ctx, "set notice", r)
}

// noticeScript reads a user's channels.
//
// KEYS[1] cfg
// KEYS[2] notice
// ARGV[1] user
//
// Returns {"OK", channels} (empty: none) or "ROOM_NOT_FOUND".
var noticeScript = newFunction("notice", "no-writes")

// Notice returns the channels kept with user's place (nil: none).
func (s *Store) Notice(ctx context.Context, room, user string) ([]byte, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if err := waitroom.CheckUserID(user); err != nil {
		return nil, err
	}
	cfg, notice := s.keys(room).cfg, s.keys(room).notice
	if _, sk, err := s.userSub(ctx, room, user); err != nil {
		return nil, err
	} else if sk != nil {
		cfg, notice = sk.cfg, sk.notice
	}
	r, err := s.do(ctx, "notice", noticeScript, []string{cfg, notice}, user)
	if err != nil {
		return nil, err
	}
	channels, ok := r.str(1)
	if r.code() != "OK" || !ok {
		return nil, s.unexpected(ctx, "notice", r)
	}
	if channels == "" {
		return nil, nil
	}
	return []byte(channels), nil
}

// notifiedScript starts the first-use deadline of a told user's token
// and keeps the return link's nonce in its entry.
//
// KEYS[1] cfg
// KEYS[2] tok
// KEYS[3] active
// ARGV[1] user
// ARGV[2] nonce
//
// Returns {"OK", ms_left} (the token's whole TTL left) or
// "ENTRY_TOKEN_NOT_FOUND" (none, or past its time).
var notifiedScript = newFunction("notified")

// Notified starts user's first-use deadline from now, when its token came
// with a notice, and keeps nonce as its one return link.
func (s *Store) Notified(ctx context.Context, room, user, nonce string) (time.Duration, error) {
	if err := checkRoom(room); err != nil {
		return 0, err
	}
	if err := waitroom.CheckUserID(user); err != nil {
		return 0, err
	}
	if nonce == "" || !validNonce(nonce) {
		return 0, waitroom.BadRequest("a return link needs a nonce of at most 128 printable characters, without '|'")
	}
	cfg, tok, active, err := s.tokenKeys(ctx, room, user)
	if err != nil {
		return 0, err
	}
	r, err := s.do(ctx, "notified", notifiedScript, []string{cfg, tok, active}, user, nonce)
	if err != nil {
		return 0, err
	}
	ms, ok := r.int(1)
	if r.code() != "OK" || !ok {
		return 0, s.unexpected(ctx, "notified", r)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// useReturnLinkScript spends a user's return link and confirms its token.
//
// KEYS[1] tok
// KEYS[2] active
// ARGV[1] user
// ARGV[2] nonce
//
// Returns "OK", "RETURN_LINK_USED" (spent already, or not this token's)
// or "ENTRY_TOKEN_NOT_FOUND" (none, or past its time).
var useReturnLinkScript = newFunction("use_return_link")

// UseReturnLink spends user's return link: once, since the script reads
// and clears the nonce in one step. The buyer is back, so its token is
// confirmed. Without a live token it is ErrTokenNotFound, as memstore
// answers, which the server tells as an expired link.
func (s *Store) UseReturnLink(ctx context.Context, room, user, nonce string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if err := waitroom.CheckUserID(user); err != nil {
		return err
	}
	if nonce == "" || !validNonce(nonce) {
		return waitroom.ErrReturnLinkUsed // no nonce this store keeps
	}
	_, tok, active, err := s.tokenKeys(ctx, room, user)
	if err != nil {
		return err
	}
	r, err := s.do(ctx, "use return link", useReturnLinkScript, []string{tok, active}, user, nonce)
	if err != nil {
		return err
	}
	if r.code() != "OK" { // RETURN_LINK_USED and ENTRY_TOKEN_NOT_FOUND are refusals (do)
		return s.unexpected(ctx, "use return link", r)
	}
	return nil
}

// tokenKeys are the settings and token keys user's token lives under:
// the room's, or in a spread room its sub-shard's.
func (s *Store) tokenKeys(ctx context.Context, room, user string) (cfg, tok, active string, err error) {
	_, sk, err := s.userSub(ctx, room, user)
	if err != nil {
		return "", "", "", err
	}
	if sk != nil {
		return sk.cfg, sk.tok, sk.active, nil
	}
	k := s.keys(room)
	return k.cfg, k.tok, k.active, nil
}

// maxNonce bounds a return link's nonce (package notify's are 22
// characters): the token entry keeps it.
const maxNonce = 128

// validNonce: a nonce the token entry can keep: printable ASCII without
// the entry's separator.
func validNonce(nonce string) bool {
	if len(nonce) > maxNonce || strings.ContainsRune(nonce, '|') {
		return false
	}
	for i := 0; i < len(nonce); i++ {
		if nonce[i] <= ' ' || nonce[i] > '~' {
			return false
		}
	}
	return true
}
