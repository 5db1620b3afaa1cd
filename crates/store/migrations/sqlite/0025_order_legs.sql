-- The exits an order carries to the broker (CONTRACT §11), as JSON
-- `{"stop_price", "stop_limit_price"?, "take_profit"?}`: on a BUY, the legs to place when it
-- fills; on a SELL, the protective order's own stop and target. Null for every other order.
ALTER TABLE orders ADD COLUMN legs TEXT;
