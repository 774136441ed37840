// Lodestar's light client (the consensus specs' sync protocol, as @lodestar/light-client
// implements it) fed the beacon stand-in's bootstrap and updates: an independent check
// that the stand-in's SSZ, branches and BLS signatures are what a real client accepts.
//
//   node tests/js/lodestar_light_client.mjs http://127.0.0.1:PORT
//
// Prints {"finalized_slot", "optimistic_slot", "optimistic_block_hash", ...} as JSON; exits
// 1 with Lodestar's error when anything does not hold.
process.env.LODESTAR_PRESET = "minimal";
const { createBeaconConfig } = await import("@lodestar/config");
const { ssz } = await import("@lodestar/types");
const { LightclientSpec } = await import("@lodestar/light-client/spec");
const { isValidMerkleBranch } = await import("@lodestar/light-client/utils");

const base = process.argv[2];
const get = async (path) => {
  const r = await fetch(base + path);
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
};
const bytes = (h) => Uint8Array.from(Buffer.from(h.slice(2), "hex"));
const hex = (b) => "0x" + Buffer.from(b).toString("hex");

const checkpoint = await get("/standin/light_client/checkpoint");
const net = checkpoint.network;
const version = (v) => bytes(v);
const config = createBeaconConfig(
  {
    PRESET_BASE: "minimal",
    CONFIG_NAME: "standin",
    SECONDS_PER_SLOT: net.seconds_per_slot,
    GENESIS_FORK_VERSION: version("0x00000064"),
    ALTAIR_FORK_VERSION: version("0x01000064"),
    ALTAIR_FORK_EPOCH: 0,
    BELLATRIX_FORK_VERSION: version("0x02000064"),
    BELLATRIX_FORK_EPOCH: 0,
    CAPELLA_FORK_VERSION: version("0x03000064"),
    CAPELLA_FORK_EPOCH: 0,
    DENEB_FORK_VERSION: version(net.forks.deneb.version),
    DENEB_FORK_EPOCH: net.forks.deneb.epoch,
    ELECTRA_FORK_VERSION: version(net.forks.electra.version),
    ELECTRA_FORK_EPOCH: net.forks.electra.epoch,
    FULU_FORK_EPOCH: Infinity,
  },
  bytes(net.genesis_validators_root),
);
const slotNow = () => Math.floor((Date.now() / 1000 - net.genesis_time) / net.seconds_per_slot);

const boot = await get(`/eth/v1/beacon/light_client/bootstrap/${checkpoint.root}`);
const bootstrap = ssz.electra.LightClientBootstrap.fromJson(boot.data);
const root = hex(ssz.phase0.BeaconBlockHeader.hashTreeRoot(bootstrap.header.beacon));
if (root !== checkpoint.root) throw new Error(`bootstrap root ${root} is not ${checkpoint.root}`);
// The bootstrap's committee against its state root (Electra's CURRENT_SYNC_COMMITTEE_GINDEX 86).
const committeeRoot = ssz.altair.SyncCommittee.hashTreeRoot(bootstrap.currentSyncCommittee);
if (!isValidMerkleBranch(committeeRoot, bootstrap.currentSyncCommitteeBranch, 6, 22, bootstrap.header.beacon.stateRoot)) {
  throw new Error("the bootstrap's committee branch does not hold");
}
// The same objects as SSZ (Accept: application/octet-stream) decode to the same values.
const getSsz = async (path, versioned = true) => {
  const r = await fetch(base + path, { headers: { accept: "application/octet-stream" } });
  if (r.status !== 200) throw new Error(`${path} as SSZ: ${r.status} ${await r.text()}`);
  if (versioned && r.headers.get("eth-consensus-version") !== "electra") throw new Error(`${path}: no Eth-Consensus-Version`);
  return new Uint8Array(await r.arrayBuffer());
};
const bootSsz = ssz.electra.LightClientBootstrap.deserialize(
  await getSsz(`/eth/v1/beacon/light_client/bootstrap/${checkpoint.root}`),
);
if (!ssz.electra.LightClientBootstrap.equals(bootSsz, bootstrap)) throw new Error("the SSZ bootstrap is not the JSON one");
const lc = new LightclientSpec(config, { allowForcedUpdates: false }, bootstrap);
const period = Math.floor(bootstrap.header.beacon.slot / 64);
const updates = await get(`/eth/v1/beacon/light_client/updates?start_period=${period}&count=4`);
for (const u of updates) lc.onUpdate(slotNow(), ssz.electra.LightClientUpdate.fromJson(u.data));
const finality = await get("/eth/v1/beacon/light_client/finality_update");
const finalitySsz = ssz.electra.LightClientFinalityUpdate.deserialize(
  await getSsz("/eth/v1/beacon/light_client/finality_update"),
);
lc.onFinalityUpdate(slotNow(), finalitySsz);
// The updates as SSZ response chunks: length, fork digest, the update.
const chunks = await getSsz(`/eth/v1/beacon/light_client/updates?start_period=${period}&count=4`, false);
let sszUpdates = 0;
for (let at = 0; at < chunks.length; ) {
  const size = Number(new DataView(chunks.buffer, chunks.byteOffset + at, 8).getBigUint64(0, true));
  ssz.electra.LightClientUpdate.deserialize(chunks.subarray(at + 12, at + 8 + size));
  at += 8 + size;
  sszUpdates += 1;
}
if (sszUpdates !== updates.length) throw new Error(`${sszUpdates} SSZ updates, ${updates.length} in JSON`);
lc.onFinalityUpdate(slotNow(), ssz.electra.LightClientFinalityUpdate.fromJson(finality.data));
const optimistic = await get("/eth/v1/beacon/light_client/optimistic_update");
lc.onOptimisticUpdate(slotNow(), ssz.electra.LightClientOptimisticUpdate.fromJson(optimistic.data));
const s = lc.store;
console.log(
  JSON.stringify({
    updates: updates.length,
    ssz_updates: sszUpdates,
    finalized_slot: s.finalizedHeader.beacon.slot,
    finalized_block_number: Number(s.finalizedHeader.execution.blockNumber),
    optimistic_slot: s.optimisticHeader.beacon.slot,
    optimistic_block_number: Number(s.optimisticHeader.execution.blockNumber),
    optimistic_block_hash: hex(s.optimisticHeader.execution.blockHash),
    next_committee_known: s.syncCommittees.size,
  }),
);
