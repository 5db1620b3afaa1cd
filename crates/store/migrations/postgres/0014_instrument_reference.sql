-- Reference data is not always known: a real market-data source has no float or sector, so a
-- radar row stores NULL for what neither the imported reference data nor the source knows.
ALTER TABLE radar_rows ALTER COLUMN float_shares DROP NOT NULL;
ALTER TABLE radar_rows ALTER COLUMN sector DROP NOT NULL;

-- Float and sector per symbol as an operator imported them (`tradeops reference import`,
-- `PUT /api/market/reference`); NULL: not given by the import (the market source's value, if
-- any, is used). `imported_at` is epoch ms of the import that wrote the row.
CREATE TABLE instrument_reference (
    symbol       TEXT   PRIMARY KEY,
    float_shares BIGINT,
    sector       TEXT,
    imported_at  BIGINT NOT NULL
);
