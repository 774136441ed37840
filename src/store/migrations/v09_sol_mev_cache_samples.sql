
CREATE TABLE sol_mev_cache_samples (
    host TEXT NOT NULL,
    at INTEGER NOT NULL,
    hits_total INTEGER NOT NULL,
    increase INTEGER NOT NULL,
    interval_ms INTEGER NOT NULL,
    PRIMARY KEY (host, at)
);
CREATE INDEX sol_mev_cache_by_time ON sol_mev_cache_samples(at);
