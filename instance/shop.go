package instance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/waitroom/waitroom/jsonhttp"
	"github.com/waitroom/waitroom/server"

	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
	"github.com/waitroom/waitroom/shop/postgres"
	"github.com/waitroom/waitroom/shop/rabbitmq"
)

// MaxDBPool bounds Config.DBPool: PostgreSQL's own max_connections is
// rarely above a few hundred.
const MaxDBPool = 10_000

// builtinShop is the reference order API served behind the gate when no
// upstream is configured.
type builtinShop struct {
	store shop.Store
	close func()
	relay *rabbitmq.Relay // nil: no broker configured
}

// openShop opens the shop's store (PostgreSQL, or in process), creates the
// configured products and prepares the outbox relay.
func (in *Instance) openShop(ctx context.Context) (*builtinShop, error) {
	log := in.Logger
	b := &builtinShop{close: func() {}}
	var outbox shop.Outbox
	if in.Config.DatabaseURL == "" {
		log.Warn("no --database-url: the built-in shop keeps orders in this process only; they are lost on restart")
		st := inmem.New()
		b.store, outbox = st, st
	} else {
		st, err := postgres.Open(ctx, postgres.Config{URL: in.Config.DatabaseURL, MaxConns: int32(in.Config.DBPool), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("shop database at %s: %w", RedactURL(in.Config.DatabaseURL), err)
		}
		b.store, outbox, b.close = st, st, st.Close
	}
	for _, p := range in.Config.Products {
		err := b.store.CreateProduct(ctx, p)
		switch {
		case err == nil:
			log.Info("product created", "product", p.ID, "stock", p.Stock)
		case errors.Is(err, shop.ErrProductExists):
			log.Info("product exists; keeping its stock", "product", p.ID)
		default:
			b.close()
			return nil, fmt.Errorf("creating product %s: %w", p.ID, err)
		}
	}
	if in.Config.AMQPURL == "" {
		log.Warn("no --amqp-url: order events wait in the outbox until a relay runs")
		return b, nil
	}
	relay, err := rabbitmq.NewRelay(outbox, rabbitmq.Config{URL: in.Config.AMQPURL, Logger: log})
	if err != nil {
		b.close()
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	b.relay = relay
	return b, nil
}

// settlingShop is what --shop-addr serves: the built-in shop's POST
// /orders for a proxy's forward auth, each order settled with srv's own
// POST /gate/settle, in process (no address, TLS or dial to configure, and
// the same route and secret check an outside shop's settle takes). An
// order must carry the headers its hold was given with, so a client that
// reaches this listener past the proxy cannot order as anyone.
func (in *Instance) settlingShop(orders http.Handler, srv *server.Server) http.Handler {
	settler := &server.Settler{
		// A forged or altered order is refused before the shop sees it.
		Check:  srv.CheckHold,
		URL:    "http://waitroom.invalid/gate/settle", // served in process: never dialled
		Secret: in.Config.SettleSecret,
		Client: &http.Client{Transport: handlerTransport{srv}},
		Logger: in.Logger,
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", settler.Wrap(orders))
	// Nothing else: the owner reads an order on the waiting room's own
	// listener, where the user is known.
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		jsonhttp.Error(w, http.StatusNotFound, "NOT_FOUND", "the shop's listener serves POST /orders only")
	}))
	return mux
}

// handlerTransport answers a request with h in process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// As a server would receive it, from loopback.
	in := req.Clone(req.Context())
	in.RequestURI, in.RemoteAddr = req.URL.RequestURI(), "127.0.0.1:0"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	rec := &recorded{header: http.Header{}}
	t.h.ServeHTTP(rec, in)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{Status: http.StatusText(rec.status), StatusCode: rec.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req}, nil
}

// recorded is a response written in process.
type recorded struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorded) Header() http.Header { return r.header }
func (r *recorded) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
}
func (r *recorded) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
