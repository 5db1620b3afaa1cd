-- A day's orders newest first (GET /api/orders) read straight from an index, in page order,
-- with no scan of other days and no sort; it covers what the (trading_date, created_at) index
-- served. And a change counter of orders and executions, moved in every transaction that writes
-- them: completed trades (built from every order) are rebuilt when it moves, and reading it is
-- one row instead of counting both tables at every request.
CREATE INDEX orders_day_page ON orders (trading_date, created_at, client_order_id);
DROP INDEX orders_date;

CREATE TABLE orders_changes (
    id   BIGINT PRIMARY KEY,
    seq  BIGINT NOT NULL
);
INSERT INTO orders_changes (id, seq) VALUES (1, 0);
