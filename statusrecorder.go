package waitroom

import "net/http"

// StatusRecorder is an http.ResponseWriter that remembers the final status
// its handler answered: for the gate (complete or release the token), the
// server's request log and metrics, and the rate tuner's timing. An interim
// answer (1xx, such as 103 Early Hints) is passed on but never recorded,
// and the first final status stays the answer.
type StatusRecorder struct {
	http.ResponseWriter
	code int
}

// NewStatusRecorder wraps w.
func NewStatusRecorder(w http.ResponseWriter) *StatusRecorder {
	return &StatusRecorder{ResponseWriter: w}
}

func (s *StatusRecorder) WriteHeader(code int) {
	if s.code == 0 && code >= 200 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (and the reverse proxy's flushing)
// reach the real writer.
func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Answered reports whether a final status went out: a panic after it can
// only cut the connection, not answer again.
func (s *StatusRecorder) Answered() bool { return s.code != 0 }

// Status is the final status answered; a handler that wrote nothing
// answered 200 (net/http's rule).
func (s *StatusRecorder) Status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}
