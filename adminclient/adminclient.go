// Package adminclient calls a running server's operator API (/admin/…):
// a method per call, the tables and lines 'waitroom admin' prints, and
// the draw's verification file ('waitroom draw export', 'waitroom draw
// verify').
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
)

// Client calls the operator API (/admin/…) of a running server: the
// client behind 'waitroom admin' and behind a load test that reads a
// room's figures while it runs.
type Client struct {
	// BaseURL is the server's; it may carry a path prefix (a proxy).
	BaseURL *url.URL
	// Token is the server's admin bearer token.
	Token string
	// HTTP sends the requests; nil: http.DefaultClient.
	HTTP *http.Client
}

// Error is an answer of the operator API other than 2xx.
type Error struct {
	Method, URL string // the URL without its password
	Status      int
	// Code and Message are the server's error body; empty when the answer
	// had none (a proxy's error page).
	Code, Message string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.URL, e.Status, e.Code, e.Message)
}

// Call sends one request with body as JSON (nil: none) and returns the body
// of a 2xx answer; any other answer is an *Error.
func (c *Client) Call(ctx context.Context, method, path string, body any) ([]byte, error) {
	if body == nil {
		return c.Send(ctx, method, path, "", nil)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.Send(ctx, method, path, "application/json", b)
}

// Send sends one request with body as contentType ("": no body) and
// returns the body of a 2xx answer; any other answer is an *Error.
func (c *Client) Send(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error) {
	var rd io.Reader
	if contentType != "" {
		rd = bytes.NewReader(body)
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
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
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
	e := &Error{Method: method, URL: target.Redacted(), Status: resp.StatusCode}
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
func (c *Client) Room(ctx context.Context, name string) (adminapi.Room, error) {
	var r adminapi.Room
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
func (c *Client) SetState(ctx context.Context, name string, state waitroom.RoomState) error {
	_, err := c.Call(ctx, http.MethodPatch, "/admin/rooms/"+url.PathEscape(name), map[string]waitroom.RoomState{"state": state})
	return err
}

// callFor is Call that also decodes the answer into a T; raw is the answer
// as sent, for printing it as it is.
func callFor[T any](ctx context.Context, c *Client, method, path string, body any) (v T, raw []byte, err error) {
	if raw, err = c.Call(ctx, method, path, body); err != nil {
		return v, nil, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, raw, fmt.Errorf("reading the server's answer: %w", err)
	}
	return v, raw, nil
}

func roomPath(name string) string { return "/admin/rooms/" + url.PathEscape(name) }

// ListRooms reads every room's settings: GET /admin/rooms.
func (c *Client) ListRooms(ctx context.Context) ([]adminapi.Room, []byte, error) {
	list, raw, err := callFor[struct {
		Rooms []adminapi.Room `json:"rooms"`
	}](ctx, c, http.MethodGet, "/admin/rooms", nil)
	return list.Rooms, raw, err
}

// ShowRoom reads a room's settings and figures, measuring admitted/s over
// window; a negative window leaves it to the server (1 s).
func (c *Client) ShowRoom(ctx context.Context, name string, window time.Duration) (adminapi.Room, []byte, error) {
	path := roomPath(name)
	if window >= 0 {
		path += "?window=" + url.QueryEscape(window.String())
	}
	return callFor[adminapi.Room](ctx, c, http.MethodGet, path, nil)
}

// CreateRoom creates a room with settings (JSON field → value); those left
// out take their defaults.
func (c *Client) CreateRoom(ctx context.Context, name string, settings map[string]any) (adminapi.Room, []byte, error) {
	body := maps.Clone(settings)
	if body == nil {
		body = map[string]any{}
	}
	body["name"] = name
	return callFor[adminapi.Room](ctx, c, http.MethodPost, "/admin/rooms", body)
}

// ChangeRoom changes the given settings (JSON field → value) of a room.
func (c *Client) ChangeRoom(ctx context.Context, name string, settings map[string]any) (adminapi.Room, []byte, error) {
	return callFor[adminapi.Room](ctx, c, http.MethodPatch, roomPath(name), settings)
}

// CreatePass mints a pass to room good for uses entries within lifetime.
func (c *Client) CreatePass(ctx context.Context, room string, uses int, lifetime time.Duration) (adminapi.Pass, []byte, error) {
	return callFor[adminapi.Pass](ctx, c, http.MethodPost, roomPath(room)+"/passes", map[string]any{"uses": uses, "expires_in": lifetime.String()})
}

// Passes lists room's passes.
func (c *Client) Passes(ctx context.Context, room string) ([]adminapi.Pass, []byte, error) {
	list, raw, err := callFor[struct {
		Passes []adminapi.Pass `json:"passes"`
	}](ctx, c, http.MethodGet, roomPath(room)+"/passes", nil)
	return list.Passes, raw, err
}

// RevokePass ends one of room's passes at once.
func (c *Client) RevokePass(ctx context.Context, room, id string) (adminapi.Pass, []byte, error) {
	return callFor[adminapi.Pass](ctx, c, http.MethodDelete, roomPath(room)+"/passes/"+url.PathEscape(id), nil)
}

// PassLink is the full link of p on this client's server.
func (c *Client) PassLink(p adminapi.Pass) string {
	return strings.TrimSuffix(c.BaseURL.String(), "/") + p.Link
}

// Entrants reads a scheduled room's draw record and entrants as sent
// (adminapi.Entrants), to verify or to save for anyone to verify.
func (c *Client) Entrants(ctx context.Context, room string) ([]byte, error) {
	return c.Call(ctx, http.MethodGet, roomPath(room)+"/entrants", nil)
}

// WriteIndented writes an answer of the operator API as indented JSON.
func WriteIndented(w io.Writer, raw []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return fmt.Errorf("the server answered something other than JSON: %w", err)
	}
	fmt.Fprintln(w, out.String())
	return nil
}

// WriteRoomTable writes rooms as a table, one room a line.
func WriteRoomTable(w io.Writer, rooms []adminapi.Room) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tRATE\tSLICE\tMAX_QUEUE\tTOKEN_TTL\tLEASE\tMAX_ACTIVE")
	for _, r := range rooms {
		fmt.Fprintf(tw, "%s\t%s\t%g\t%s\t%d\t%s\t%s\t%d\n", r.Name, r.State, r.Rate, r.Slice, r.MaxQueue, r.TokenTTL, r.Lease, r.MaxActive)
	}
	return tw.Flush()
}

// WriteRoomText writes the room's settings and, if it has them, its
// figures, one "name: value" a line.
func WriteRoomText(w io.Writer, r adminapi.Room) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "name:\t%s\n", r.Name)
	fmt.Fprintf(tw, "state:\t%s\n", r.State)
	fmt.Fprintf(tw, "rate:\t%g users/s\n", r.Rate)
	fmt.Fprintf(tw, "slice:\t%s\n", r.Slice)
	fmt.Fprintf(tw, "max queue:\t%d\n", r.MaxQueue)
	fmt.Fprintf(tw, "token ttl:\t%s\n", r.TokenTTL)
	fmt.Fprintf(tw, "lease:\t%s\n", r.Lease)
	fmt.Fprintf(tw, "max active:\t%s\n", countOr(r.MaxActive, "no cap"))
	fmt.Fprintf(tw, "stock:\t%s\n", countOr(r.Stock, "not tracked"))
	fmt.Fprintf(tw, "per order:\t%d units\n", r.UnitsPerOrder)
	if r.OneOrderPerUser {
		fmt.Fprintf(tw, "one order:\tper user\n")
	}
	if r.InviteOnly {
		fmt.Fprintf(tw, "entry:\tinvite only (passes)\n")
	}
	fmt.Fprintf(tw, "abandon:\t%s\n", r.AbandonAfter)
	fmt.Fprintf(tw, "first use:\t%s\n", r.FirstUseWithin)
	if r.OpensAt != "" {
		fmt.Fprintf(tw, "opens at:\t%s (%s)\n", r.OpensAt, r.PrequeueOrder)
	}
	if r.ClosesAt != "" {
		fmt.Fprintf(tw, "closes at:\t%s\n", r.ClosesAt)
	}
	if r.ShopName != "" {
		fmt.Fprintf(tw, "shop:\t%s\n", r.ShopName)
	}
	if r.ProductName != "" {
		fmt.Fprintf(tw, "product:\t%s\n", r.ProductName)
	}
	if r.ShopURL != "" {
		fmt.Fprintf(tw, "shop url:\t%s\n", r.ShopURL)
	}
	if r.Page != "" {
		fmt.Fprintf(tw, "page:\tits own (%.12s)\n", r.Page)
	}
	if f := r.Figures; f != nil {
		fmt.Fprintf(tw, "waiting:\t%d\n", f.Waiting)
		fmt.Fprintf(tw, "live tokens:\t%d\n", f.LiveTokens)
		if f.AdmittedPerSecond != nil {
			fmt.Fprintf(tw, "admitted/s:\t%.1f (over %s)\n", *f.AdmittedPerSecond, f.Window)
		}
		fmt.Fprintf(tw, "entered:\t%d\n", f.Entered)
		fmt.Fprintf(tw, "queue full:\t%d\n", f.QueueFull)
		fmt.Fprintf(tw, "admitted:\t%d\n", f.Admitted)
		fmt.Fprintf(tw, "completed:\t%d\n", f.Completed)
		fmt.Fprintf(tw, "units sold:\t%d\n", f.UnitsSold)
		fmt.Fprintf(tw, "released:\t%d\n", f.Released)
		fmt.Fprintf(tw, "expired:\t%d\n", f.Expired)
		if f.UnitsLeft != nil {
			fmt.Fprintf(tw, "units left:\t%d (sold out: %t)\n", *f.UnitsLeft, f.SoldOut)
		}
		fmt.Fprintf(tw, "no-shows:\t%d\n", f.NoShows)
		fmt.Fprintf(tw, "abandoned:\t%d\n", f.Abandoned)
	}
	return tw.Flush()
}

