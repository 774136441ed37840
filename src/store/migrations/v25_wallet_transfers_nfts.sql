
CREATE INDEX wallet_transfers_nfts ON wallet_transfers
    (chain, address, block, tx_index, log_index, seq, kind, token, token_id, direction, amount)
    WHERE kind IN ('erc721', 'erc1155');
CREATE INDEX wallet_transfers_erc20 ON wallet_transfers (chain, address, token, block)
    WHERE kind = 'erc20';
