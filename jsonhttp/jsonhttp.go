// Package jsonhttp holds the few helpers every JSON endpoint of waitroom
// shares: one error body shape, bounded strict decoding, and JSON writing.
package jsonhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// MaxBody bounds every request body we decode; nothing outside is trusted
// for size.
const MaxBody = 64 << 10

// ErrorBody is the shape of every error answer:
// {"error":{"code":"…","message":"…"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail carries a stable machine code and a message safe for clients.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Write answers status with v encoded as JSON.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers status with the standard error body.
func Error(w http.ResponseWriter, status int, code, message string) {
	Write(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: message}})
}

// RetryAfter sets the Retry-After header in whole seconds (at least 1).
func RetryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}

// Decode reads one JSON object from r's body into v: at most MaxBody bytes,
// unknown fields rejected, nothing after the object. The error is safe to
// show to the client.
func Decode(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, MaxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var maxErr *http.MaxBytesError
		switch {
		case errors.As(err, &maxErr):
			return fmt.Errorf("body larger than %d bytes", MaxBody)
		case errors.Is(err, io.EOF):
			return errors.New("empty body, a JSON object was expected")
		default:
			return fmt.Errorf("malformed JSON body: %v", err)
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("malformed JSON body: data after the object")
	}
	return nil
}
