package instance

import (
	"context"
	"errors"
	"fmt"

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
