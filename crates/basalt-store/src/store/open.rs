//! Opening a `MessageStore`: lock, load, recover, start the services.

use super::*;

impl MessageStore {
    /// Opens (creating if needed) the store at `config.root_dir`: takes the
    /// lock, loads and recovers every file, writes the abort marker and starts
    /// the services.
    pub fn open(config: StoreConfig) -> Result<Arc<MessageStore>> {
        Self::open_with_delays(config, DelayLevels::default())
    }

    pub fn open_with_delays(config: StoreConfig, delays: DelayLevels) -> Result<Arc<MessageStore>> {
        Self::open_with_source(config, delays, MessageSource::CommitLog)
    }

    /// Opens the store over `source`. With [`MessageSource::External`] the
    /// recovery checks only the ConsumeQueues (the log's owner re-dispatches
    /// what they miss) and no CommitLog service starts.
    pub fn open_with_source(
        config: StoreConfig,
        delays: DelayLevels,
        source: MessageSource,
    ) -> Result<Arc<MessageStore>> {
        config.validate().map_err(StoreError::Config)?;
        let config = Arc::new(config);
        let disk = config.disk.clone();
        disk.create_dir_all_durable(&config.root_dir)?;
        // The simulated disk has no processes to exclude.
        let lock = if disk.is_real() {
            Some(LockFile::acquire(&config.lock_path())?)
        } else {
            None
        };
        let mut lap = std::time::Instant::now();
        let mut load_phases = recovery::Phases::default();
        let health = Arc::new(Health::new());
        let commit_log = Arc::new(CommitLog::new(Arc::clone(&config), Arc::clone(&health)));
        commit_log.files().load()?;
        load_phases.lap("load_commit_log", &mut lap);
        let consume_queues = Arc::new(
            ConsumeQueueTable::new(config.consume_queue_dir(), config.consume_queue_file_size())
                .with_disk(disk.clone()),
        );
        consume_queues.load()?;
        load_phases.lap("load_queues", &mut lap);
        let index = if config.message_index_enable {
            let idx = IndexService::new(
                config.index_dir(),
                config.max_hash_slot_num,
                config.max_index_num,
            )
            .with_disk(disk.clone());
            idx.load()?;
            Some(Arc::new(idx))
        } else {
            None
        };
        load_phases.lap("load_index", &mut lap);
        let checkpoint = match Checkpoint::load_on(&disk, &config.checkpoint_path()) {
            Ok(c) => Arc::new(c),
            Err(e @ StoreError::Corrupt { .. }) => {
                // Recovering from the first file is always correct, only slower.
                tracing::error!(error = %e, "checkpoint unreadable; recovering from the oldest CommitLog file");
                let _ = disk.remove_file(&config.checkpoint_path());
                Arc::new(Checkpoint::load_on(&disk, &config.checkpoint_path())?)
            }
            Err(e) => return Err(e),
        };
        let dispatcher = Arc::new(Dispatcher::new(
            Arc::clone(&consume_queues),
            index.clone(),
            delays,
        ));

        let abort_path = config.abort_path();
        let abnormal = disk.exists(&abort_path);
        let external = matches!(source, MessageSource::External(_));
        let report = if external {
            // The records live elsewhere (ledger mode): only the ConsumeQueues'
            // own validity is checked here; the owner of the log re-dispatches.
            recovery::recover_consume_queues_only(&consume_queues)?
        } else {
            recovery::recover(
                &commit_log,
                &consume_queues,
                &dispatcher,
                &checkpoint,
                abnormal,
            )?
        };
        tracing::info!(
            abnormal = report.abnormal,
            log_end = report.log_end,
            scanned_bytes = report.bytes_scanned,
            cut_bytes = report.cut_bytes,
            elapsed_ms = report.elapsed.as_millis() as u64,
            stop = %report.stop,
            load = %load_phases,
            phases = %report.phases,
            "store recovered"
        );
        // Everything dispatched from here on: after an abnormal recovery the
        // scan already re-dispatched up to the end; after a normal one the
        // queues may lag the log.
        let reput_from = if report.abnormal {
            report.dispatch_stopped_at.unwrap_or(report.log_end)
        } else {
            let max_cq = consume_queues
                .all()
                .iter()
                .map(|q| q.max_physic_offset())
                .max()
                .unwrap_or(-1);
            max_cq.clamp(commit_log.min_offset(), report.log_end)
        };

        // The durable point recovery settled on reaches the disk before any
        // append: otherwise a power loss before the first checkpoint round
        // leaves a checkpoint without it (or none), and a torn unsynced tail
        // would be refused as middle corruption (the power-loss simulator
        // found this, seed 60). A full disk keeps the old checkpoint, which
        // is only slower to recover from.
        // So does the CRC-trailer rule for the records appended from here on.
        let old_rule = checkpoint.crc_trailer();
        if !external {
            let rule = crate::record_check::rule_after_open(&config, old_rule, report.log_end);
            checkpoint.set_crc_trailer(rule);
        }
        if !external && let Err(e) = checkpoint.flush() {
            // A rule on disk that this run would break (records without the
            // trailer past its start) must be withdrawn before the first
            // append, or the next recovery takes them for damage.
            if !e.is_no_space() || old_rule.is_some_and(|_| !config.append_prop_crc) {
                return Err(e);
            }
            tracing::warn!(error = %e, "disk full: the checkpoint keeps its last content");
        }

        // The abort marker: present while running, removed on clean shutdown.
        // Empty, as RocketMQ's: creating it needs no free block, so a store
        // on a full disk still opens.
        disk.create_marker(&abort_path)?;

        let log: Arc<dyn MessageLog> = match source {
            MessageSource::CommitLog => Arc::clone(&commit_log) as Arc<dyn MessageLog>,
            MessageSource::External(log) => log,
        };
        let store = MessageStore {
            total_memory: total_memory_bytes(),
            config: Arc::clone(&config),
            health: Arc::clone(&health),
            commit_log: Arc::clone(&commit_log),
            consume_queues: Arc::clone(&consume_queues),
            index: index.clone(),
            dispatcher: Arc::clone(&dispatcher),
            checkpoint: Arc::clone(&checkpoint),
            services: Mutex::new(None),
            recovery: report,
            shut_down: AtomicBool::new(false),
            log,
            external,
            lock: Mutex::new(lock),
        };
        let cq_flush = services::start_consume_queue_flush_service(
            Arc::clone(&commit_log),
            Arc::clone(&dispatcher),
            Arc::clone(&checkpoint),
            Arc::clone(&health),
        );
        // An external log's owner appends and dispatches; the local CommitLog
        // stays empty, and a prepared file would only hold reserved blocks.
        let log = (!external).then(|| store.start_commit_log_services(reput_from));
        *store.services.lock() = Some(Services { cq_flush, log });
        Ok(Arc::new(store))
    }

