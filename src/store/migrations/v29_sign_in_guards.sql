
CREATE TABLE sign_in_guards (
    email TEXT NOT NULL,
    client TEXT NOT NULL,
    failures INTEGER NOT NULL,
    last_failure INTEGER NOT NULL,
    locked_until INTEGER NOT NULL,
    PRIMARY KEY (email, client)
);