// countOr is n, or what a setting of 0 means.
func countOr(n int, zero string) string {
	if n == 0 {
		return zero
	}
	return strconv.Itoa(n)
}

// WritePassTable writes passes as a table, one pass a line, with each
// one's link on c's server and its state at now.
func (c *Client) WritePassTable(w io.Writer, passes []adminapi.Pass, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLEFT\tEXPIRES\tSTATE\tLINK")
	for _, p := range passes {
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\n", p.ID, p.Left, p.Uses, p.ExpiresAt.Format(time.RFC3339), p.State(now), c.PassLink(p))
	}
	return tw.Flush()
}

// DrawFile is the public verification file ('waitroom draw export'): the
// draw's record and each entrant's draw value and place, without user ids
// (personal data, and for a cookie visitor what taking its place over
// needs). Anyone can check the draw with it; a user finds their own line
// by computing HMAC-SHA256(seed, their id).
type DrawFile struct {
	Draw     adminapi.DrawRecord     `json:"draw"`
	Entrants []waitroom.DrawnEntrant `json:"entrants"`
}

// PublicDrawFile turns raw, an adminapi.Entrants answer (the operator's export,
// with ids), into the public DrawFile, as indented JSON.
func PublicDrawFile(raw []byte) ([]byte, error) {
	var export adminapi.Entrants
	if err := json.Unmarshal(raw, &export); err != nil {
		return nil, fmt.Errorf("reading the draw: %w", err)
	}
	if export.Draw.State != string(waitroom.DrawDone) || export.Draw.Seed == "" {
		return nil, fmt.Errorf("room %q: the draw is not done; there is no seed to publish yet", export.Draw.Room)
	}
	entrants, err := waitroom.PublicEntrants(export.Draw.Seed, export.Entrants)
	if err != nil {
		return nil, fmt.Errorf("room %q: %s", export.Draw.Room, waitroom.ErrorMessage(err))
	}
	return json.MarshalIndent(DrawFile{Draw: export.Draw, Entrants: entrants}, "", "  ")
}

