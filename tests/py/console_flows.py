"""Console sign-in flows against a running chainedge, with real client libraries:
SMTP delivery to a real SMTP server (aiosmtpd), an EVM wallet (eth-account,
EIP-191 personal_sign) and a Solana wallet (PyNaCl, ed25519).

Usage: console_flows.py BASE_URL SMTP_PORT   (exit status 0 = every check passed)
"""
import asyncio
import http.cookiejar
import json
import re
import sys
import threading
import time
import urllib.error
import urllib.request

from aiosmtpd.controller import Controller
from eth_account import Account
from eth_account.messages import encode_defunct
import nacl.signing
from base58_codec import encode as b58encode

BASE, SMTP_PORT = sys.argv[1], int(sys.argv[2])


class Client:
    """A cookie-keeping HTTP client, like a browser on the console origin."""

    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def csrf(self):
        return next((c.value for c in self.jar if c.name == "nl_csrf"), "")

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(BASE + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if method not in ("GET", "HEAD"):
            req.add_header("X-CSRF-Token", self.csrf())
        try:
            with self.opener.open(req, timeout=10) as r:
                text = r.read().decode()
                return r.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            return e.code, (json.loads(text) if text else None)


def expect(got, status, body=None):
    assert got[0] == status, f"expected {status}, got {got}"
    if body is not None:
        assert got[1] == body, f"expected {body}, got {got[1]}"
    return got[1]


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, envelope.content.decode("utf-8", "replace")))
        return "250 OK"


def email_flow():
    inbox = Inbox()
    ctl = Controller(inbox, hostname="127.0.0.1", port=SMTP_PORT)
    ctl.start()
    try:
        c = Client()
        expect(c.call("POST", "/v1/auth/email/start", {"email": "grace@example.org"}), 202)
        deadline = time.time() + 10
        while not inbox.messages and time.time() < deadline:
            time.sleep(0.05)
        assert inbox.messages, "no message reached the SMTP server"
        rcpt, content = inbox.messages[-1]
        assert rcpt == ["grace@example.org"], rcpt
        assert "Subject: Your chainedge sign-in code" in content, content
        code = re.search(r"code is (\d{6})", content).group(1)
        me = expect(c.call("POST", "/v1/auth/email/verify", {"email": "grace@example.org", "code": code}), 200)
        assert me["provider"] == "email"
        me = expect(c.call("GET", "/v1/auth/me"), 200)
        assert me["user"]["email"] == "grace@example.org" and me["default_key"]["created"] is True
        # Guessing is limited: the fifth wrong code locks the address out (a new code
        # does not lift it).
        expect(c.call("POST", "/v1/auth/email/start", {"email": "mallory@example.org"}), 202)
        for _ in range(4):
            expect(c.call("POST", "/v1/auth/email/verify", {"email": "mallory@example.org", "code": "999999"}), 400)
        for _ in range(2):
            expect(c.call("POST", "/v1/auth/email/verify", {"email": "mallory@example.org", "code": "999999"}),
                   429, {"error": "too_many_attempts"})
        expect(c.call("POST", "/v1/auth/email/start", {"email": "mallory@example.org"}), 202)
        expect(c.call("POST", "/v1/auth/email/verify", {"email": "mallory@example.org", "code": "999999"}),
               429, {"error": "too_many_attempts"})
    finally:
        ctl.stop()
    # SMTP server gone: delivery fails cleanly.
    expect(Client().call("POST", "/v1/auth/email/start", {"email": "late@example.org"}), 502,
           {"error": "email_delivery_failed"})
    print("email over SMTP: ok")


