//! A beacon-chain light client (consensus-specs `altair/light-client/sync-protocol.md`,
//! with Capella's execution headers and Electra's deeper state branches): trust starts at
//! a checkpoint block root the operator configures; from there every header the edge
//! believes was signed by at least two thirds of a sync committee it already trusts, and
//! each next committee is proven against a signed state root. What it yields are
//! execution blocks (hash, number, state and receipts roots) no execution node vouched
//! for: the root answers are proven against (docs/verification.md#light-client).
//!
//! No I/O here: `src/rpc/light_client.rs` fetches bootstraps and updates from the beacon
//! pool and feeds them in.

pub mod network;
pub mod types;

use super::block::HeaderFacts;
use alloy_primitives::{Bloom, B256};
use blst::min_pk::{PublicKey, Signature as BlsSignature};
use blst::BLST_ERROR;
use network::{branch_leads_to, signing_root, Network};
use tree_hash::TreeHash;
use types::{Bootstrap, LightClientHeader, SyncCommittee, Update};

/// The signature scheme's domain separation tag (proof-of-possession, as the consensus
/// specs' `bls` uses).
const BLS_DST: &[u8] = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";

/// Generalized indices of what the branches prove (Altair to Deneb; Electra's state has
/// more fields, one level deeper).
const EXECUTION_PAYLOAD_GINDEX: u64 = 25;
const FINALIZED_ROOT_GINDEX: [u64; 2] = [105, 169];
const CURRENT_SYNC_COMMITTEE_GINDEX: [u64; 2] = [54, 86];
const NEXT_SYNC_COMMITTEE_GINDEX: [u64; 2] = [55, 87];

/// A sync committee the client trusts, its keys checked once.
#[derive(Clone)]
struct Committee {
    root: B256,
    keys: Vec<PublicKey>,
}

impl Committee {
    fn of(committee: &SyncCommittee, size: usize) -> Result<Committee, String> {
        if committee.pubkeys.len() != size {
            return Err(format!(
                "a sync committee of {} keys, not {size}",
                committee.pubkeys.len()
            ));
        }
        let keys = committee
            .pubkeys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                PublicKey::key_validate(k.as_slice())
                    .map_err(|e| format!("sync committee key {i} is not a valid key ({e:?})"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Committee {
            root: committee.root(),
            keys,
        })
    }
}

/// Why an update was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It holds, but is no news or of a period the client is not in (a lagging node).
    Stale(String),
    /// It does not hold: a forged or broken update.
    Invalid(String),
}

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal::Invalid(why)
    }
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Refusal {
        Refusal::Invalid(why.to_string())
    }
}

impl Refusal {
    pub fn why(&self) -> &str {
        match self {
            Refusal::Stale(why) | Refusal::Invalid(why) => why,
        }
    }
}

/// What applying an update changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// The signed head moved (to this execution block).
    pub head: Option<u64>,
    /// Finality moved (to this execution block).
    pub finalized: Option<u64>,
    /// The next sync committee became known, or the committees rotated.
    pub committee: bool,
}

/// The light client's store: a finalized header, the signed head, and the committees.
#[derive(Clone)]
pub struct LightClient {
    network: Network,
    finalized: LightClientHeader,
    head: LightClientHeader,
    current: Committee,
    next: Option<Committee>,
}

impl LightClient {
    /// `initialize_light_client_store`: the bootstrap must be the block `trusted_root`
    /// names, its committee proven against that block's state, and the block no older
    /// than `max_age_secs` at `now` (an old checkpoint could be from a chain the
    /// committees that signed it have since left: weak subjectivity). A checkpoint too
    /// old is `Stale` (no host can serve it better), anything that does not hold `Invalid`.
    pub fn bootstrap(
        network: Network,
        trusted_root: B256,
        bootstrap: &Bootstrap,
        now: u64,
        max_age_secs: u64,
    ) -> Result<LightClient, Refusal> {
        let header = &bootstrap.header;
        valid_header(&network, header).map_err(|e| format!("the checkpoint's {e}"))?;
        let root = header.beacon.tree_hash_root();
        if root != trusted_root {
            return Err(format!(
                "the bootstrap is of block {root}, not the checkpoint {trusted_root}"
            )
            .into());
        }
        let slot = header.beacon.slot;
        let age = now.saturating_sub(network.slot_start(slot));
        if age > max_age_secs {
            return Err(Refusal::Stale(format!(
                "the checkpoint {trusted_root} is at slot {slot}, {} old: older than \
                 max_checkpoint_age ({}); configure a recent finalized block root",
                days(age),
                days(max_age_secs)
            )));
        }
        let gindex = CURRENT_SYNC_COMMITTEE_GINDEX[network.electra_layout(slot) as usize];
        let committee_root = bootstrap.current_sync_committee.root();
        if !branch_leads_to(
            committee_root,
            &bootstrap.current_sync_committee_branch,
            gindex,
            header.beacon.state_root,
        ) {
            return Err("the bootstrap's sync committee is not the checkpoint state's".into());
        }
        let current = Committee::of(
            &bootstrap.current_sync_committee,
            network.preset.sync_committee_size,
        )?;
        Ok(LightClient {
            network,
            finalized: header.clone(),
            head: header.clone(),
            current,
            next: None,
        })
    }

