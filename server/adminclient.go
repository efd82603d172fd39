package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/waitroom/waitroom"
)

// AdminClient calls the operator API (/admin/…) of a running server: the
// client behind 'waitroom admin' and behind a load test that reads a
// room's figures while it runs.
type AdminClient struct {
	// BaseURL is the server's; it may carry a path prefix (a proxy).
	BaseURL *url.URL
	// Token is the server's admin bearer token.
	Token string
	// HTTP sends the requests; nil: http.DefaultClient.
	HTTP *http.Client
}

// AdminError is an answer of the operator API other than 2xx.
type AdminError struct {
	Method, URL string // the URL without its password
	Status      int
	// Code and Message are the server's error body; empty when the answer
	// had none (a proxy's error page).
	Code, Message string
}

func (e *AdminError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.URL, e.Status, e.Code, e.Message)
}

// Call sends one request with body as JSON (nil: none) and returns the body
// of a 2xx answer; any other answer is an *AdminError.
func (c *AdminClient) Call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	rel, err := url.Parse(path)
	if err != nil {
		return nil, err
	}
	target := *c.BaseURL
	target.Path = strings.TrimSuffix(c.BaseURL.Path, "/") + rel.Path
	target.RawPath = ""
	target.RawQuery = rel.RawQuery
	req, err := http.NewRequestWithContext(ctx, method, target.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err // names the method, URL and cause
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, target.Redacted(), err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return raw, nil
	}
	e := &AdminError{Method: method, URL: target.Redacted(), Status: resp.StatusCode}
	var answer struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(raw, &answer) == nil {
		e.Code, e.Message = answer.Error.Code, answer.Error.Message
	}
	return nil, e
}

// Room reads a room's settings and its figures now (window=0: without
// waiting to measure a rate).
func (c *AdminClient) Room(ctx context.Context, name string) (AdminRoom, error) {
	var r AdminRoom
	raw, err := c.Call(ctx, http.MethodGet, "/admin/rooms/"+url.PathEscape(name)+"?window=0", nil)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("reading the admin API's answer: %w", err)
	}
	if r.Figures == nil {
		return r, errors.New("the admin API's room answer has no figures")
	}
	return r, nil
}

// SetState changes a room's state.
func (c *AdminClient) SetState(ctx context.Context, name string, state waitroom.RoomState) error {
	_, err := c.Call(ctx, http.MethodPatch, "/admin/rooms/"+url.PathEscape(name), map[string]waitroom.RoomState{"state": state})
	return err
}
