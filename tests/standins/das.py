"""The Digital Asset Standard read API (Metaplex DAS, as Helius and Triton serve it on
the node's own JSON-RPC endpoint) for the LiteSVM node: `getAssetsByOwner` and
`getAsset`.

Compressed NFTs live in Bubblegum's Merkle trees, which LiteSVM does not run, so the
node keeps them in an index of its own: `shim_mintCompressedNft [owner, name]` adds a
leaf to the node's tree (a test control, as a Bubblegum mint would). Regular NFTs (a
mint of 0 decimals held as exactly 1) are read from the chain's token accounts, as a
DAS indexer sees them. Answers follow the DAS specification's asset shape: `interface`,
`id`, `content.metadata`, `compression`, `ownership`, `burnt`, `mutable`; pages are
`{total, limit, page, items}` with `limit` 1-1000 and `page` from 1.

Parameters given by name are first checked against the method's schema in the DAS
specification (`vendor/das/metaplex-das-api.json`, the OpenRPC document of
metaplex-foundation/digital-asset-standard-api): an unknown field or a wrong type is
-32602, as the reference server (serde with unknown fields denied) answers. So a caller
sending what the spec does not allow fails here as it would on a real DAS host.
"""

import functools
import hashlib
import json
import struct
from pathlib import Path

import base58_codec as b58
import jsonschema_rs
from solders.pubkey import Pubkey

TOKEN = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
TOKEN_2022 = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb"
TREE = b58.encode(hashlib.sha256(b"standin bubblegum tree").digest())
MAX_LIMIT = 1000
METHODS = {"getAssetsByOwner", "getAsset", "shim_mintCompressedNft"}
SPEC = Path(__file__).resolve().parent / "vendor/das/metaplex-das-api.json"


@functools.cache
def spec_method(name):
    """The DAS specification's entry for a method: its by-name parameter schema and result."""
    return next(m for m in json.loads(SPEC.read_text())["methods"] if m["name"] == name)


PARAMS = {name: jsonschema_rs.validator_for(spec_method(name)["params"][0]["schema"]) for name in ("getAsset", "getAssetsByOwner")}


class DasError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


def pubkey(v, name):
    try:
        if isinstance(v, str) and len(b58.decode(v)) == 32:
            return v
    except ValueError:
        pass
    raise DasError(-32602, f"Invalid params: {name} is not a base58 public key")


def named(params, *names):
    """DAS takes its parameters by name (an object) or in order (an array)."""
    if isinstance(params, dict):
        return [params.get(n) for n in names]
    params = list(params or [])
    return params + [None] * (len(names) - len(params))


def compressed(leaf):
    h = lambda *p: b58.encode(hashlib.sha256(":".join(map(str, p)).encode()).digest())  # noqa: E731
    return {
        "interface": "V1_NFT",
        "id": leaf["id"],
        "content": {"$schema": "https://schema.metaplex.com/nft1.0.json", "json_uri": f"https://example.invalid/{leaf['leaf_id']}.json",
                    "files": [], "metadata": {"name": leaf["name"], "symbol": "CNFT"}, "links": {}},
        "authorities": [],
        "compression": {"eligible": False, "compressed": True, "data_hash": h("data", leaf["id"]),
                        "creator_hash": h("creator", leaf["id"]), "asset_hash": h("asset", leaf["id"]),
                        "tree": TREE, "seq": leaf["leaf_id"] + 1, "leaf_id": leaf["leaf_id"]},
        "grouping": [],
        "royalty": {"royalty_model": "creators", "target": None, "percent": 0.0, "basis_points": 0,
                    "primary_sale_happened": False, "locked": False},
        "creators": [],
        "ownership": {"frozen": False, "delegated": False, "delegate": None, "ownership_model": "single", "owner": leaf["owner"]},
        "supply": {"print_max_supply": 0, "print_current_supply": 0, "edition_nonce": None},
        "mutable": True,
        "burnt": False,
    }


def regular(chain, owner):
    """The owner's regular NFTs: token accounts holding exactly 1 of a 0-decimal mint."""
    out = []
    for program in (TOKEN, TOKEN_2022):
        for _, a in chain.svm.get_program_accounts(Pubkey.from_string(program)):
            data = bytes(a.data)
            if len(data) < 165 or str(Pubkey.from_bytes(data[32:64])) != owner:
                continue
            mint = str(Pubkey.from_bytes(data[0:32]))
            m = chain.account(mint)
            if struct.unpack_from("<Q", data, 64)[0] != 1 or m is None or bytes(m.data)[44] != 0:
                continue
            out.append({
                "interface": "V1_NFT", "id": mint,
                "content": {"$schema": "https://schema.metaplex.com/nft1.0.json", "json_uri": "", "files": [],
                            "metadata": {"name": "", "symbol": ""}, "links": {}},
                "authorities": [], "compression": {"eligible": False, "compressed": False, "data_hash": "",
                                                   "creator_hash": "", "asset_hash": "", "tree": "", "seq": 0, "leaf_id": 0},
                "grouping": [], "royalty": {"royalty_model": "creators", "target": None, "percent": 0.0, "basis_points": 0,
                                            "primary_sale_happened": False, "locked": False},
                "creators": [], "ownership": {"frozen": False, "delegated": False, "delegate": None,
                                              "ownership_model": "single", "owner": owner},
                "supply": None, "mutable": True, "burnt": False,
            })
    return out


def call(chain, method, params):
    leaves = chain.__dict__.setdefault("das_leaves", [])
    if method in PARAMS and isinstance(params, dict):
        errors = [e.message for e in PARAMS[method].iter_errors(params)]
        if errors:
            raise DasError(-32602, f"Invalid params: {errors[0]}")
    if method == "shim_mintCompressedNft":
        owner, name = named(params, "owner", "name")
        owner = pubkey(owner, "owner")
        leaf_id = len(leaves)
        asset_id = b58.encode(hashlib.sha256(f"{TREE}:{leaf_id}".encode()).digest())
        leaves.append({"id": asset_id, "owner": owner, "leaf_id": leaf_id, "name": str(name or f"Leaf #{leaf_id}")[:32]})
        return asset_id
    if method == "getAsset":
        (asset_id,) = named(params, "id")
        pubkey(asset_id, "id")
        for leaf in leaves:
            if leaf["id"] == asset_id:
                return compressed(leaf)
        raise DasError(-32000, "Asset Not Found")
    owner, page, limit = named(params, "ownerAddress", "page", "limit")
    owner = pubkey(owner, "ownerAddress")
    page = 1 if page is None else page
    limit = MAX_LIMIT if limit is None else limit
    if not isinstance(page, int) or page < 1 or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise DasError(-32602, f"Invalid params: page from 1, limit 1 to {MAX_LIMIT}")
    assets = regular(chain, owner) + [compressed(leaf) for leaf in leaves if leaf["owner"] == owner]
    items = assets[(page - 1) * limit: page * limit]
    return {"total": len(items), "limit": limit, "page": page, "items": items}
