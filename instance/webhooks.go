package instance

import (
	"context"
	"net/http"
	"sync"

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
	d := &webhook.Dispatcher{Log: log, Static: static, Logger: in.Logger}
	em := &webhook.Emitter{Log: log, Active: d.Active, Logger: in.Logger}
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
