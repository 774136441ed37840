
ALTER TABLE login_codes ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE INDEX login_codes_client ON login_codes(client, created_at);
ALTER TABLE challenges ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE INDEX challenges_client ON challenges(client, expires_at);
CREATE INDEX challenges_subject ON challenges(subject, expires_at);
CREATE TABLE login_guards (
    email TEXT PRIMARY KEY,
    failures INTEGER NOT NULL,
    last_failure INTEGER NOT NULL,
    locked_until INTEGER NOT NULL
);
-- Scopes are enforced from this version on: a key made without any (the CLI's old
-- default) keeps what it could do, reads and writes.
UPDATE api_keys SET scopes = '["rpc:read","rpc:write"]' WHERE scopes = '[]';
