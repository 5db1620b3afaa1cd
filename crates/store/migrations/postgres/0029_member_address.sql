-- Where each `serve` process of a cluster answers the others (its advertised address, null for
-- a worker): the leader keeps the list, so that an emergency halt it cannot store (its own link
-- to the database cut) is stored by a peer for whoever leads next (CONTRACT §10).
ALTER TABLE cluster_members ADD COLUMN advertise_url TEXT;
