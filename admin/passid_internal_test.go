package admin

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// A pass id never reads as a flag on the command line; about 80 of these
// 5,000 would start with '-' as plain tokens.
func TestPassIDNeverStartsWithADash(t *testing.T) {
	for range 5000 {
		id := newPassID()
		require.NotEqual(t, byte('-'), id[0], id)
		require.True(t, waitroom.ValidToken(id), id)
	}
}
