-- The reference shop: products with stock, single-use coupons, orders keyed
-- by the waiting room's idempotency key, and the transactional outbox.

CREATE TABLE products (
    id    text   PRIMARY KEY,
    name  text   NOT NULL,
    stock bigint NOT NULL CHECK (stock >= 0)
);

CREATE TABLE coupons (
    id       text    PRIMARY KEY,
    owner    text    NOT NULL,
    discount integer NOT NULL CHECK (discount BETWEEN 1 AND 100),
    used     boolean NOT NULL DEFAULT false
);

CREATE TABLE orders (
    id              text        PRIMARY KEY,
    user_id         text        NOT NULL,
    product_id      text        NOT NULL REFERENCES products (id),
    quantity        integer     NOT NULL CHECK (quantity > 0),
    coupon_id       text        REFERENCES coupons (id),
    idempotency_key text        NOT NULL UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- A coupon buys one order, even if the application check were bypassed.
CREATE UNIQUE INDEX orders_coupon_once ON orders (coupon_id) WHERE coupon_id IS NOT NULL;

CREATE TABLE outbox (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id   text        NOT NULL UNIQUE,
    order_id   text        NOT NULL REFERENCES orders (id),
    type       text        NOT NULL,
    payload    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);

-- The relay scans only what is pending, oldest first.
CREATE INDEX outbox_pending ON outbox (id) WHERE sent_at IS NULL;