// DrawFileCheck is what a user brings to CheckDrawFile besides the file.
type DrawFileCheck struct {
	// Commitment is the commitment the user saved before the opening; the
	// record's must be the same. "": not checked.
	Commitment string
	// User, if set, is the user's own id: CheckDrawFile computes its draw
	// value and reports its place in the file.
	User string
}

// CheckDrawFile checks a scheduled room's draw from raw, a public DrawFile or
// an adminapi.Entrants answer (from the server or saved), and writes what it
// finds to w: the seed against the commitment, the list against the
// record's count and digest, then every place that differs. It fails when
// the draw cannot be checked, the record or the list was changed, or a
// place differs.
func CheckDrawFile(w io.Writer, raw []byte, o DrawFileCheck) error {
	// Either file: an entrant has a user id (the operator's), a draw value
	// (the public one) or both.
	var file struct {
		Draw     adminapi.DrawRecord `json:"draw"`
		Entrants []struct {
			User  string `json:"user"`
			Value string `json:"value"`
			Place int64  `json:"place"`
		} `json:"entrants"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		return fmt.Errorf("reading the draw: %w", err)
	}
	d := file.Draw
	if d.State != string(waitroom.DrawDone) || d.Seed == "" || d.Entrants == nil {
		return fmt.Errorf("room %q: the draw is not done; there is no seed to check yet", d.Room)
	}
	if d.Order == string(waitroom.PrequeueFIFO) {
		return fmt.Errorf("room %q places by arrival (fifo): there is no draw to verify", d.Room)
	}
	fail := func(err error) error { return fmt.Errorf("room %q: %s", d.Room, waitroom.ErrorMessage(err)) }
	entrants := make([]waitroom.DrawnEntrant, len(file.Entrants))
	users := make(map[string]string, len(file.Entrants)) // value → user, where the file names them
	for i, e := range file.Entrants {
		entrants[i] = waitroom.DrawnEntrant{Value: e.Value, Place: e.Place}
		if e.User == "" {
			continue
		}
		v, err := waitroom.PublicEntrants(d.Seed, []waitroom.Entrant{{User: e.User}})
		if err != nil {
			return fail(err)
		}
		if e.Value != "" && e.Value != v[0].Value {
			return fmt.Errorf("room %q: entrant %d: %s's draw value is %s, not %s", d.Room, i+1, e.User, v[0].Value, e.Value)
		}
		entrants[i].Value, users[v[0].Value] = v[0].Value, e.User
	}
	diffs, err := waitroom.VerifyDraw(waitroom.DrawRecordCheck{Seed: d.Seed, Commitment: d.Commitment,
		Entrants: *d.Entrants, Digest: d.Digest, SavedCommitment: o.Commitment}, entrants)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(w, "room %s: seed %s matches commitment %s\n", d.Room, d.Seed, d.Commitment)
	fmt.Fprintf(w, "%d entrants, digest %s, as the draw recorded them\n", len(entrants), d.Digest)
	if len(diffs) > 0 {
		for _, df := range diffs {
			who := df.Value
			if u, ok := users[df.Value]; ok {
				who = u
			}
			fmt.Fprintf(w, "%s: place %d, the seed gives %d\n", who, df.Recorded, df.Expected)
		}
		return fmt.Errorf("%d of %d places differ from what the seed gives", len(diffs), len(entrants))
	}
	fmt.Fprintf(w, "all %d places reproduced from the seed\n", len(entrants))
	if o.User == "" {
		return nil
	}
	mine, err := waitroom.PublicEntrants(d.Seed, []waitroom.Entrant{{User: o.User}})
	if err != nil {
		return fail(err)
	}
	for _, e := range entrants {
		if e.Value == mine[0].Value {
			fmt.Fprintf(w, "%s: draw value %s, place %d of %d\n", o.User, e.Value, e.Place, len(entrants))
			return nil
		}
	}
	return fmt.Errorf("room %q: %s (draw value %s) is not among the %d entrants", d.Room, o.User, mine[0].Value, len(entrants))
}