    /// Starts the threads that own the CommitLog: the file allocator, flush
    /// (and commit, with the transient pool), dispatch from `reput_from`,
    /// and cleanup.
    fn start_commit_log_services(&self, reput_from: i64) -> CommitLogServices {
        let commit_log = &self.commit_log;
        commit_log.start_allocator();
        let flush =
            services::start_flush_service(Arc::clone(commit_log), Arc::clone(&self.checkpoint));
        let commit = self
            .config
            .transient_store_pool_enable
            .then(|| services::start_commit_service(Arc::clone(commit_log)));
        let dispatch = Arc::new(DispatchService::start(
            Arc::clone(commit_log),
            Arc::clone(&self.dispatcher),
            reput_from,
        ));
        let cleanup = services::start_cleanup_service(
            Arc::clone(commit_log),
            Arc::clone(&self.consume_queues),
            self.index.clone(),
            Arc::clone(&dispatch),
        );
        CommitLogServices {
            flush,
            commit,
            cleanup,
            dispatch,
        }
    }

    /// The dispatch service of the store's own CommitLog (none with an
    /// external log, or after shutdown).
    pub(super) fn commit_log_dispatch(&self) -> Option<Arc<DispatchService>> {
        self.services
            .lock()
            .as_ref()
            .and_then(|s| s.log.as_ref())
            .map(|l| Arc::clone(&l.dispatch))
    }
}
