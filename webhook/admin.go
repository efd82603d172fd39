package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/jsonhttp"
)

// Admin is the operator's API for webhooks, served under /admin/ behind
// the admin token (server.Config.AdminRoutes):
//
//	GET    /admin/webhooks                        the endpoints, without secrets
//	POST   /admin/webhooks                        {"url","rooms","events","secret"} → 201, the secret shown once
//	DELETE /admin/webhooks/{id}                   204
//	POST   /admin/webhooks/{id}/rotate            {"secret","overlap_seconds"} → 200, the new secret shown once
//	GET    /admin/webhooks/dead?limit=N           the dead letters, newest first
//	POST   /admin/webhooks/dead/{id}/redeliver    202: appended again, for its endpoint only
type Admin struct {
	Log    Log
	Static []Endpoint
	// Now is the clock of creation and rotation times; nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Changed, when set, is called after an endpoint was created,
	// rotated or deleted (the instance's Dispatcher.LoadEndpoints), so
	// this instance signs with a new secret from its next delivery on,
	// not from its next step.
	Changed func(context.Context) error
}

// changed tells Changed; its failure is only logged: the endpoint is
// stored, and the dispatcher's next step reads it anyway.
func (a *Admin) changed(ctx context.Context) {
	if a.Changed == nil {
		return
	}
	if err := a.Changed(ctx); err != nil {
		a.logger().WarnContext(ctx, "reloading the webhook endpoints after a change failed; the next step reads them", "err", err)
	}
}

// Routes are Admin's ServeMux patterns and handlers.
func (a *Admin) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /admin/webhooks":                      a.serve(a.list),
		"POST /admin/webhooks":                     a.serve(a.create),
		"DELETE /admin/webhooks/{id}":              a.serve(a.remove),
		"POST /admin/webhooks/{id}/rotate":         a.serve(a.rotate),
		"GET /admin/webhooks/dead":                 a.serve(a.dead),
		"POST /admin/webhooks/dead/{id}/redeliver": a.serve(a.redeliver),
	}
}

func (a *Admin) now() time.Time { return nowOf(a.Now) }

func (a *Admin) logger() *slog.Logger { return loggerOf(a.Logger) }

// serve answers h's error with its code: an InputError 400, ErrNotFound
// 404, a waitroom error by its own status, anything else 503 (the log's
// store did not answer).
func (a *Admin) serve(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		var in *InputError
		var we *waitroom.Error
		switch {
		case err == nil:
		case errors.As(err, &in):
			status := http.StatusBadRequest
			switch in.Code {
			case CodeNotFound, CodeDeadNotFound:
				status = http.StatusNotFound
			case CodeStatic, CodeTooMany:
				status = http.StatusConflict
			}
			jsonhttp.Error(w, status, in.Code, in.Message)
		case errors.As(err, &we) && we.Status != 0:
			jsonhttp.Error(w, we.Status, we.Code, we.Message)
		default:
			a.logger().ErrorContext(r.Context(), "webhook admin call failed", "path", r.URL.Path, "err", err)
			jsonhttp.RetryAfter(w, time.Second)
			jsonhttp.Error(w, http.StatusServiceUnavailable, waitroom.ErrStoreUnavailable.Code, "the webhook log is unavailable")
		}
	})
}

func (a *Admin) all(ctx context.Context) ([]Endpoint, error) {
	stored, err := a.Log.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	return append(append([]Endpoint{}, a.Static...), stored...), nil
}

func (a *Admin) list(w http.ResponseWriter, r *http.Request) error {
	eps, err := a.all(r.Context())
	if err != nil {
		return err
	}
	out := make([]EndpointView, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.Redacted())
	}
	jsonhttp.Write(w, http.StatusOK, map[string]any{"endpoints": out, "events": Types})
	return nil
}

type createBody struct {
	URL    string   `json:"url"`
	Rooms  []string `json:"rooms"`
	Events []string `json:"events"`
	// Secret, if given, is used instead of a fresh one (a receiver that
	// already has it).
	Secret string `json:"secret"`
}

func decode(r *http.Request, v any) error {
	if err := jsonhttp.Decode(r, v); err != nil {
		return waitroom.BadRequest(err.Error())
	}
	return nil
}

func (a *Admin) create(w http.ResponseWriter, r *http.Request) error {
	var body createBody
	if err := decode(r, &body); err != nil {
		return err
	}
	secret := body.Secret
	if secret == "" {
		secret = NewSecret()
	}
	e := Endpoint{ID: "ep_" + waitroom.NewToken()[:16], URL: body.URL, Rooms: body.Rooms, Events: body.Events,
		Secrets: []Secret{{Value: secret}}, Created: a.now().UTC()}
	if err := e.Check(); err != nil {
		return err
	}
	eps, err := a.all(r.Context())
	if err != nil {
		return err
	}
	if len(eps) >= MaxEndpoints {
		return inputErr(CodeTooMany, "at most %d webhook endpoints; delete one first", MaxEndpoints)
	}
	// The group first: an endpoint listed is one whose events are kept.
	if err := a.Log.AddGroup(r.Context(), e.ID); err != nil {
		return err
	}
	if err := a.Log.PutEndpoint(r.Context(), e); err != nil {
		return err
	}
	a.changed(r.Context())
	a.logger().InfoContext(r.Context(), "webhook endpoint created", "id", e.ID, "url", e.URL, "rooms", e.Rooms, "events", e.Events, "remote", r.RemoteAddr)
	v := e.Redacted()
	v.Secret = secret
	jsonhttp.Write(w, http.StatusCreated, v)
	return nil
}

