
CREATE TABLE cl_capacity (
    minute INTEGER NOT NULL,
    host TEXT NOT NULL,
    family TEXT NOT NULL,
    peak_rps INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    failures INTEGER NOT NULL,
    PRIMARY KEY (minute, host)
);
