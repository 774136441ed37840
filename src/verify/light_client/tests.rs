//! The sync protocol against a chain built here: a minimal-preset committee of real BLS
//! keys, states whose roots commit to committees and finality by real branches. Every
//! forged part is refused with a reason (the stand-in's chain, made independently in
//! Python and accepted by Lodestar's light client, is the integration test's).

use super::network::{Fork, Network, Preset, MAINNET_PRESET, MINIMAL_PRESET};
use super::types::*;
use super::*;
use alloy_primitives::{Address, Bytes, FixedBytes, U256};
use blst::min_pk::{AggregateSignature, SecretKey};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

const GENESIS: u64 = 1_000_000;
const NOW_SLOT: u64 = 400;

fn network(electra: bool, preset: Preset) -> Network {
    let mut forks = vec![Fork {
        name: "deneb",
        epoch: 0,
        version: [4, 0, 0, 9],
    }];
    if electra {
        forks.push(Fork {
            name: "electra",
            epoch: 0,
            version: [5, 0, 0, 9],
        });
    }
    Network {
        name: "test".into(),
        preset,
        genesis_time: GENESIS,
        seconds_per_slot: 6,
        genesis_validators_root: B256::repeat_byte(7),
        forks,
    }
}

fn now(net: &Network) -> u64 {
    net.slot_start(NOW_SLOT)
}

/// A sparse Merkle tree with `leaves` at their generalized indices (zero elsewhere):
/// its root and each leaf's branch.
fn tree(leaves: &[(u64, B256)]) -> (B256, HashMap<u64, Vec<B256>>) {
    let mut nodes: HashMap<u64, B256> = leaves.iter().copied().collect();
    let mut pending: Vec<u64> = nodes.keys().copied().collect();
    while let Some(g) = pending.iter().copied().filter(|g| *g > 1).max() {
        pending.retain(|p| *p != g && *p != g ^ 1);
        let (left, right) = (g & !1, g | 1);
        let value = |n: u64| nodes.get(&n).copied().unwrap_or_default();
        let mut pair = [0u8; 64];
        pair[..32].copy_from_slice(value(left).as_slice());
        pair[32..].copy_from_slice(value(right).as_slice());
        nodes.insert(g / 2, B256::from_slice(&Sha256::digest(pair)));
        pending.push(g / 2);
    }
    let branches = leaves
        .iter()
        .map(|(g, _)| {
            let mut branch = Vec::new();
            let mut at = *g;
            while at > 1 {
                branch.push(nodes.get(&(at ^ 1)).copied().unwrap_or_default());
                at /= 2;
            }
            (*g, branch)
        })
        .collect();
    (nodes.get(&1).copied().unwrap_or_default(), branches)
}

struct Keys {
    secret: Vec<SecretKey>,
    committee: SyncCommittee,
}

fn keys(seed: u8) -> Keys {
    keys_of(seed, MINIMAL_PRESET.sync_committee_size)
}

fn keys_of(seed: u8, size: usize) -> Keys {
    let secret: Vec<SecretKey> = (0..size)
        .map(|i| {
            let mut ikm = [seed; 32];
            ikm[..8].copy_from_slice(&(i as u64).to_le_bytes());
            SecretKey::key_gen(&ikm, &[]).unwrap()
        })
        .collect();
    let pubkeys = secret
        .iter()
        .map(|k| FixedBytes(k.sk_to_pk().compress()))
        .collect();
    Keys {
        secret,
        committee: SyncCommittee {
            pubkeys,
            // Only hashed here: the light client never uses the aggregate key.
            aggregate_pubkey: FixedBytes([0xaa; 48]),
        },
    }
}

fn execution(number: u64) -> ExecutionPayloadHeader {
    ExecutionPayloadHeader {
        parent_hash: B256::repeat_byte(number as u8),
        fee_recipient: Address::repeat_byte(1),
        state_root: B256::repeat_byte(2),
        receipts_root: B256::repeat_byte(3),
        logs_bloom: FixedBytes([0; 256]),
        prev_randao: B256::repeat_byte(4),
        block_number: number,
        gas_limit: 30_000_000,
        gas_used: 21_000,
        timestamp: 1_700_000_000 + number,
        extra_data: ExtraData(Bytes::from_static(b"anvil")),
        base_fee_per_gas: U256::from(7u64),
        block_hash: B256::repeat_byte(0x40u8.wrapping_add(number as u8)),
        transactions_root: B256::repeat_byte(5),
        withdrawals_root: B256::repeat_byte(6),
        blob_gas_used: 0,
        excess_blob_gas: 0,
    }
}

