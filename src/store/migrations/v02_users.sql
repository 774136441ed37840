
ALTER TABLE users ADD COLUMN wallet_evm TEXT;
ALTER TABLE users ADD COLUMN wallet_solana TEXT;
CREATE UNIQUE INDEX users_wallet_evm ON users(wallet_evm) WHERE wallet_evm IS NOT NULL;
CREATE UNIQUE INDEX users_wallet_solana ON users(wallet_solana) WHERE wallet_solana IS NOT NULL;
CREATE INDEX api_keys_user ON api_keys(user_id);
-- At most one active default key per user, whatever races the application loses.
CREATE UNIQUE INDEX api_keys_one_default ON api_keys(user_id)
    WHERE is_default = 1 AND revoked_at IS NULL;
CREATE TABLE sessions (
    token_sha256 BLOB PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    provider TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE login_codes (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL,
    code_sha256 BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    used_at INTEGER
);
CREATE INDEX login_codes_email ON login_codes(email, created_at);
CREATE TABLE challenges (
    nonce TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);