    pub fn network(&self) -> &Network {
        &self.network
    }

    /// The latest finalized header.
    pub fn finalized(&self) -> &LightClientHeader {
        &self.finalized
    }

    /// The latest header signed by two thirds of its committee (at least as new as the
    /// finalized one).
    pub fn head(&self) -> &LightClientHeader {
        &self.head
    }

    /// The sync-committee period updates are needed from.
    pub fn period(&self) -> u64 {
        self.network.period(self.finalized.beacon.slot)
    }

    pub fn knows_next_committee(&self) -> bool {
        self.next.is_some()
    }

    /// `process_light_client_update`, stricter in one way: the head moves only on a
    /// header two thirds of the committee signed (the spec's optimistic header needs
    /// more than half of the best participation seen).
    pub fn process(&mut self, update: &Update, current_slot: u64) -> Result<Applied, Refusal> {
        // Counting bits is free, a pairing is not: too few signers is refused first.
        let size = self.network.preset.sync_committee_size;
        let participants = update.sync_aggregate.participants();
        if participants * 3 < size * 2 {
            return Err(Refusal::Invalid(format!(
                "{participants} of {size} sync committee members signed: fewer than two thirds"
            )));
        }
        let committee = self.validate(update, current_slot)?;
        let mut applied = Applied::default();
        let attested = &update.attested_header;
        let store_period = self.period();
        let period_of = |h: &LightClientHeader| self.network.period(h.beacon.slot);
        // The spec's `update_has_finalized_next_sync_committee`, or finality moving.
        let applies = update
            .finalized_header
            .as_ref()
            .filter(|_| update.carries_finality())
            .filter(|f| {
                let gains_next = self.next.is_none()
                    && committee.is_some()
                    && period_of(f) == period_of(attested);
                gains_next || f.beacon.slot > self.finalized.beacon.slot
            });
        if let Some(finalized) = applies {
            let finalized_period = period_of(finalized);
            match self.next.take() {
                None if finalized_period == store_period => {
                    self.next = committee;
                    applied.committee = self.next.is_some();
                }
                Some(next) if finalized_period == store_period + 1 => {
                    self.current = next;
                    self.next = committee;
                    applied.committee = true;
                }
                kept => self.next = kept,
            }
            if finalized.beacon.slot > self.finalized.beacon.slot {
                self.finalized = finalized.clone();
                applied.finalized = Some(finalized.execution.block_number);
            }
        }
        if attested.beacon.slot > self.head.beacon.slot {
            self.head = attested.clone();
            applied.head = Some(attested.execution.block_number);
        }
        if self.finalized.beacon.slot > self.head.beacon.slot {
            self.head = self.finalized.clone();
        }
        Ok(applied)
    }

    /// `validate_light_client_update`; the next committee it proves, when it carries one.
    fn validate(&self, update: &Update, current_slot: u64) -> Result<Option<Committee>, Refusal> {
        let net = &self.network;
        let aggregate = &update.sync_aggregate;
        let size = net.preset.sync_committee_size;
        if aggregate.sync_committee_bits.len() * 8 != size {
            return Err(format!(
                "sync committee bits for {} members, not {size}",
                aggregate.sync_committee_bits.len() * 8
            )
            .into());
        }
        if aggregate.participants() == 0 {
            return Err("no sync committee member signed".into());
        }
        let attested = &update.attested_header;
        valid_header(net, attested).map_err(|e| format!("the attested {e}"))?;
        let finalized = update
            .finalized_header
            .as_ref()
            .filter(|_| update.carries_finality());
        let finalized_slot = finalized.map_or(0, |f| f.beacon.slot);
        let attested_slot = attested.beacon.slot;
        let signature_slot = update.signature_slot;
        if !(current_slot >= signature_slot
            && signature_slot > attested_slot
            && attested_slot >= finalized_slot)
        {
            return Err(format!(
                "slots out of order: signed at {signature_slot} (now {current_slot}), \
                 attested {attested_slot}, finalized {finalized_slot}"
            )
            .into());
        }
        let store_period = self.period();
        let signature_period = net.period(signature_slot);
        let signers = match (signature_period.checked_sub(store_period), &self.next) {
            (Some(0), _) => &self.current,
            (Some(1), Some(next)) => next,
            _ => {
                return Err(Refusal::Stale(format!(
                    "signed in sync committee period {signature_period}; the client is in \
                     {store_period}{}",
                    if self.next.is_some() {
                        ""
                    } else {
                        " and knows no next committee"
                    }
                )))
            }
        };
        let attested_period = net.period(attested_slot);
        let brings_next =
            self.next.is_none() && update.carries_committee() && attested_period == store_period;
        if attested_slot <= self.finalized.beacon.slot && !brings_next {
            return Err(Refusal::Stale(format!(
                "attested slot {attested_slot} is not past the finalized {}",
                self.finalized.beacon.slot
            )));
        }
        let layout = net.electra_layout(attested_slot) as usize;
        let state_root = attested.beacon.state_root;
        if let Some(finalized) = finalized {
            valid_header(net, finalized).map_err(|e| format!("the finalized {e}"))?;
            let leaf = finalized.beacon.tree_hash_root();
            if !branch_leads_to(
                leaf,
                &update.finality_branch,
                FINALIZED_ROOT_GINDEX[layout],
                state_root,
            ) {
                return Err("the finality branch does not lead to the attested state root".into());
            }
        }
        let committee = self.proven_next(update, attested_period == store_period, layout)?;
        self.check_signature(update, signers)?;
        Ok(committee)
    }

