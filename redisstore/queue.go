package redisstore

import (
	"context"
	"time"

	"github.com/waitroom/waitroom"
)

// enterScript queues users, or returns the standing each already has: the
// Store sends the users of concurrent Enters of one room in one call
// (batch.go), so that the settings, the clock and the call itself are
// paid once per call, not per user. Users are served in the order given,
// each exactly as a call of its own would be at that point.
//
// KEYS[1] cfg
// KEYS[2] q
// KEYS[3] seq
// KEYS[4] tok
// KEYS[5] stats
// KEYS[6] active
// KEYS[7] buyers
// KEYS[8] pre
// KEYS[9] drawn
// KEYS[10] draw
// KEYS[11] notice
// ARGV     users
//
// Returns {"ROOM_NOT_FOUND"}, or {"OK", seq_before, seq_after, standing,
// …}, a standing per user, one of
//
//	{"ALREADY_ORDERED"}                 one order per user, and it ordered
//	{"ADMITTED", token, ms_left}        the user holds a live token (a second
//	                                    call confirms it: holder_sees)
//	{"SCHEDULED", opens_in_ms, position}  an early arrival (now or before) of a
//	                                    scheduled room; position 0 unless fifo
//	{"WAITING", position, units_left}   queued (now or before), the units
//	                                    short (units: fewer than position ×
//	                                    units per order); 1-based; a user silent
//	                                    past abandon_after has gone: counted
//	                                    abandoned, queued anew
//	{"QUEUED_SOLD_OUT"}                 queued, but the stock is all sold (less
//	                                    than one order's units unsold)
//	{"ROOM_CLOSED"}                     not queued, the room refuses entries
//	{"INVITE_ONLY"}                     not queued, the room lets in pass holders only
//	{"SOLD_OUT"}                        not queued, the stock is all sold
//	{"QUEUE_FULL"}                      not queued; only stats.full counted
//	position                            the same, the units not short: a bare
//	                                    number to send and decode, not a table
//	                                    (waiting_standing)
//
// seq_before and seq_after are the arrival sequence when the call began
// and ended; the Store watches them for lost writes (lost.go).
var enterScript = newFunction("enter")

// Enter queues user, or returns the standing it already has: its own live
// token, or its place. Concurrent Enters of a room share calls (batch.go).
func (s *Store) Enter(ctx context.Context, room, user string) (waitroom.Status, error) {
	return s.EnterWithin(ctx, room, user, 0)
}

// EnterWithin is Enter whose wait ends within d (waitroom.WaitBounder):
// the callers that share a call share its timer.
func (s *Store) EnterWithin(ctx context.Context, room, user string, d time.Duration) (waitroom.Status, error) {
	if err := waitroom.CheckUserID(user); err != nil {
		return waitroom.Status{}, err
	}
	return s.batched(ctx, enterOp, room, user, d)
}

var enterOp = &batchedOp{
	name: "enter",
	call: func(k *roomKeys) fcall { return k.enter },
}

// standing decodes {"ADMITTED", token, ms_left, …}, {"WAITING",
// position, units_left, …}, {"QUEUED_SOLD_OUT", …} and {"SCHEDULED",
// opens_in_ms, position, …}; next is the index of the first element after
// them. Any other code is not ok.
func standing(r reply) (st waitroom.Status, next int, ok bool) {
	switch r.code() {
	case "ADMITTED":
		token, ok1 := r.str(1)
		ms, ok2 := r.int(2)
		return waitroom.Status{
			State:     waitroom.StateAdmitted,
			Token:     token,
			ExpiresIn: time.Duration(ms) * time.Millisecond,
		}, 3, ok1 && ok2
	case "WAITING":
		pos, ok1 := r.int(1)
		left, ok2 := r.int(2)
		st := waitroom.Status{State: waitroom.StateWaiting, Position: pos}
		if left >= 0 {
			st.UnitsLeft, st.FewLeft = left, true
		}
		return st, 3, ok1 && ok2
	case "QUEUED_SOLD_OUT":
		return waitroom.Status{State: waitroom.StateSoldOut}, 1, true
	case "SCHEDULED":
		ms, ok1 := r.int(1)
		pos, ok2 := r.int(2)
		return waitroom.Status{State: waitroom.StateScheduled, OpensIn: time.Duration(ms) * time.Millisecond, Position: pos}, 3, ok1 && ok2
	}
	return waitroom.Status{}, 0, false
}

// statusScript reads users' standings: the Store sends the users of
// concurrent Status calls of one room in one call (batch.go), each served
// as a call of its own would be.
//
// A waiting user is marked seen: its score's fraction is refreshed (the
// place is the same). One silent past abandon_after has gone: it is dropped
// and counted abandoned, and is NOT_IN_QUEUE, as the admitter would have
// found it at the head.
//
// KEYS are enterScript's, in its order (keys binds them once for both):
// KEYS[1] cfg
// KEYS[2] q
// KEYS[3] seq
// KEYS[4] tok
// KEYS[5] stats
// KEYS[6] active
// KEYS[7] buyers
// KEYS[8] pre
// KEYS[9] drawn
// KEYS[10] draw
// KEYS[11] notice
// ARGV     users
//
// Returns {"ROOM_NOT_FOUND"}, or {"OK", seq, seq, standing, …}, a standing
// per user, one of
//
//	{"ALREADY_ORDERED"}                 one order per user, and it ordered
//	{"SCHEDULED", opens_in_ms, position}  an early arrival; position 0 unless fifo
//	{"ADMITTED", token, ms_left}        a second call confirms it (holder_sees)
//	{"WAITING", position, units_left}   waiting, the units short (units)
//	{"QUEUED_SOLD_OUT"}                 queued, but the stock is all sold
//	{"NOT_IN_QUEUE"}
//	position                            waiting, the units not short
//
// seq is the arrival sequence, which the Store watches for lost writes.
var statusScript = newFunction("status")

// Status returns the user's standing, or ErrNotInQueue. Concurrent Status
// calls of a room share calls (batch.go).
func (s *Store) Status(ctx context.Context, room, user string) (waitroom.Status, error) {
	return s.StatusWithin(ctx, room, user, 0)
}

// StatusWithin is Status whose wait ends within d (waitroom.WaitBounder).
func (s *Store) StatusWithin(ctx context.Context, room, user string, d time.Duration) (waitroom.Status, error) {
	return s.batched(ctx, statusOp, room, user, d)
}

var statusOp = &batchedOp{
	name: "status",
	call: func(k *roomKeys) fcall { return k.status },
}

// leaveScript takes a user out of the queue. A user who leaves the queue
// is counted (stats left) with the arrivals after it until it left (stats
// left_after, from its score's sequence), for the ETA (admitScript).
//
// KEYS[1] q
// KEYS[2] pre
// KEYS[3] drawn
// KEYS[4] draw
// KEYS[5] stats
// KEYS[6] seq
// KEYS[7] notice
// ARGV[1] user
//
// Returns "OK". Leaving forgets the user's notice (NoticeStore).
var leaveScript = newFunction("leave")

// Leave removes user from the queue, early arrivals included; leaving
// when not queued (or from no room) is no error.
func (s *Store) Leave(ctx context.Context, room, user string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if l, err := s.layout(ctx, room); err != nil {
		return err
	} else if l.shards > 1 {
		return s.spreadLeave(ctx, room, l, user)
	}
	k := s.keys(room)
	if err := s.call(ctx, s.client, leaveScript, []string{k.q, k.pre, k.drawn, k.draw, k.stats, k.seq, k.notice}, user).Err(); err != nil {
		return s.fail("leave", err)
	}
	return nil
}
