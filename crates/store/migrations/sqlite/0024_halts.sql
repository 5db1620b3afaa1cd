-- Trading halts stored with downloaded minute bars (where the source knew them: the simulated
-- market), so a replay of those days meets the halts a replay of the source meets. A halt is
-- keyed by its symbol and start; `finish` is when the reopening bar starts (epoch ms).
CREATE TABLE halts (
    symbol      TEXT   NOT NULL,
    start       BIGINT NOT NULL,
    finish      BIGINT NOT NULL,
    reason_code TEXT   NOT NULL,
    reason      TEXT   NOT NULL,
    source      TEXT   NOT NULL,
    PRIMARY KEY (symbol, start)
);
