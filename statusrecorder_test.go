package waitroom_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// TestStatusRecorderFinalStatus: only a final status (≥ 200) is recorded,
// the first one stays, interim answers pass through, and nothing written
// is 200.
func TestStatusRecorderFinalStatus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		write    func(w http.ResponseWriter)
		want     int
		answered bool
	}{
		{"nothing", statuses(), http.StatusOK, false},
		{"early hints only", statuses(http.StatusEarlyHints), http.StatusOK, false},
		{"early hints then 409", statuses(http.StatusEarlyHints, http.StatusConflict), http.StatusConflict, true},
		{"early hints then a body", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = w.Write([]byte("ok"))
		}, http.StatusOK, true},
		{"100 continue then 201", statuses(http.StatusContinue, http.StatusCreated), http.StatusCreated, true},
		// net/http ignores the second final status as well.
		{"first final stays", statuses(http.StatusBadGateway, http.StatusOK), http.StatusBadGateway, true},
		{"body then a status", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte("ok"))
			w.WriteHeader(http.StatusInternalServerError)
		}, http.StatusOK, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			sr := waitroom.NewStatusRecorder(rec)
			tt.write(sr)
			require.Equal(t, tt.want, sr.Status())
			require.Equal(t, tt.answered, sr.Answered())
			require.Same(t, rec, http.ResponseWriter(sr.Unwrap()).(*httptest.ResponseRecorder))
		})
	}
}

// statuses writes each status in turn, and nothing else.
func statuses(codes ...int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for _, c := range codes {
			w.WriteHeader(c)
		}
	}
}
