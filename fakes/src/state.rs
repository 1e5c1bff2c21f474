//! The state of one fake cloud, composed of each service's own ([`KeystoneState`],
//! [`ManilaState`], [`BlockState`] for Cinder and Nova) beside what they share: the settings
//! (the seed as changed at run time), the fault rules, the journal and the metadata
//! documents. One instance per [`crate::FakeCloud`], behind an `Arc<Mutex<…>>`; never global.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::backend::{Backend, Copy, CopyPause};
use crate::cinder::disk::LoopRegistry;
use crate::cinder::{self, BlockState};
use crate::config::CloudConfig;
use crate::error::Result;
use crate::faults::FaultTable;
use crate::journal::{Journal, Leftovers};
use crate::keystone::KeystoneState;
use crate::manila::{self, ManilaState};
use crate::metadata::NodeMetadata;
use crate::request::Shared;

/// Everything one cloud knows.
#[derive(Debug)]
pub(crate) struct CloudState {
    /// The settings: the seed as changed at run time (control API, handle).
    pub config: CloudConfig,
    seed: CloudConfig,
    /// `http://127.0.0.1:<port>`, without trailing slash.
    pub base_url: String,
    pub keystone: KeystoneState,
    pub manila: ManilaState,
    /// Cinder and Nova: volumes, volume snapshots, types, servers, loop devices.
    pub block: BlockState,
    pub faults: FaultTable,
    pub journal: Journal,
    /// With TLS: the CA (PEM) and the file holding it, for the clouds.yaml and secret the
    /// control API hands out.
    pub ca: Option<(String, std::path::PathBuf)>,
    /// The metadata service's documents, by node name.
    pub node_metadata: BTreeMap<String, NodeMetadata>,
    /// The test hook every copy passes ([`crate::FakeCloud::pause_backend_copies`]).
    pub copy_pause: Option<CopyPause>,
}

/// A data copy a request asked for and the resource waiting for it.
#[derive(Debug)]
pub(crate) struct PendingCopy {
    pub copy: Copy,
    pub target: CopyTarget,
}

/// The service whose resource a copy fills.
#[derive(Debug)]
pub(crate) enum CopyTarget {
    /// A Manila share or snapshot (a directory).
    Manila(manila::CopyTarget),
    /// A Cinder volume or snapshot (a sparse file).
    Block(cinder::CopyTarget),
}

impl CloudState {
    pub(crate) fn new(
        config: CloudConfig,
        base_url: String,
        backend: Backend,
        loops: LoopRegistry,
    ) -> Self {
        let block = BlockState::new(backend.root(), loops);
        let manila = ManilaState::new(&config.manila, backend);
        let mut state = Self {
            keystone: KeystoneState::default(),
            manila,
            block,
            seed: config.clone(),
            config,
            base_url,
            ca: None,
            faults: FaultTable::default(),
            journal: Journal::default(),
            node_metadata: BTreeMap::new(),
            copy_pause: None,
        };
        state.seed_block();
        state
    }

    /// Cinder's types and Nova's servers (with their metadata documents) from the seed.
    fn seed_block(&mut self) {
        let (cinder, nova) = (&self.config.cinder, &self.config.nova);
        if let Err(e) = self.block.seed(cinder, nova, &mut self.node_metadata) {
            tracing::warn!(error = %e, "cannot seed the Nova servers");
        }
    }

    /// What a service's request may use of the rest of the cloud.
    pub(crate) fn shared(&mut self) -> (Shared<'_>, &mut ManilaState, &mut BlockState) {
        let shared = Shared {
            config: &self.config,
            base_url: &self.base_url,
            faults: &mut self.faults,
            keystone: &self.keystone,
        };
        (shared, &mut self.manila, &mut self.block)
    }

    /// Back to the seed: no resources, tokens, messages, faults or journal entries.
    pub(crate) fn reset(&mut self) -> Result<()> {
        self.config = self.seed.clone();
        self.keystone.tokens.clear();
        self.manila.reseed(&self.config.manila);
        self.faults.clear();
        self.journal.reset();
        self.node_metadata.clear();
        self.block.clear()?;
        self.seed_block();
        self.manila.backend.clear()
    }

    /// The copies the last request asked for, Manila's and Cinder's.
    pub(crate) fn take_copies(&mut self) -> Vec<PendingCopy> {
        let manila = self
            .manila
            .copies
            .drain(..)
            .map(|(copy, target)| PendingCopy {
                copy,
                target: CopyTarget::Manila(target),
            });
        let block = self
            .block
            .copies
            .drain(..)
            .map(|(copy, target)| PendingCopy {
                copy,
                target: CopyTarget::Block(target),
            });
        manila.chain(block).collect()
    }

    /// Ends a copy: its resource starts its plan, or ends in error.
    pub(crate) fn finish_copy(&mut self, target: CopyTarget, result: Result<()>) {
        match target {
            CopyTarget::Manila(target) => self.manila.finish_copy(target, result),
            CopyTarget::Block(target) => self.block.finish_copy(target, result),
        }
    }

    /// Manila's resources still present, in creation order.
    pub(crate) fn leftovers(&mut self) -> Leftovers {
        let now = Instant::now();
        self.block.advance(now);
        self.manila.leftovers(now)
    }
}
