package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
	"github.com/waitroom/waitroom/shop/postgres"
	"github.com/waitroom/waitroom/shop/rabbitmq"
)

// maxDBPool bounds --db-pool: PostgreSQL's own max_connections is rarely
// above a few hundred.
const maxDBPool = 10_000

// builtinShop is the reference order API served behind the gate when no
// upstream is configured.
type builtinShop struct {
	store shop.Store
	close func()
	relay *rabbitmq.Relay // nil: no broker configured
}

// openShop opens the shop's store (PostgreSQL, or in process), creates the
// configured products and prepares the outbox relay.
func (m *Main) openShop(ctx context.Context) (*builtinShop, error) {
	log := m.Logger
	b := &builtinShop{close: func() {}}
	var outbox shop.Outbox
	if m.Config.DatabaseURL == "" {
		log.Warn("no --database-url: the built-in shop keeps orders in this process only; they are lost on restart")
		st := inmem.New()
		b.store, outbox = st, st
	} else {
		st, err := postgres.Open(ctx, postgres.Config{URL: m.Config.DatabaseURL, MaxConns: int32(m.Config.DBPool), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("shop database at %s: %w", redactURL(m.Config.DatabaseURL), err)
		}
		b.store, outbox, b.close = st, st, st.Close
	}
	for _, p := range m.Config.Products {
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
	if m.Config.AMQPURL == "" {
		log.Warn("no --amqp-url: order events wait in the outbox until a relay runs")
		return b, nil
	}
	relay, err := rabbitmq.NewRelay(outbox, rabbitmq.Config{URL: m.Config.AMQPURL, Logger: log})
	if err != nil {
		b.close()
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	b.relay = relay
	return b, nil
}

// parseProducts reads "id:stock,id:stock".
func parseProducts(v rawValue) ([]shop.Product, error) {
	var out []shop.Product
	seen := map[string]bool{}
	for _, item := range splitList(v.text) {
		id, stockText, ok := strings.Cut(item, ":")
		if !ok {
			return nil, v.fail(fmt.Sprintf("%q: want id:stock", item))
		}
		stock, err := strconv.ParseInt(strings.TrimSpace(stockText), 10, 64)
		if err != nil || stock < 0 || stock > shop.MaxStock {
			return nil, v.fail(fmt.Sprintf("%q: stock must be a whole number in [0, %d]", item, shop.MaxStock))
		}
		p := shop.Product{ID: strings.TrimSpace(id), Name: strings.TrimSpace(id), Stock: stock}
		if err := p.Validate(); err != nil {
			return nil, v.fail(fmt.Sprintf("%q: %v", item, err))
		}
		if seen[p.ID] {
			return nil, v.fail(fmt.Sprintf("product %q given twice", p.ID))
		}
		seen[p.ID] = true
		out = append(out, p)
	}
	return out, nil
}
