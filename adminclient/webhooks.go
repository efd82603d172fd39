package adminclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/waitroom/waitroom/webhook"
)

// NewWebhook is the body of POST /admin/webhooks.
type NewWebhook struct {
	URL    string   `json:"url"`
	Rooms  []string `json:"rooms,omitempty"`
	Events []string `json:"events,omitempty"`
}

// Webhooks lists the endpoints, without secrets: GET /admin/webhooks.
func (c *Client) Webhooks(ctx context.Context) ([]webhook.EndpointView, []byte, error) {
	v, raw, err := callFor[struct {
		Endpoints []webhook.EndpointView `json:"endpoints"`
	}](ctx, c, http.MethodGet, "/admin/webhooks", nil)
	return v.Endpoints, raw, err
}

// CreateWebhook adds an endpoint; the answer's Secret is shown only here.
func (c *Client) CreateWebhook(ctx context.Context, w NewWebhook) (webhook.EndpointView, []byte, error) {
	return callFor[webhook.EndpointView](ctx, c, http.MethodPost, "/admin/webhooks", w)
}

// DeleteWebhook removes an endpoint: DELETE /admin/webhooks/{id}.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.Call(ctx, http.MethodDelete, webhookPath(id), nil)
	return err
}

// RotateWebhook gives an endpoint a fresh secret; the old one keeps
// signing beside it for overlap (negative: the server's default).
func (c *Client) RotateWebhook(ctx context.Context, id string, overlap time.Duration) (webhook.EndpointView, []byte, error) {
	body := map[string]any{}
	if overlap >= 0 {
		body["overlap_seconds"] = int64(overlap / time.Second)
	}
	return callFor[webhook.EndpointView](ctx, c, http.MethodPost, webhookPath(id)+"/rotate", body)
}

// DeadLetters reads the newest limit dead letters.
func (c *Client) DeadLetters(ctx context.Context, limit int) ([]webhook.DeadLetter, []byte, error) {
	v, raw, err := callFor[struct {
		Dead []webhook.DeadLetter `json:"dead"`
	}](ctx, c, http.MethodGet, "/admin/webhooks/dead?limit="+strconv.Itoa(limit), nil)
	return v.Dead, raw, err
}

// Redeliver appends a dead letter again, for its endpoint only, with its
// webhook-id unchanged.
func (c *Client) Redeliver(ctx context.Context, id string) ([]byte, error) {
	return c.Call(ctx, http.MethodPost, "/admin/webhooks/dead/"+url.PathEscape(id)+"/redeliver", nil)
}

func webhookPath(id string) string { return "/admin/webhooks/" + url.PathEscape(id) }

// orAll is a filter list as the table shows it: empty takes everything.
func orAll(list []string) string {
	if len(list) == 0 {
		return "all"
	}
	return strings.Join(list, ",")
}

// WriteWebhookTable writes the endpoints, one a line; SECRETS counts the
// secrets signing now (two while a rotation overlaps), and those this
// instance cannot open (sealed under another --cookie-secret).
func WriteWebhookTable(w io.Writer, eps []webhook.EndpointView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tURL\tROOMS\tEVENTS\tSECRETS\tFROM")
	for _, e := range eps {
		from := "admin API"
		if e.Static {
			from = "--webhook-url"
		}
		secrets := strconv.Itoa(len(e.Secrets))
		if n := unreadable(e.Secrets); n > 0 {
			secrets += fmt.Sprintf(" (%d unreadable)", n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.URL, orAll(e.Rooms), orAll(e.Events), secrets, from)
	}
	return tw.Flush()
}

func unreadable(secrets []webhook.SecretView) int {
	n := 0
	for _, s := range secrets {
		if s.Unreadable {
			n++
		}
	}
	return n
}

// WriteDeadTable writes dead letters, newest first as the server sends
// them, with each one's last error.
func WriteDeadTable(w io.Writer, dead []webhook.DeadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tENDPOINT\tEVENT\tROOM\tATTEMPTS\tAT\tLAST ERROR")
	for _, d := range dead {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Endpoint, d.Type, d.Room, d.Attempts, d.At.UTC().Format(time.RFC3339), d.LastError)
	}
	return tw.Flush()
}
