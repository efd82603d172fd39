package instance

import (
	"context"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/webhook"
)

// webhooks is the instance's webhook machinery: the log (in Redis beside
// the rooms, else this process's own), the emitter the hooks feed, the
// dispatcher and the watcher.
type webhooks struct {
	log        webhook.Log
	emitter    *webhook.Emitter
	dispatcher *webhook.Dispatcher
	watcher    *webhook.Watcher
	admin      *webhook.Admin
	stop       context.CancelFunc
	done       sync.WaitGroup
}

// newWebhooks builds the machinery on store's Redis, or in process; the
// endpoint of --webhook-url if set.
func (in *Instance) newWebhooks(store waitroom.Store) (*webhooks, error) {
	var static []webhook.Endpoint
	if in.Config.WebhookURL != "" {
		ep, err := webhook.StaticEndpoint(in.Config.WebhookURL, in.Config.WebhookSecrets)
		if err != nil {
			return nil, err
		}
		static = append(static, ep)
	}
	var log webhook.Log = webhook.NewMemLog()
	if rs, ok := store.(*redisstore.Store); ok {
		log = webhook.NewRedisLog(rs.Client(), rs.Prefix())
	}
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "waitroom_webhook_deliveries_total",
		Help: "Webhook messages this instance sent, by endpoint and outcome: delivered (2xx), failed (to be retried), dead (dead-lettered after the retry budget)."},
		[]string{"endpoint", "outcome"})
	d := &webhook.Dispatcher{Log: log, Static: static, Logger: in.Logger,
		OnOutcome: func(endpoint, outcome string) { deliveries.WithLabelValues(endpoint, outcome).Inc() }}
	em := &webhook.Emitter{Log: log, Active: d.Active, Logger: in.Logger}
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "waitroom_webhook_events_dropped_total",
		Help: "Webhook events this instance dropped because its buffer was full while the log could not be written."},
		func() float64 { return float64(em.Dropped()) })
	// The server's registry, with the Go and process metrics it would
	// make itself.
	in.registry = prometheus.NewRegistry()
	if err := in.registry.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), deliveries, dropped} {
		if err := in.registry.Register(c); err != nil {
			return nil, err
		}
	}
	return &webhooks{
		log: log, emitter: em, dispatcher: d,
		watcher: &webhook.Watcher{Log: log, Emitter: em, Owns: d.Owns},
		admin:   &webhook.Admin{Log: log, Static: static, Logger: in.Logger},
	}, nil
}

// routes adds the admin API's webhook routes to admin.
func (w *webhooks) routes(admin map[string]http.Handler) {
	for p, h := range w.admin.Routes() {
		admin[p] = h
	}
}

// start runs the emitter, the dispatcher and the watcher (on the guarded
// store) until close.
func (w *webhooks) start(ctx context.Context, store waitroom.Store) {
	ctx, w.stop = context.WithCancel(context.WithoutCancel(ctx))
	w.watcher.Store = store
	w.done.Go(func() { _ = w.emitter.Run(ctx) })
	w.done.Go(func() { _ = w.dispatcher.Run(ctx) })
	w.done.Go(func() { _ = w.watcher.Run(ctx) })
}

// close stops them; the emitter appends what it holds first.
func (w *webhooks) close() {
	if w.stop != nil {
		w.stop()
		w.done.Wait()
	}
}
