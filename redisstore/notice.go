package redisstore

import (
	"context"
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
// with a notice, and the return link's nonce once one was sent.

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
	if err := s.refuseSpread(ctx, room, "notices"); err != nil {
		return err
	}
	if len(channels) > waitroom.MaxNoticeBytes {
		return waitroom.BadRequest("a notice request is at most 4 KiB")
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
	k := s.keys(room)
	r, err := s.do(ctx, "notice", noticeScript, []string{k.cfg, k.notice}, user)
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
	k := s.keys(room)
	r, err := s.do(ctx, "notified", notifiedScript, []string{k.cfg, k.tok, k.active}, user, nonce)
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
	k := s.keys(room)
	r, err := s.do(ctx, "use return link", useReturnLinkScript, []string{k.tok, k.active}, user, nonce)
	if err != nil {
		return err
	}
	if r.code() != "OK" { // RETURN_LINK_USED and ENTRY_TOKEN_NOT_FOUND are refusals (do)
		return s.unexpected(ctx, "use return link", r)
	}
	return nil
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
