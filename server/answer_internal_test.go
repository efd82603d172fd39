package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// The hand-appended answers are byte for byte what encoding/json writes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	encode := func(v any) []byte {
		var buf bytes.Buffer
		require.NoError(t, json.NewEncoder(&buf).Encode(v))
		return buf.Bytes()
	}
	units := int64(3)
	for _, b := range []waitingBody{
		{waitroom.StateWaiting, "default", waitingPlace{Position: 1, Ahead: 0, ETASeconds: 1, PollAfterMS: 1000}},
		{waitroom.StateWaiting, "sale_2-b", waitingPlace{Position: 100_000, Ahead: 99_999, ETASeconds: 715, PollAfterMS: 60_000, Paused: true}},
		{waitroom.StateWaiting, "r", waitingPlace{Position: -1, Ahead: 0, ETASeconds: 0, PollAfterMS: 0}},
		{waitroom.StateWaiting, "few", waitingPlace{Position: 5, Ahead: 4, ETASeconds: 2, ETALowSeconds: 1, ETAHighSeconds: 4, UnitsLeft: &units}},
	} {
		require.Equal(t, string(encode(b)), string(b.appendJSON(nil)))
	}
	for _, b := range []admittedBody{
		{State: waitroom.StateAdmitted, Room: "default", Token: waitroom.NewToken(), ExpiresIn: 299, ExpiresInMS: 299_999},
		{State: waitroom.StateAdmitted, Room: "x", Token: "", ExpiresIn: 0, ExpiresInMS: 0},
	} {
		require.Equal(t, string(encode(b)), string(b.appendJSON(nil)))
	}
	require.True(t, plainJSONString(waitroom.NewToken()))
	for _, s := range []string{`a"b`, `a\b`, "a<b", "a&b", "é", "a b"} {
		require.False(t, plainJSONString(s), s)
	}
}
