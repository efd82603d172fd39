package instance

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/webhook"
)

// MinAdminToken is the shortest Config.AdminToken: a bearer token is a
// password, and a short one is guessed.
const MinAdminToken = 16

// Validate reports the settings of c that the server cannot run with,
// each a *waitroom.SettingError named after its field as a flag would be
// (redis_prefix: --redis-prefix), joined.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, reason string, args ...any) {
		errs = append(errs, &waitroom.SettingError{Fields: []string{field}, Reason: fmt.Sprintf(reason, args...)})
	}
	if c.RedisPrefix == "" || strings.ContainsAny(c.RedisPrefix, "{} \t\r\n") {
		bad("redis_prefix", "must be non-empty, without braces or spaces")
	}
	for _, p := range c.GatedRoutes {
		if err := checkPattern(p); err != nil {
			bad("gated_routes", "route %q: %v", p, err)
			break
		}
	}
	if len(c.GatedRoutes) == 0 {
		bad("gated_routes", "at least one route is required")
	}
	if !validHeaderName(c.UserHeader) {
		bad("user_header", "not a valid header name")
	}
	if len(c.Rooms) == 0 {
		bad("rooms", "at least one room is required; the first is the default room")
	}
	for _, room := range c.Rooms {
		if !waitroom.ValidRoomName(room) {
			bad("rooms", "room %q: names are %s", room, waitroom.RoomNameRule)
			break
		}
	}
	if n := len(c.CookieSecret); n > 0 && n < server.MinCookieSecret {
		bad("cookie_secret", "must be at least %d bytes, got %d", server.MinCookieSecret, n)
	}
	if n := len(c.SettleSecret); n > 0 && n < server.MinCookieSecret {
		bad("settle_secret", "must be at least %d bytes, got %d", server.MinCookieSecret, n)
	}
	if c.AdminToken != "" && (len(c.AdminToken) < MinAdminToken || strings.ContainsAny(c.AdminToken, " \t\r\n")) {
		bad("admin_token", "must be at least %d characters without spaces", MinAdminToken)
	}
	// A certificate is served with its key: one alone is a mistake, not
	// plain HTTP.
	if c.TLSCert != "" && c.TLSKey == "" {
		bad("tls_cert", "needs --tls-key, the certificate's private key")
	}
	if c.TLSKey != "" && c.TLSCert == "" {
		bad("tls_key", "needs --tls-cert, the certificate of the key")
	}
	// The shop's listener settles every order through forward auth, and
	// serves the built-in shop, which an upstream replaces.
	if c.ShopAddr != "" && c.SettleSecret == "" {
		bad("shop_addr", "settles its orders through POST /gate/settle, which is off without --settle-secret")
	}
	if c.ShopAddr != "" && c.Upstream != nil {
		bad("shop_addr", "serves the built-in shop, which --upstream replaces")
	}
	if c.WebhookURL != "" {
		if _, err := webhook.StaticEndpoint(c.WebhookURL, c.WebhookSecrets); err != nil {
			field, reason := "webhook_url", err.Error()
			var in *webhook.InputError
			if errors.As(err, &in) {
				reason = in.Message
				if in.Code == webhook.CodeSecretInvalid {
					field = "webhook_secret"
				}
			}
			bad(field, "%s", reason)
		}
	} else if len(c.WebhookSecrets) > 0 {
		bad("webhook_secret", "signs the messages to --webhook-url, which is not set")
	}
	if (c.SMTPURL != "" || c.VAPIDKeyFile != "") && c.PublicURL == nil {
		bad("public_url", "is where the notices' return links lead; --smtp-url and --vapid-key-file need it")
	}
	if c.VAPIDKeyFile != "" && c.MailFrom == "" && c.PublicURL != nil && c.PublicURL.Scheme != "https" {
		bad("vapid_key_file", "needs --mail-from or an https --public-url: where the push services can reach you (VAPID's subject)")
	}
	if c.SMTPURL != "" {
		if _, err := notify.NewMailer(c.SMTPURL, c.MailFrom); err != nil {
			bad("smtp_url", "%v", err)
		}
	} else if c.MailFrom != "" {
		bad("mail_from", "is the notices' From address; it needs --smtp-url")
	}
	if c.AdminAddr != "" && c.AdminToken == "" {
		bad("admin_addr", "serves the admin API, which is off without --admin-token")
	}
	return errors.Join(errs...)
}

// checkPattern reports whether ServeMux accepts p, turning its panic into
// an error.
func checkPattern(p string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	http.NewServeMux().Handle(p, http.NotFoundHandler())
	return nil
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