    /// The next sync committee an update carries, proven against its attested state (a
    /// committee already proven is not checked again: hashing is cheap, 512 keys not).
    fn proven_next(
        &self,
        update: &Update,
        same_period: bool,
        layout: usize,
    ) -> Result<Option<Committee>, Refusal> {
        let carried = update.next_sync_committee.as_ref();
        let Some(next) = carried.filter(|_| update.carries_committee()) else {
            return Ok(None);
        };
        let root = next.root();
        let known = self.next.as_ref().filter(|k| k.root == root);
        if same_period && self.next.is_some() && known.is_none() {
            return Err("a next sync committee other than the one proven before".into());
        }
        let gindex = NEXT_SYNC_COMMITTEE_GINDEX[layout];
        let state_root = update.attested_header.beacon.state_root;
        if !branch_leads_to(root, &update.next_sync_committee_branch, gindex, state_root) {
            return Err(
                "the next sync committee branch does not lead to the attested state root".into(),
            );
        }
        match known {
            Some(known) => Ok(Some(known.clone())),
            None => Ok(Some(Committee::of(
                next,
                self.network.preset.sync_committee_size,
            )?)),
        }
    }

    /// The aggregate signature of the members the bits name, over the attested header
    /// in the domain of the fork at the slot before the signature slot.
    fn check_signature(&self, update: &Update, signers: &Committee) -> Result<(), Refusal> {
        let net = &self.network;
        let aggregate = &update.sync_aggregate;
        let fork_slot = update.signature_slot.max(1) - 1;
        let fork = net
            .fork_at(fork_slot)
            .ok_or_else(|| format!("slot {fork_slot} is before every fork this client follows"))?;
        let domain = net.sync_committee_domain(fork.version);
        let message = signing_root(update.attested_header.beacon.tree_hash_root(), domain);
        let keys: Vec<&PublicKey> = (0..net.preset.sync_committee_size)
            .filter(|i| aggregate.signed(*i))
            .map(|i| &signers.keys[i])
            .collect();
        let signature = BlsSignature::from_bytes(aggregate.sync_committee_signature.as_slice())
            .map_err(|e| format!("the sync committee signature is not a signature ({e:?})"))?;
        let verdict = signature.fast_aggregate_verify(true, message.as_slice(), BLS_DST, &keys);
        if verdict != BLST_ERROR::BLST_SUCCESS {
            return Err(format!(
                "the sync committee signature does not verify ({} signers, {verdict:?})",
                keys.len()
            )
            .into());
        }
        Ok(())
    }
}

/// `is_valid_light_client_header` for Deneb's headers: the execution payload header is
/// the one in the beacon block's body.
fn valid_header(net: &Network, header: &LightClientHeader) -> Result<(), String> {
    let slot = header.beacon.slot;
    if net.fork_at(slot).is_none() {
        return Err(format!(
            "header at slot {slot} is from before Deneb: not followed"
        ));
    }
    if header.execution.extra_data.0.len() > 32 {
        return Err(format!(
            "header at slot {slot} has more than 32 bytes of extra data"
        ));
    }
    let execution_root = header.execution.tree_hash_root();
    if !branch_leads_to(
        execution_root,
        &header.execution_branch,
        EXECUTION_PAYLOAD_GINDEX,
        header.beacon.body_root,
    ) {
        return Err(format!(
            "header at slot {slot}: its execution payload is not its body's"
        ));
    }
    Ok(())
}

/// The execution block a checked light-client header carries.
pub fn execution_facts(header: &LightClientHeader) -> HeaderFacts {
    let e = &header.execution;
    HeaderFacts {
        hash: e.block_hash,
        number: e.block_number,
        parent_hash: e.parent_hash,
        state_root: e.state_root,
        receipts_root: e.receipts_root,
        logs_bloom: Bloom::from(e.logs_bloom.0),
    }
}

fn days(secs: u64) -> String {
    if secs >= 86_400 {
        format!("{:.1} days", secs as f64 / 86_400.0)
    } else {
        format!("{secs} s")
    }
}

#[cfg(test)]
mod tests;
