-- The engine's order counter (the N of generated client order ids `to-SYMBOL-YYYYMMDDHHMMSS-N`),
-- kept with the trading state so a restarted engine counts on rather than from 1: a simulated
-- market resumes at the second it stopped in, and an id made again would overwrite the stored
-- order it names.
ALTER TABLE trading_state ADD COLUMN order_sequence BIGINT NOT NULL DEFAULT 0;
