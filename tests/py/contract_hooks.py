"""Schemathesis hooks for the contract test (SCHEMATHESIS_HOOKS=contract_hooks): how to
generate the string formats the contract names that JSON Schema cannot spell out.

A Solana public key is base58 of exactly 32 bytes and a signature of exactly 64; no
pattern says "decodes to n bytes", so the contract names the formats and this module
teaches the generator them. Negative tests still send strings outside the pattern.
A key's `expires_at` must be in the future: `future-date-time` is an RFC 3339 time a day
to ten years ahead.
"""

from datetime import datetime, timedelta, timezone

import schemathesis
from hypothesis import strategies as st

from base58_codec import encode


def base58_of(n):
    return st.binary(min_size=n, max_size=n).map(encode)


schemathesis.openapi.format("solana-pubkey", base58_of(32))
schemathesis.openapi.format("solana-signature", base58_of(64))


def future_rfc3339():
    now = datetime.now(timezone.utc)
    return st.integers(min_value=86_400, max_value=10 * 365 * 86_400).map(
        lambda secs: (now + timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%SZ"))


schemathesis.openapi.format("future-date-time", future_rfc3339())