def evm_flow():
    acct = Account.create()
    c = Client()
    ch = expect(c.call("POST", "/v1/auth/wallet/evm/challenge", {"address": acct.address.lower()}), 200)
    msg = ch["message"]
    # EIP-4361 layout with the checksummed address, nonce and expiry.
    assert msg.splitlines()[0].endswith("wants you to sign in with your Ethereum account:"), msg
    assert msg.splitlines()[1] == acct.address, msg
    assert f"Nonce: {ch['nonce']}" in msg and "Expiration Time: " in msg and "Chain ID: 1" in msg
    sig = Account.sign_message(encode_defunct(text=msg), acct.key).signature.hex()
    sig = sig if sig.startswith("0x") else "0x" + sig
    # A different signer is refused (and uses up the nonce).
    other = Account.create()
    bad = Account.sign_message(encode_defunct(text=msg), other.key).signature.hex()
    expect(c.call("POST", "/v1/auth/wallet/evm/verify", {"message": msg, "signature": "0x" + bad.removeprefix("0x")}),
           400, {"error": "invalid_signature"})
    expect(c.call("POST", "/v1/auth/wallet/evm/verify", {"message": msg, "signature": sig}),
           400, {"error": "invalid_nonce"})
    # A fresh challenge, signed properly.
    ch = expect(c.call("POST", "/v1/auth/wallet/evm/challenge", {"address": acct.address}), 200)
    sig = Account.sign_message(encode_defunct(text=ch["message"]), acct.key).signature.hex()
    sig = sig if sig.startswith("0x") else "0x" + sig
    tampered = ch["message"].replace("Version: 1", "Version: 2")
    expect(c.call("POST", "/v1/auth/wallet/evm/verify", {"message": tampered, "signature": sig}),
           400, {"error": "message_mismatch"})
    ch = expect(c.call("POST", "/v1/auth/wallet/evm/challenge", {"address": acct.address}), 200)
    sig = Account.sign_message(encode_defunct(text=ch["message"]), acct.key).signature.hex()
    sig = sig if sig.startswith("0x") else "0x" + sig
    me = expect(c.call("POST", "/v1/auth/wallet/evm/verify", {"message": ch["message"], "signature": sig}), 200)
    assert me["provider"] == "wallet_evm"
    me = expect(c.call("GET", "/v1/auth/me"), 200)
    assert me["provider"] == "wallet_evm" and "email" not in me["user"]
    # Replay of a used nonce.
    expect(c.call("POST", "/v1/auth/wallet/evm/verify", {"message": ch["message"], "signature": sig}),
           400, {"error": "invalid_nonce"})
    # Same wallet again: same user.
    ch = expect(c.call("POST", "/v1/auth/wallet/evm/challenge", {"address": acct.address}), 200)
    sig = Account.sign_message(encode_defunct(text=ch["message"]), acct.key).signature.hex()
    sig = sig if sig.startswith("0x") else "0x" + sig
    c2 = Client()
    again = expect(c2.call("POST", "/v1/auth/wallet/evm/verify", {"message": ch["message"], "signature": sig}), 200)
    assert again["user"]["id"] == me["user"]["id"]
    expect(c.call("POST", "/v1/auth/wallet/evm/challenge", {"address": "0x1234"}), 400, {"error": "invalid_address"})
    print("EVM wallet (eth-account): ok")


def solana_flow():
    sk = nacl.signing.SigningKey.generate()
    address = b58encode(bytes(sk.verify_key))
    c = Client()
    ch = expect(c.call("POST", "/v1/auth/wallet/solana/challenge", {"address": address}), 200)
    assert "Solana account" in ch["message"] and address in ch["message"]
    signature = b58encode(sk.sign(ch["message"].encode()).signature)
    me = expect(c.call("POST", "/v1/auth/wallet/solana/verify", {"message": ch["message"], "signature": signature}), 200)
    assert me["provider"] == "wallet_solana"
    # Someone else's signature over a fresh challenge.
    ch = expect(c.call("POST", "/v1/auth/wallet/solana/challenge", {"address": address}), 200)
    forged = b58encode(nacl.signing.SigningKey.generate().sign(ch["message"].encode()).signature)
    expect(c.call("POST", "/v1/auth/wallet/solana/verify", {"message": ch["message"], "signature": forged}),
           400, {"error": "invalid_signature"})
    # An EVM nonce cannot be used on the Solana route.
    ch = expect(c.call("POST", "/v1/auth/wallet/evm/challenge", {"address": Account.create().address}), 200)
    expect(c.call("POST", "/v1/auth/wallet/solana/verify", {"message": ch["message"], "signature": signature}),
           400, {"error": "invalid_nonce"})
    print("Solana wallet (PyNaCl): ok")


def expired_challenge():
    acct = Account.create()
    c = Client()
    ch = expect(c.call("POST", "/v1/auth/wallet/evm/challenge", {"address": acct.address}), 200)
    time.sleep(3.2)  # the test gateway's challenge_ttl_secs is 2
    sig = Account.sign_message(encode_defunct(text=ch["message"]), acct.key).signature.hex()
    sig = sig if sig.startswith("0x") else "0x" + sig
    expect(c.call("POST", "/v1/auth/wallet/evm/verify", {"message": ch["message"], "signature": sig}),
           400, {"error": "challenge_expired"})
    print("expired challenge: ok")


if __name__ == "__main__":
    email_flow()
    evm_flow()
    solana_flow()
    expired_challenge()
    print("all console flows passed")
