package servertest

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// Scrape GETs /metrics over HTTP, as the operator with the admin token,
// and parses the text format.
func Scrape(t *testing.T, baseURL string) Scraped {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", baseURL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return Scraped{T: t, Families: families}
}

type Scraped struct {
	T        *testing.T
	Families map[string]*dto.MetricFamily
}

// Value is the value of the series of name with exactly the given labels
// (name, value pairs); a histogram gives its count. A missing series
// fails the test.
func (s Scraped) Value(name string, labels ...string) float64 {
	s.T.Helper()
	v, ok := s.Lookup(name, labels...)
	require.True(s.T, ok, "no series %s%v", name, labels)
	return v
}

// RequireEach checks the series of name in room, one per value of label.
func (s Scraped) RequireEach(name, room, label string, want map[string]float64) {
	s.T.Helper()
	for v, n := range want {
		require.EqualValues(s.T, n, s.Value(name, "room", room, label, v), "%s{%s=%q}", name, label, v)
	}
}

func (s Scraped) Lookup(name string, labels ...string) (float64, bool) {
	mf := s.Families[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}