/// A header at `slot` whose state commits to `state` (generalized index, leaf) pairs:
/// the header and each leaf's branch.
fn header(slot: u64, state: &[(u64, B256)]) -> (LightClientHeader, HashMap<u64, Vec<B256>>) {
    let execution = execution(slot);
    let (body_root, body) = tree(&[(EXECUTION_PAYLOAD_GINDEX, execution.tree_hash_root())]);
    let (state_root, branches) = tree(state);
    let header = LightClientHeader {
        beacon: BeaconBlockHeader {
            slot,
            proposer_index: 3,
            parent_root: B256::repeat_byte(9),
            state_root,
            body_root,
        },
        execution,
        execution_branch: body[&EXECUTION_PAYLOAD_GINDEX].clone(),
    };
    (header, branches)
}

struct Chain {
    net: Network,
    layout: usize,
    current: Keys,
    next: Keys,
}

impl Chain {
    fn new(electra: bool) -> Chain {
        Chain {
            net: network(electra, MINIMAL_PRESET),
            layout: electra as usize,
            current: keys(1),
            next: keys(101),
        }
    }

    /// Mainnet's sizes: committees of 512.
    fn mainnet_sized() -> Chain {
        Chain {
            net: network(true, MAINNET_PRESET),
            layout: 1,
            current: keys_of(1, 512),
            next: keys_of(101, 512),
        }
    }

    fn bootstrap(&self, slot: u64) -> Bootstrap {
        let g = CURRENT_SYNC_COMMITTEE_GINDEX[self.layout];
        let (header, branches) = header(slot, &[(g, self.current.committee.root())]);
        Bootstrap {
            header,
            current_sync_committee: self.current.committee.clone(),
            current_sync_committee_branch: branches[&g].clone(),
        }
    }

    fn client(&self, slot: u64) -> LightClient {
        let b = self.bootstrap(slot);
        let root = b.header.beacon.tree_hash_root();
        LightClient::bootstrap(self.net.clone(), root, &b, now(&self.net), 86_400).unwrap()
    }

    /// An update attested at `slot`, finalizing `finalized` (if any), carrying the next
    /// committee, signed one slot later by the first `signers` of `by`.
    fn update(&self, slot: u64, finalized: Option<u64>, by: &Keys, signers: usize) -> Update {
        let (fg, ng) = (
            FINALIZED_ROOT_GINDEX[self.layout],
            NEXT_SYNC_COMMITTEE_GINDEX[self.layout],
        );
        let finalized = finalized.map(|s| header(s, &[]).0);
        let mut state = vec![(ng, self.next.committee.root())];
        if let Some(f) = &finalized {
            state.push((fg, f.beacon.tree_hash_root()));
        }
        let (attested, branches) = header(slot, &state);
        let mut update = Update {
            attested_header: attested,
            next_sync_committee: Some(self.next.committee.clone()),
            next_sync_committee_branch: branches[&ng].clone(),
            finality_branch: finalized
                .as_ref()
                .map(|_| branches[&fg].clone())
                .unwrap_or_default(),
            finalized_header: finalized,
            sync_aggregate: SyncAggregate {
                sync_committee_bits: Bytes::new(),
                sync_committee_signature: FixedBytes([0; 96]),
            },
            signature_slot: slot + 1,
        };
        self.sign(&mut update, by, signers);
        update
    }

    fn sign(&self, update: &mut Update, by: &Keys, signers: usize) {
        let fork = self.net.fork_at(update.signature_slot - 1).unwrap();
        let domain = self.net.sync_committee_domain(fork.version);
        let message = signing_root(update.attested_header.beacon.tree_hash_root(), domain);
        let sigs: Vec<_> = by.secret[..signers]
            .iter()
            .map(|k| k.sign(message.as_slice(), BLS_DST, &[]))
            .collect();
        let refs: Vec<_> = sigs.iter().collect();
        let aggregate = AggregateSignature::aggregate(&refs, true)
            .unwrap()
            .to_signature();
        let mut bits = vec![0u8; self.net.preset.sync_committee_size / 8];
        for i in 0..signers {
            bits[i / 8] |= 1 << (i % 8);
        }
        update.sync_aggregate = SyncAggregate {
            sync_committee_bits: bits.into(),
            sync_committee_signature: FixedBytes(aggregate.compress()),
        };
    }
}

