
CREATE TABLE sol_stake_epochs (
    epoch INTEGER PRIMARY KEY,
    slot INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    last_voter TEXT NOT NULL,
    completed_at INTEGER,
    accounts INTEGER NOT NULL
);
CREATE TABLE sol_stake_accounts (
    epoch INTEGER NOT NULL,
    pubkey TEXT NOT NULL,
    voter TEXT NOT NULL,
    stake INTEGER NOT NULL,
    activation_epoch INTEGER NOT NULL,
    deactivation_epoch INTEGER,
    PRIMARY KEY (epoch, pubkey)
);
CREATE INDEX sol_stake_by_voter ON sol_stake_accounts(voter, pubkey, epoch);
CREATE INDEX sol_stake_by_pubkey ON sol_stake_accounts(pubkey, epoch);
