package server

import "testing"

func TestWantsJSON(t *testing.T) {
	t.Parallel()
	for accept, want := range map[string]bool{
		"": false,
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": false,
		"*/*":                               false,
		"application/json":                  true,
		"Application/JSON":                  true,
		"application/json, text/plain, */*": true,
		"text/html, application/json":       false,
		"application/json, text/html":       true,
		"text/html;q=0.5, application/json": true,
		"application/json;q=0.1, text/html": false,
		"application/json;q=0":              false,
		"application/json;q=oops":           true,
		"garbage;;;, application/json":      true,
	} {
		if got := wantsJSON(accept); got != want {
			t.Errorf("wantsJSON(%q) = %v, want %v", accept, got, want)
		}
	}
}

func TestPageText(t *testing.T) {
	t.Parallel()
	for est, want := range map[[3]int64]string{ // eta, low, high
		{0, 0, 2}: "less than a minute", {40, 20, 59}: "less than a minute",
		{70, 50, 80}: "about a minute", {600, 590, 610}: "about 10 minutes",
		{750, 720, 900}: "about 12–15 minutes", {100, 50, 150}: "about 1–3 minutes",
		{3000, 2700, 3700}: "about 45–62 minutes", {3600, 3300, 3900}: "about 1 h",
		{3900, 3600, 4200}: "about 1 h 5 min", {7200, 6000, 8000}: "about 2 h",
	} {
		if got := waitText(est[0], est[1], est[2]); got != want {
			t.Errorf("waitText(%v) = %q, want %q", est, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 12345: "12,345", 100000: "100,000", 1234567: "1,234,567"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
	for ms, want := range map[int64]string{-5: "0:00", 999: "0:00", 1000: "0:01", 299_999: "4:59", 300_000: "5:00"} {
		if got := clockText(ms); got != want {
			t.Errorf("clockText(%d) = %q, want %q", ms, got, want)
		}
	}
	for _, tt := range []struct {
		from, position int64
		want           int
	}{{1, 1, 100}, {5, 5, 0}, {5, 3, 50}, {5, 1, 100}, {3, 7, 0}, {101, 2, 99}} {
		if got := progress(tt.from, tt.position); got != tt.want {
			t.Errorf("progress(%d, %d) = %d, want %d", tt.from, tt.position, got, tt.want)
		}
	}
}

func TestOrderPathOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		gated []string
		want  string
	}{
		{[]string{"POST /orders"}, "/orders"},
		{[]string{"GET /orders/{id}", "POST /api/orders"}, "/api/orders"},
		{[]string{"POST /orders/{sku}"}, ""},
		{[]string{"/orders"}, ""},
		{[]string{"POST shop.example/orders"}, ""},
	} {
		if got := orderPathOf(tt.gated); got != tt.want {
			t.Errorf("orderPathOf(%q) = %q, want %q", tt.gated, got, tt.want)
		}
	}
}
