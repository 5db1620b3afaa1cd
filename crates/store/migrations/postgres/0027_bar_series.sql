-- A version per series of bars (a symbol's bars of one timeframe), moved on in the transaction
-- of every write to its bars: a node that keeps bars it read in memory serves them while the
-- version is the one it read them at, and reads them again once another node (or it) wrote.
-- A series written before this table has no row: version 0 until its next write.
CREATE TABLE bar_series (
    symbol    TEXT   NOT NULL,
    timeframe TEXT   NOT NULL,
    version   BIGINT NOT NULL,
    PRIMARY KEY (symbol, timeframe)
);
