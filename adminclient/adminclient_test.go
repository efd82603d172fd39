package adminclient_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/adminclient"
)

// A refusal with the API's error body and a proxy's bare error page both
// come back as *Error, with the password kept out of the URL.
func TestClientErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer right-token" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"UNAUTHORIZED","message":"bad token"}}`))
			return
		}
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	base, err := url.Parse(srv.URL)
	require.NoError(t, err)
	base.User = url.UserPassword("ops", "secret")

	for _, tc := range []struct {
		token, code, text string
		status            int
	}{
		{"wrong-token", "UNAUTHORIZED", ": 401 UNAUTHORIZED: bad token", http.StatusUnauthorized},
		{"right-token", "", ": 502 Bad Gateway", http.StatusBadGateway},
	} {
		c := &adminclient.Client{BaseURL: base, Token: tc.token}
		_, err := c.Room(t.Context(), "sale")
		var e *adminclient.Error
		require.True(t, errors.As(err, &e), "%v", err)
		require.Equal(t, tc.status, e.Status)
		require.Equal(t, tc.code, e.Code)
		require.Contains(t, err.Error(), "GET ")
		require.Contains(t, err.Error(), "/admin/rooms/sale?window=0"+tc.text)
		require.NotContains(t, err.Error(), "secret")
	}
}