#[test]
fn a_checkpoint_is_its_root_its_committee_and_recent() {
    for electra in [false, true] {
        let chain = Chain::new(electra);
        let b = chain.bootstrap(100);
        let root = b.header.beacon.tree_hash_root();
        let at = now(&chain.net);
        assert!(LightClient::bootstrap(chain.net.clone(), root, &b, at, 86_400).is_ok());
        let other = LightClient::bootstrap(chain.net.clone(), B256::repeat_byte(1), &b, at, 86_400);
        assert!(other.err().unwrap().why().contains("not the checkpoint"));
        let old =
            LightClient::bootstrap(chain.net.clone(), root, &b, at + 30 * 86_400, 14 * 86_400);
        let why = old.err().unwrap();
        assert!(matches!(why, Refusal::Stale(_)), "{why:?}");
        let why = why.why();
        assert!(
            why.contains("older than max_checkpoint_age (14.0 days)"),
            "{why}"
        );
        let mut forged = b.clone();
        forged.current_sync_committee = chain.next.committee.clone();
        let why = LightClient::bootstrap(chain.net.clone(), root, &forged, at, 86_400)
            .err()
            .unwrap();
        assert!(why.why().contains("not the checkpoint state's"), "{why:?}");
        let mut forged = b.clone();
        forged.header.execution.block_number += 1;
        let root = forged.header.beacon.tree_hash_root();
        let why = LightClient::bootstrap(chain.net.clone(), root, &forged, at, 86_400)
            .err()
            .unwrap();
        assert!(
            why.why().contains("execution payload is not its body's"),
            "{why:?}"
        );
    }
}

#[test]
fn signed_updates_move_the_head_finality_and_the_committees() {
    for electra in [false, true] {
        let chain = Chain::new(electra);
        let mut lc = chain.client(66);
        // Period 1 (slots 64-127): finality with the next committee.
        let applied = lc
            .process(&chain.update(80, Some(72), &chain.current, 32), NOW_SLOT)
            .unwrap();
        assert_eq!(
            applied,
            Applied {
                head: Some(80),
                finalized: Some(72),
                committee: true
            }
        );
        assert_eq!(execution_facts(lc.finalized()).number, 72);
        // An optimistic update (no finality, no committee) moves the head only.
        let mut optimistic = chain.update(90, None, &chain.current, 22);
        optimistic.next_sync_committee = None;
        optimistic.next_sync_committee_branch.clear();
        chain.sign(&mut optimistic, &chain.current, 22);
        let applied = lc.process(&optimistic, NOW_SLOT).unwrap();
        assert_eq!(
            applied,
            Applied {
                head: Some(90),
                finalized: None,
                committee: false
            }
        );
        assert_eq!(
            execution_facts(lc.head()).hash,
            B256::repeat_byte(0x40 + 90)
        );
        // Period 2, signed by the next committee: finality there rotates the committees.
        let rotated = chain.update(140, Some(130), &chain.next, 30);
        let applied = lc.process(&rotated, NOW_SLOT).unwrap();
        assert_eq!(
            applied,
            Applied {
                head: Some(140),
                finalized: Some(130),
                committee: true
            }
        );
        assert_eq!(lc.period(), 2);
        // The old committee no longer signs for this period.
        let stale = chain.update(150, Some(144), &chain.current, 32);
        let why = lc
            .process(&stale, NOW_SLOT)
            .err()
            .unwrap()
            .why()
            .to_string();
        assert!(why.contains("does not verify"), "{why}");
    }
}

#[test]
fn forged_updates_are_refused_with_their_reason() {
    let chain = Chain::new(true);
    let lc = chain.client(66);
    let good = chain.update(80, Some(72), &chain.current, 32);
    let refused = |u: &Update| {
        lc.clone()
            .process(u, NOW_SLOT)
            .err()
            .unwrap()
            .why()
            .to_string()
    };
    // Signed by keys not in the committee.
    let stranger = chain.update(80, Some(72), &keys(200), 32);
    assert!(refused(&stranger).contains("does not verify"));
    // A valid signature over another header than the one sent.
    let mut swapped = good.clone();
    swapped.attested_header = chain
        .update(79, Some(72), &chain.current, 32)
        .attested_header;
    assert!(
        refused(&swapped).contains("does not verify"),
        "{}",
        refused(&swapped)
    );
    // The bits claim a member who did not sign.
    let mut claimed = chain.update(80, Some(72), &chain.current, 22);
    claimed.claim_member(23);
    assert!(refused(&claimed).contains("does not verify"));
    // Too few participants: 21 of 32 is under two thirds, even when they all signed.
    let few = chain.update(80, Some(72), &chain.current, 21);
    assert!(
        refused(&few).contains("fewer than two thirds"),
        "{}",
        refused(&few)
    );
    // A finalized header the state does not commit to.
    let mut finality = good.clone();
    finality.finalized_header = Some(header(73, &[]).0);
    assert!(refused(&finality).contains("finality branch"));
    // A wrong branch for the next committee.
    let mut next = good.clone();
    next.next_sync_committee_branch[0] = B256::repeat_byte(0xee);
    assert!(refused(&next).contains("next sync committee branch"));
    // An execution header that is not the attested block's.
    let mut execution = good.clone();
    execution.attested_header.execution.state_root = B256::repeat_byte(0x66);
    assert!(refused(&execution).contains("execution payload is not its body's"));
    // Signed in a slot that has not come, or before the header it signs.
    let mut future = good.clone();
    future.signature_slot = NOW_SLOT + 1;
    assert!(refused(&future).contains("slots out of order"));
    // Signed two periods ahead.
    let far = chain.update(200, Some(196), &chain.current, 32);
    assert!(refused(&far).contains("period 3"));
    // A signature that is not a point on the curve.
    let mut garbage = good.clone();
    garbage.sync_aggregate.sync_committee_signature = FixedBytes([0x11; 96]);
    assert!(refused(&garbage).contains("not a signature"));
    // And the honest one applies.
    assert!(lc.clone().process(&good, NOW_SLOT).is_ok());
}

