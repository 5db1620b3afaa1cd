-- Reference data is not always known: a real market-data source has no float or sector, so a
-- radar row stores NULL for what neither the imported reference data nor the source knows.
-- SQLite cannot drop a NOT NULL constraint: the table is rebuilt with the same rows.
CREATE TABLE radar_rows_nullable (
    captured_at      BIGINT  NOT NULL,
    rank             BIGINT  NOT NULL,
    symbol           TEXT    NOT NULL,
    price            TEXT    NOT NULL,
    percentage_gain  DOUBLE PRECISION NOT NULL,
    change_1m        DOUBLE PRECISION,
    change_5m        DOUBLE PRECISION,
    volume           BIGINT  NOT NULL,
    average_volume   BIGINT  NOT NULL,
    relative_volume  DOUBLE PRECISION,
    float_shares     BIGINT,
    sector           TEXT,
    PRIMARY KEY (captured_at, rank)
);
INSERT INTO radar_rows_nullable (captured_at, rank, symbol, price, percentage_gain, change_1m, change_5m, volume,
    average_volume, relative_volume, float_shares, sector)
    SELECT captured_at, rank, symbol, price, percentage_gain, change_1m, change_5m, volume,
    average_volume, relative_volume, float_shares, sector FROM radar_rows;
DROP TABLE radar_rows;
ALTER TABLE radar_rows_nullable RENAME TO radar_rows;
CREATE INDEX radar_rows_symbol ON radar_rows (symbol, captured_at);

-- Float and sector per symbol as an operator imported them (`tradeops reference import`,
-- `PUT /api/market/reference`); NULL: not given by the import (the market source's value, if
-- any, is used). `imported_at` is epoch ms of the import that wrote the row.
CREATE TABLE instrument_reference (
    symbol       TEXT   PRIMARY KEY,
    float_shares BIGINT,
    sector       TEXT,
    imported_at  BIGINT NOT NULL
);
