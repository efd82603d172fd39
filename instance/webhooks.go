package instance

import (
	"context"
	"net/http"
	"sync"
	"time"

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

	mu   sync.Mutex // start, stop and close, one at a time
	stop context.CancelFunc
	done sync.WaitGroup
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
		rl := webhook.NewRedisLog(rs.Client(), rs.Prefix())
		// Sealed under the cookie secret every instance shares; a random
		// one would not open after a restart.
		if len(in.Config.CookieSecret) > 0 {
			rl.Secrets = webhook.NewSecretSealer(in.Config.CookieSecret)
		}
		log = rl
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
	watcher := &webhook.Watcher{Log: log, Emitter: em, Owns: d.Owns, Endpoints: d.Endpoints, Logger: in.Logger}
	outboxLost := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "waitroom_webhook_outbox_lost_total",
		Help: "Per-user webhook events this instance found dropped unrelayed: a room's outbox was full while no relay could append to the log."},
		func() float64 { return float64(watcher.OutboxLost()) })
	// The server's registry, with the Go and process metrics it would
	// make itself.
	in.registry = prometheus.NewRegistry()
	if err := in.registry.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), deliveries, dropped, outboxLost} {
		if err := in.registry.Register(c); err != nil {
			return nil, err
		}
	}
	return &webhooks{
		log: log, emitter: em, dispatcher: d,
		watcher: watcher,
		admin:   &webhook.Admin{Log: log, Static: static, Logger: in.Logger, Changed: d.LoadEndpoints},
	}, nil
}

// routes adds the admin API's webhook routes to admin.
func (w *webhooks) routes(admin map[string]http.Handler) {
	for p, h := range w.admin.Routes() {
		admin[p] = h
	}
}

// start runs the emitter, the dispatcher and the watcher (on the guarded
// store) until close. First, before the admitter starts, it marks the
// outbox of every room as the endpoints want it, so that the first
// admissions are told too; a log or store that does not answer leaves
// that to the watcher's first ticks.
func (w *webhooks) start(ctx context.Context, store waitroom.Store) {
	if err := w.run(ctx, store); err != nil {
		w.watcher.Logger.Warn("marking the rooms' webhook outboxes at start failed; the watcher marks them within seconds", "err", err)
	}
}

// run is start, saying whether the marking failed; while they run
// already it only marks.
func (w *webhooks) run(ctx context.Context, store waitroom.Store) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	running := w.stop != nil
	if !running {
		w.watcher.Store = store
	}
	mctx, cancel := context.WithTimeout(ctx, markTimeout)
	defer cancel()
	err := w.dispatcher.LoadEndpoints(mctx)
	var rooms []string
	if err == nil {
		rooms, err = store.Rooms(mctx)
	}
	if err == nil {
		err = w.watcher.Mark(mctx, rooms...)
	}
	if !running {
		ctx, w.stop = context.WithCancel(context.WithoutCancel(ctx))
		w.done.Go(func() { _ = w.emitter.Run(ctx) })
		w.done.Go(func() { _ = w.dispatcher.Run(ctx) })
		w.done.Go(func() { _ = w.watcher.Run(ctx) })
	}
	return err
}

// pause stops them as close does, then turns every room's outbox off:
// the instance goes on as one whose webhooks know no endpoint, without
// even their idle reads, until run starts them again.
func (w *webhooks) pause(ctx context.Context, store waitroom.Store) error {
	w.close()
	ctx, cancel := context.WithTimeout(ctx, markTimeout)
	defer cancel()
	rooms, err := store.Rooms(ctx)
	if err != nil {
		return err
	}
	return w.watcher.Unmark(ctx, rooms...)
}

// markTimeout bounds start's marking of the rooms' outboxes.
const markTimeout = 5 * time.Second

// roomChanged tells an operator's change of a room, and marks a room it
// created before anyone can be queued there.
func (w *webhooks) roomChanged(room string, from, to waitroom.RoomConfig, created bool) {
	w.emitter.RoomChanged(room, from, to, created)
	if created {
		ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
		defer cancel()
		if err := w.watcher.Mark(ctx, room); err != nil {
			w.watcher.Logger.Warn("marking a new room's webhook outbox failed; the watcher marks it within seconds", "room", room, "err", err)
		}
	}
}

// close stops them; the emitter appends what it holds first.
func (w *webhooks) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
		w.done.Wait()
		w.stop = nil
	}
}