impl Update {
    fn claim_member(&mut self, member: usize) {
        let mut bits = self.sync_aggregate.sync_committee_bits.to_vec();
        bits[member / 8] |= 1 << (member % 8);
        self.sync_aggregate.sync_committee_bits = bits.into();
    }
}

#[test]
fn beacon_api_json_reads_into_the_containers() {
    let chain = Chain::new(false);
    let b = chain.bootstrap(100);
    let h = &b.header;
    let json = serde_json::json!({
        "version": "deneb",
        "data": {
            "header": {
                "beacon": {
                    "slot": "100", "proposer_index": "3",
                    "parent_root": h.beacon.parent_root, "state_root": h.beacon.state_root,
                    "body_root": h.beacon.body_root,
                },
                "execution": {
                    "parent_hash": h.execution.parent_hash, "fee_recipient": h.execution.fee_recipient,
                    "state_root": h.execution.state_root, "receipts_root": h.execution.receipts_root,
                    "logs_bloom": h.execution.logs_bloom, "prev_randao": h.execution.prev_randao,
                    "block_number": "100", "gas_limit": "30000000", "gas_used": "21000",
                    "timestamp": "1700000100", "extra_data": "0x616e76696c", "base_fee_per_gas": "7",
                    "block_hash": h.execution.block_hash, "transactions_root": h.execution.transactions_root,
                    "withdrawals_root": h.execution.withdrawals_root, "blob_gas_used": "0",
                    "excess_blob_gas": "0",
                },
                "execution_branch": h.execution_branch,
            },
            "current_sync_committee": {
                "pubkeys": b.current_sync_committee.pubkeys,
                "aggregate_pubkey": b.current_sync_committee.aggregate_pubkey,
            },
            "current_sync_committee_branch": b.current_sync_committee_branch,
        }
    });
    let read: Versioned<Bootstrap> = serde_json::from_value(json).unwrap();
    assert_eq!(read.data, b);
}

/// The light client's CPU per bootstrap and per update at mainnet's committee size (512
/// keys), printed for `bench/verify.sh` (not a timed test: nothing is asserted on time).
#[test]
#[ignore]
fn light_client_cost() {
    let chain = Chain::mainnet_sized();
    // Mainnet's periods are 8,192 slots: the same slot numbers stay in one period.
    let rounds = 20;
    let b = chain.bootstrap(66);
    let root = b.header.beacon.tree_hash_root();
    let at = now(&chain.net);
    let started = std::time::Instant::now();
    for _ in 0..rounds {
        LightClient::bootstrap(chain.net.clone(), root, &b, at, 86_400).unwrap();
    }
    let bootstrap_us = started.elapsed().as_micros() / rounds;
    let lc = chain.client(66);
    let with_committee: Vec<Update> = (0..rounds as u64)
        .map(|i| chain.update(80 + i, Some(72), &chain.current, 500))
        .collect();
    let finality: Vec<Update> = with_committee
        .iter()
        .map(|u| {
            let mut u = u.clone();
            u.next_sync_committee = None;
            u.next_sync_committee_branch.clear();
            u
        })
        .collect();
    let per_update = |updates: &[Update]| {
        let started = std::time::Instant::now();
        for update in updates {
            lc.clone().process(update, NOW_SLOT).unwrap();
        }
        started.elapsed().as_micros() / rounds
    };
    let (committee_us, update_us) = (per_update(&with_committee), per_update(&finality));
    println!(
        "light_client_cost bootstrap_us={bootstrap_us} committee_update_us={committee_us} update_us={update_us} committee=512 signers=500"
    );
}