// stored returns the admin API's endpoint id: a flag's is WEBHOOK_STATIC,
// none WEBHOOK_NOT_FOUND.
func (a *Admin) stored(ctx context.Context, id string) (Endpoint, error) {
	for _, e := range a.Static {
		if e.ID == id {
			return Endpoint{}, inputErr(CodeStatic, "endpoint %s is configured by --webhook-url; change the flags", id)
		}
	}
	eps, err := a.Log.Endpoints(ctx)
	if err != nil {
		return Endpoint{}, err
	}
	for _, e := range eps {
		if e.ID == id {
			return e, nil
		}
	}
	return Endpoint{}, inputErr(CodeNotFound, "no webhook endpoint %q", id)
}

func (a *Admin) remove(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := a.stored(r.Context(), id); err != nil {
		return err
	}
	if err := a.Log.DeleteEndpoint(r.Context(), id); errors.Is(err, ErrNotFound) {
		return inputErr(CodeNotFound, "no webhook endpoint %q", id)
	} else if err != nil {
		return err
	}
	if err := a.Log.RemoveGroup(r.Context(), id); err != nil {
		a.logger().WarnContext(r.Context(), "removing a webhook endpoint's consumer groups failed", "id", id, "err", err)
	}
	a.changed(r.Context())
	a.logger().InfoContext(r.Context(), "webhook endpoint deleted", "id", id, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type rotateBody struct {
	Secret         string `json:"secret"`
	OverlapSeconds *int64 `json:"overlap_seconds"`
}

func (a *Admin) rotate(w http.ResponseWriter, r *http.Request) error {
	var body rotateBody
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	overlap := DefaultOverlap
	if body.OverlapSeconds != nil {
		overlap = time.Duration(*body.OverlapSeconds) * time.Second
		if *body.OverlapSeconds < 0 || overlap > MaxOverlap {
			return inputErr(CodeOverlap, "overlap_seconds is in [0, %d]", int64(MaxOverlap/time.Second))
		}
	}
	secret := body.Secret
	if secret == "" {
		secret = NewSecret()
	}
	if err := CheckSecret(secret); err != nil {
		return err
	}
	e, err := a.stored(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	e.Rotate(secret, a.now().UTC(), overlap)
	if err := a.Log.PutEndpoint(r.Context(), e); err != nil {
		return err
	}
	a.changed(r.Context())
	a.logger().InfoContext(r.Context(), "webhook secret rotated", "id", e.ID, "overlap", overlap, "remote", r.RemoteAddr)
	v := e.Redacted()
	v.Secret = secret
	jsonhttp.Write(w, http.StatusOK, v)
	return nil
}

// MaxDeadListed bounds GET /admin/webhooks/dead's limit; DefaultDeadListed
// is its default.
const (
	MaxDeadListed     = 1000
	DefaultDeadListed = 100
)

func (a *Admin) dead(w http.ResponseWriter, r *http.Request) error {
	limit := DefaultDeadListed
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxDeadListed {
			return waitroom.BadRequest(fmt.Sprintf("limit: %q is not a number in [1, %d]", v, MaxDeadListed))
		}
		limit = n
	}
	list, err := a.Log.Dead(r.Context(), limit)
	if err != nil {
		return err
	}
	if list == nil {
		list = []DeadLetter{}
	}
	jsonhttp.Write(w, http.StatusOK, map[string]any{"dead": list})
	return nil
}

func (a *Admin) redeliver(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	d, err := a.Log.TakeDead(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		return inputErr(CodeDeadNotFound, "no dead letter %q", id)
	}
	if err != nil {
		return err
	}
	// The same webhook-id: a receiver that took it after all drops it.
	e := Entry{Event: Event{ID: d.EventID, Version: Version, Type: d.Type, Room: d.Room}, Body: d.Body, Since: a.now(), Only: d.Endpoint}
	if err := a.Log.Append(r.Context(), []Entry{e}); err != nil {
		// Put back, so that it is not lost with the failed append.
		_ = a.Log.AddDead(context.WithoutCancel(r.Context()), d)
		return err
	}
	a.logger().InfoContext(r.Context(), "webhook dead letter redelivered", "id", id, "endpoint", d.Endpoint, "event", d.EventID, "remote", r.RemoteAddr)
	jsonhttp.Write(w, http.StatusAccepted, map[string]string{"id": id, "event_id": d.EventID, "endpoint": d.Endpoint})
	return nil
}
