//! Assembling a job's outcome from its events: draws in chunks and blocks, retries, gaps,
//! failures, failovers, positions, bounds.

use super::*;
use sampler::{CheckedModel, Limits};

use crate::wire::{WirePoolKind, WireStats, WireTuning};

fn draws(first: u64, values: &[f64]) -> WireDraws {
    let mut stats = WireStats::default();
    for &value in values {
        stats.push(&DrawStats {
            lp: value,
            accept_stat: 0.8,
            step_size: 0.3,
            tree_depth: 1,
            n_leapfrog: 1,
            divergent: false,
            energy: 0.0,
        });
    }
    WireDraws {
        warmup: false,
        first,
        values: values.to_vec(),
        stats,
    }
}

fn progress(chain: u32, attempt: u32, first: u64, values: &[f64]) -> WireJobEvent {
    WireJobEvent::Progress {
        chain,
        attempt,
        iteration: first + values.len() as u64,
        total: 3,
        draws: Some(draws(first, values)),
    }
}

fn done(chain: u32, attempt: u32, n_draws: u64, node: &str) -> WireJobEvent {
    WireJobEvent::ChainDone {
        attempt,
        node: node.into(),
        done: WireChainDone {
            chain,
            n_columns: 1,
            n_draws,
            n_warmup_draws: 0,
            tuning: WireTuning {
                step_size: 0.3,
                inv_metric: vec![1.0],
                dense: false,
            },
            init: vec![0.0],
            final_position: vec![1.0],
            grad_evals_warmup: 5,
            grad_evals_sampling: 3,
            warmup_seconds: 0.0,
            sampling_seconds: 0.0,
            ran_on: None,
        },
    }
}

#[test]
fn chunks_and_retries_make_whole_traces() {
    let mut assembler = Assembler::new(JobId(9), 2);
    let events = vec![
        WireJobEvent::Placed {
            chains: vec![0, 1],
            node: "a@h".into(),
            pool: WirePoolKind::Cpu,
        },
        progress(0, 1, 0, &[1.0, 2.0]),
        progress(1, 1, 0, &[9.0]),
        progress(0, 1, 2, &[3.0]),
        done(0, 1, 3, "a@h"),
        WireJobEvent::Retried {
            chains: vec![1],
            node: "a@h".into(),
            reason: "a@h down".into(),
            attempt: 2,
        },
        // A late chunk of the first attempt is ignored.
        progress(1, 1, 1, &[9.5]),
        progress(1, 2, 0, &[4.0, 5.0, 6.0]),
        done(1, 2, 3, "b@h"),
    ];
    let mut updates = Vec::new();
    for event in events {
        updates.extend(assembler.apply(event).unwrap());
    }
    assert!(matches!(updates[0], JobUpdate::Placed { .. }));
    assert!(
        updates
            .iter()
            .any(|u| matches!(u, JobUpdate::Retried(r) if r[0].chain == ChainId(1)))
    );
    assert!(!assembler.is_finished());
    let retried = vec![WireRetry {
        chain: 1,
        node: "a@h".into(),
        reason: "a@h down".into(),
        attempt: 2,
    }];
    assembler.apply(WireJobEvent::Finished { retried }).unwrap();
    let outcome = assembler.finish().unwrap();
    assert_eq!(outcome.traces[0].draws, [1.0, 2.0, 3.0]);
    assert_eq!(outcome.traces[1].draws, [4.0, 5.0, 6.0]);
    assert_eq!(outcome.traces[1].stats.len(), 3);
    assert_eq!(outcome.placements[1].node.as_str(), "b@h");
    assert_eq!(outcome.placements[1].attempts, 2);
    assert_eq!(outcome.retried.len(), 1);
}

/// A block of `(chain, attempt, first, values)` entries (one value per draw), the same
/// draws as `progress` makes.
fn block(entries: &[(u32, u32, u64, &[f64])]) -> WireJobEvent {
    let mut block = WireDrawBlock::new(1, 3);
    for &(chain, _, first, values) in entries {
        let stats: Vec<_> = draws(first, values).stats.rows().collect();
        block.push(
            chain,
            false,
            first,
            first + values.len() as u64,
            values,
            &stats,
        );
    }
    WireJobEvent::Block {
        attempts: entries.iter().map(|e| e.1).collect(),
        block: block.into(),
    }
}

#[test]
fn blocks_make_the_traces_their_entries_would_as_progress_events() {
    let mut assembler = Assembler::new(JobId(9), 2);
    let events = vec![
        block(&[(0, 1, 0, &[1.0, 2.0]), (1, 1, 0, &[9.0])]),
        WireJobEvent::Retried {
            chains: vec![1],
            node: "a@h".into(),
            reason: "a@h down".into(),
            attempt: 2,
        },
        // The first attempt's entry is ignored, the second's taken.
        block(&[(0, 1, 2, &[3.0]), (1, 1, 1, &[9.5]), (1, 2, 0, &[4.0, 5.0])]),
        progress(1, 2, 2, &[6.0]),
        done(0, 1, 3, "a@h"),
        done(1, 2, 3, "b@h"),
        WireJobEvent::Finished { retried: vec![] },
    ];
    let mut progress_updates = Vec::new();
    for event in events {
        for update in assembler.apply(event).unwrap() {
            if let JobUpdate::Progress {
                chain, iteration, ..
            } = update
            {
                progress_updates.push((chain.0, iteration));
            }
        }
    }
    // Every entry of the chains' attempts says how far its chain got.
    assert_eq!(progress_updates, [(0, 2), (1, 1), (0, 3), (1, 2), (1, 3)]);
    let outcome = assembler.finish().unwrap();
    assert_eq!(outcome.traces[0].draws, [1.0, 2.0, 3.0]);
    assert_eq!(outcome.traces[1].draws, [4.0, 5.0, 6.0]);
    let lp: Vec<f64> = outcome.traces[1].stats.iter().map(|s| s.lp).collect();
    assert_eq!(lp, [4.0, 5.0, 6.0]);

    // A block with a gap, one whose attempts do not match its entries, and one that does
    // not check are errors.
    let mut assembler = Assembler::new(JobId(9), 1);
    assembler.apply(block(&[(0, 1, 0, &[1.0])])).unwrap();
    let gap = assembler.apply(block(&[(0, 1, 2, &[1.0])]));
    assert!(matches!(gap, Err(AssembleError::Protocol(_))), "{gap:?}");
    let WireJobEvent::Block { block: one, .. } = block(&[(0, 1, 1, &[1.0])]) else {
        unreachable!()
    };
    let attempts = assembler.apply(WireJobEvent::Block {
        attempts: vec![1, 1],
        block: one.clone(),
    });
    assert!(
        matches!(attempts, Err(AssembleError::Protocol(_))),
        "{attempts:?}"
    );
    let mut malformed = one;
    std::sync::Arc::make_mut(&mut malformed).values.pop();
    let malformed = assembler.apply(WireJobEvent::Block {
        attempts: vec![1],
        block: malformed,
    });
    assert!(
        matches!(malformed, Err(AssembleError::Protocol(_))),
        "{malformed:?}"
    );
}

#[test]
fn gaps_missing_chains_and_failures_are_errors() {
    let mut assembler = Assembler::new(JobId(9), 1);
    assembler.apply(progress(0, 1, 0, &[1.0])).unwrap();
    assert!(matches!(
        assembler.apply(progress(0, 1, 2, &[1.0])),
        Err(AssembleError::Protocol(_))
    ));
    assert!(matches!(
        assembler.apply(done(0, 1, 5, "a@h")),
        Err(AssembleError::Protocol(_))
    ));
    assert!(matches!(
        assembler.apply(progress(3, 1, 0, &[1.0])),
        Err(AssembleError::Protocol(_))
    ));
    assert_eq!(
        assembler.apply(WireJobEvent::Failed {
            error: "boom".into()
        }),
        Err(AssembleError::Failed("boom".into()))
    );
    let mut assembler = Assembler::new(JobId(9), 2);
    assembler.apply(progress(0, 1, 0, &[1.0])).unwrap();
    assembler.apply(done(0, 1, 1, "a@h")).unwrap();
    assembler
        .apply(WireJobEvent::Finished { retried: vec![] })
        .unwrap();
    assert!(matches!(
        assembler.finish(),
        Err(AssembleError::Protocol(_))
    ));
}

fn apply_all(assembler: &mut Assembler, events: Vec<WireJobEvent>) -> Vec<JobUpdate> {
    let mut updates = Vec::new();
    for event in events {
        updates.extend(assembler.apply(event).unwrap());
    }
    updates
}

fn name(text: &str) -> NodeName {
    text.parse().unwrap()
}

#[test]
fn a_failover_keeps_whole_chains_drops_partial_ones_and_takes_the_rest_from_the_new_job() {
    let mut assembler = Assembler::new(JobId(9), 3);
    apply_all(
        &mut assembler,
        vec![
            progress(0, 1, 0, &[1.0, 2.0]),
            done(0, 1, 2, "a@h"),
            // Chain 1 is half streamed when the coordinator is lost.
            progress(1, 1, 0, &[7.0]),
            // Chain 2 was retried once by the first coordinator, then half streamed.
            WireJobEvent::Retried {
                chains: vec![2],
                node: "c@h".into(),
                reason: "c@h down".into(),
                attempt: 2,
            },
            progress(2, 2, 0, &[8.0]),
        ],
    );
    assert_eq!(assembler.unfinished(), [1, 2]);
    let failover = assembler.fail_over(
        name("a@h"),
        "connection lost".into(),
        name("b@h"),
        JobId(10),
        &[1, 2],
    );
    assert_eq!(failover.chains, [ChainId(1), ChainId(2)]);
    assert_eq!(
        (failover.from.as_str(), failover.to.as_str()),
        ("a@h", "b@h")
    );

    // The new job may not touch the chain received whole.
    assert!(matches!(
        assembler.apply(progress(0, 1, 0, &[9.0])),
        Err(AssembleError::Protocol(_))
    ));
    assert!(matches!(
        assembler.apply(done(0, 1, 2, "b@h")),
        Err(AssembleError::Protocol(_))
    ));
    let updates = apply_all(
        &mut assembler,
        vec![
            progress(1, 1, 0, &[3.0, 4.0]),
            done(1, 1, 2, "b@h"),
            WireJobEvent::Retried {
                chains: vec![2],
                node: "b@h".into(),
                reason: "worker failed".into(),
                attempt: 2,
            },
            progress(2, 2, 0, &[5.0, 6.0]),
            done(2, 2, 2, "d@h"),
        ],
    );
    // Attempts count every job's.
    assert!(updates.contains(&JobUpdate::ChainDone {
        chain: ChainId(1),
        node: name("b@h"),
        attempt: 2
    }));
    assert!(updates.contains(&JobUpdate::ChainDone {
        chain: ChainId(2),
        node: name("d@h"),
        attempt: 4
    }));
    assert!(!assembler.is_finished());
    let retried = vec![WireRetry {
        chain: 2,
        node: "b@h".into(),
        reason: "worker failed".into(),
        attempt: 2,
    }];
    assembler.apply(WireJobEvent::Finished { retried }).unwrap();
    let outcome = assembler.finish().unwrap();
    assert_eq!(outcome.job, JobId(10));
    assert_eq!(outcome.traces[0].draws, [1.0, 2.0]);
    assert_eq!(outcome.traces[1].draws, [3.0, 4.0]);
    assert_eq!(outcome.traces[2].draws, [5.0, 6.0]);
    assert_eq!(outcome.traces[2].stats.len(), 2);
    let placed: Vec<(&str, u32)> = outcome
        .placements
        .iter()
        .map(|p| (p.node.as_str(), p.attempts))
        .collect();
    assert_eq!(placed, [("a@h", 1), ("b@h", 2), ("d@h", 4)]);
    // The first coordinator's retry, one per resubmitted chain naming the lost node, then
    // the new coordinator's (its attempt counted over both jobs).
    let retried: Vec<(u32, &str, u32)> = outcome
        .retried
        .iter()
        .map(|r| (r.chain.0, r.node.as_str(), r.attempt))
        .collect();
    assert_eq!(
        retried,
        [(2, "c@h", 2), (1, "a@h", 2), (2, "a@h", 3), (2, "b@h", 4)]
    );
    assert!(outcome.retried[1].reason.contains("connection lost"));
    assert_eq!(outcome.failovers, [failover]);
}

#[test]
fn a_coordinator_lost_after_the_last_chain_leaves_a_finished_job() {
    let mut assembler = Assembler::new(JobId(9), 2);
    apply_all(
        &mut assembler,
        vec![
            progress(0, 1, 0, &[1.0]),
            done(0, 1, 1, "a@h"),
            progress(1, 1, 0, &[2.0]),
        ],
    );
    assembler.complete_here();
    assert!(!assembler.is_finished());
    apply_all(&mut assembler, vec![done(1, 1, 1, "a@h")]);
    assert_eq!(assembler.unfinished(), Vec::<u32>::new());
    assembler.complete_here();
    assert!(assembler.is_finished());
    let outcome = assembler.finish().unwrap();
    assert_eq!(outcome.traces[1].draws, [2.0]);
    assert!(outcome.failovers.is_empty());
}

#[test]
fn notes_are_kept_across_failovers_once_each_and_bounded() {
    let note = |node: &str, text: &str| WireRunNote {
        node: node.into(),
        text: text.into(),
    };
    let mut assembler = Assembler::new(JobId(9), 2);
    let first = note("g@h", "GPU gpu0 (llvmpipe) f32 (auto: f32 agrees with f64)");
    // Every poll answer repeats the notes so far.
    assembler.note(vec![first.clone()]).unwrap();
    apply_all(
        &mut assembler,
        vec![progress(0, 1, 0, &[1.0]), done(0, 1, 1, "a@h")],
    );
    assembler.note(vec![first.clone()]).unwrap();
    assembler.fail_over(
        name("a@h"),
        "connection lost".into(),
        name("b@h"),
        JobId(10),
        &[1],
    );
    // The new coordinator's notes join the first one's; an answer's notes past the bound
    // are not read.
    let mut many = vec![note(
        "k@h",
        "CPU (the GPU refused the model): the model needs f64",
    )];
    many.extend((0..2 * MAX_NOTES).map(|i| note("k@h", &format!("note {i}"))));
    assembler.note(many).unwrap();
    // A note naming no node breaks the protocol.
    assert!(matches!(
        assembler.note(vec![note("not a node", "x")]),
        Err(AssembleError::Protocol(_))
    ));
    apply_all(
        &mut assembler,
        vec![progress(1, 1, 0, &[2.0]), done(1, 1, 1, "b@h")],
    );
    assembler
        .apply(WireJobEvent::Finished { retried: vec![] })
        .unwrap();
    let outcome = assembler.finish().unwrap();
    assert_eq!(outcome.notes.len(), MAX_NOTES);
    assert_eq!(
        outcome.notes[0].to_string(),
        "ran on node g@h: GPU gpu0 (llvmpipe) f32 (auto: f32 agrees with f64)"
    );
    assert_eq!(outcome.notes[1].node, name("k@h"));
    assert!(outcome.notes[1].text.starts_with("CPU (the GPU refused"));
    assert_eq!(
        outcome.notes[MAX_NOTES - 1].text,
        format!("note {}", MAX_NOTES - 3)
    );
}

#[test]
fn a_draining_coordinator_is_an_update() {
    let mut assembler = Assembler::new(JobId(9), 1);
    let updates = assembler
        .apply(WireJobEvent::Draining {
            node: "a@h".into(),
            grace_ms: 1500,
        })
        .unwrap();
    assert_eq!(
        updates,
        [JobUpdate::CoordinatorDraining {
            node: name("a@h"),
            grace: std::time::Duration::from_millis(1500)
        }]
    );
}

#[test]
fn room_made_ahead_changes_no_draw() {
    use crate::wire::WireDrawBlock;
    // Large enough for room: chains x draws x columns over ROOM_MIN_VALUES.
    let (n_chains, n_columns, draws) = (4096u32, 11usize, 100u64);
    let blocks: Vec<_> = (0..4u64)
        .map(|round| {
            let mut block = WireDrawBlock::new(n_columns, draws);
            for chain in 0..n_chains {
                let values: Vec<f64> = (0..25 * n_columns)
                    .map(|k| f64::from(chain) + (round * 1000 + k as u64) as f64)
                    .collect();
                let stats = vec![sampler::DrawStats::default(); 25];
                block.push(chain, false, round * 25, round * 25 + 25, &values, &stats);
            }
            block
        })
        .collect();
    let run = |room: bool| {
        let mut assembler = Assembler::new(JobId(9), n_chains);
        if room {
            assembler = assembler.with_room(draws);
        }
        for (i, block) in blocks.iter().enumerate() {
            let attempts = vec![1; n_chains as usize];
            assembler
                .apply(WireJobEvent::Block {
                    attempts,
                    block: block.clone().into(),
                })
                .unwrap();
            if room && i == 0 {
                assembler.wait_for_room();
            }
        }
        assembler
            .chains
            .iter()
            .map(|p| (p.draws.clone(), p.draws.capacity()))
            .collect::<Vec<_>>()
    };
    let (plain, roomy) = (run(false), run(true));
    for ((a, _), (b, capacity)) in plain.iter().zip(&roomy) {
        assert_eq!(a, b);
        assert_eq!(*capacity, draws as usize * n_columns, "the room's capacity");
    }
}

/// A chain's draws as an assembler took them in: kept values and statistics, warmup ones.
type TakenIn = (Vec<f64>, Vec<DrawStats>, Vec<f64>, Vec<DrawStats>);

fn taken_in(assembler: &Assembler) -> Vec<TakenIn> {
    assembler
        .chains
        .iter()
        .map(|p| {
            (
                p.draws.clone(),
                p.stats.clone(),
                p.warmup_draws.clone(),
                p.warmup_stats.clone(),
            )
        })
        .collect()
}

/// A large block is taken in chain by chain on several threads, whatever the order of its
/// chains: the traces equal those of the same entries in chain order, in reverse, and in
/// rounds (every chain's warmup entry, then every chain's kept one, as a GPU task's part
/// sends them), and those of small blocks taken in one after another; a gap or a chain the
/// job lacks is still an error.
#[test]
fn a_large_block_taken_in_side_by_side_equals_one_taken_in_in_turn() {
    use crate::wire::WireDrawBlock;
    let (n_chains, n_columns) = (2048u32, 9usize);
    let entry = |chain: u32, warmup: bool, draws: usize| {
        let values: Vec<f64> = (0..draws * n_columns)
            .map(|k| f64::from(chain) * 1e3 + k as f64 + if warmup { 0.5 } else { 0.0 })
            .collect();
        let stats: Vec<DrawStats> = (0..draws)
            .map(|k| DrawStats {
                lp: -(k as f64) - f64::from(chain),
                tree_depth: chain % 7,
                divergent: k % 3 == 0,
                ..DrawStats::default()
            })
            .collect();
        (chain, warmup, values, stats)
    };
    let mut entries: Vec<_> = (0..n_chains)
        .flat_map(|chain| [entry(chain, true, 8), entry(chain, false, 10)])
        .collect();
    let make_block = |entries: &[(u32, bool, Vec<f64>, Vec<DrawStats>)]| {
        let mut block = WireDrawBlock::new(n_columns, 18);
        for (chain, warmup, values, stats) in entries {
            let iteration = if *warmup { 8 } else { 18 };
            block.push(*chain, *warmup, 0, iteration, values, stats);
        }
        assert!(block.values.len() >= PARALLEL_BLOCK_BYTES);
        block
    };
    let event = |block: WireDrawBlock| WireJobEvent::Block {
        attempts: vec![1; block.n_entries()],
        block: block.into(),
    };
    let make = |entries: &[(u32, bool, Vec<f64>, Vec<DrawStats>)]| event(make_block(entries));
    let traces = |event: WireJobEvent| {
        let mut assembler = Assembler::new(JobId(3), n_chains);
        let updates = assembler.apply(event).unwrap();
        assert_eq!(
            updates.len(),
            2 * n_chains as usize,
            "a progress update per entry"
        );
        taken_in(&assembler)
    };
    let side_by_side = traces(make(&entries));
    // Chains in descending order (each chain's own entries still in order): one by one.
    let mut in_turn: Vec<_> = entries.chunks(2).rev().flatten().cloned().collect();
    assert_eq!(traces(make(&in_turn)), side_by_side);
    let rounds: Vec<_> = (0..2)
        .flat_map(|round| entries.iter().skip(round).step_by(2).cloned())
        .collect();
    assert_eq!(traces(make(&rounds)), side_by_side);
    // Small blocks, below the parallel threshold, one after another.
    let mut assembler = Assembler::new(JobId(3), n_chains);
    for part in rounds.chunks(8) {
        let block = {
            let mut block = WireDrawBlock::new(n_columns, 18);
            for (chain, warmup, values, stats) in part {
                let iteration = if *warmup { 8 } else { 18 };
                block.push(*chain, *warmup, 0, iteration, values, stats);
            }
            assert!(block.values.len() < PARALLEL_BLOCK_BYTES);
            block
        };
        assembler.apply(event(block)).unwrap();
    }
    assert_eq!(taken_in(&assembler), side_by_side);
    // The same small blocks taken in at once (as a poll's answer is): one pass, chains side
    // by side, each chain's entries across the blocks in order.
    let mut assembler = Assembler::new(JobId(3), n_chains);
    let blocks: Vec<_> = rounds
        .chunks(rounds.len() / 5 + 1)
        .map(|part| {
            let mut block = WireDrawBlock::new(n_columns, 18);
            for (chain, warmup, values, stats) in part {
                let iteration = if *warmup { 8 } else { 18 };
                block.push(*chain, *warmup, 0, iteration, values, stats);
            }
            (vec![1; block.n_entries()], std::sync::Arc::new(block))
        })
        .collect();
    let bytes: usize = blocks.iter().map(|(_, block)| block.values.len()).sum();
    assert!(bytes >= PARALLEL_BLOCK_BYTES);
    let updates = assembler.apply_blocks(&blocks).unwrap();
    assert_eq!(updates.len(), 2 * n_chains as usize);
    assert_eq!(taken_in(&assembler), side_by_side);
    assert_eq!(side_by_side[5].0.len(), 10 * n_columns);
    assert_eq!(side_by_side[5].2.len(), 8 * n_columns);
    // A gap: chain 7's kept draws start at 3.
    in_turn.clear();
    let mut gap = make_block(&entries);
    let at = (2 * 7 + 1) * 8;
    gap.first[at..at + 8].copy_from_slice(&3u64.to_le_bytes());
    let gap = event(gap);
    let mut assembler = Assembler::new(JobId(3), n_chains);
    let error = format!("{:?}", assembler.apply(gap).unwrap_err());
    assert!(error.contains("chain 7"), "{error}");
    // A chain the job does not run.
    entries.push(entry(n_chains, false, 10));
    let mut assembler = Assembler::new(JobId(3), n_chains);
    let error = format!("{:?}", assembler.apply(make(&entries)).unwrap_err());
    assert!(error.contains(&format!("chain {n_chains}")), "{error}");
}

/// eight_schools_noncentered: 10 coordinates, 18 values per draw (`tau` and `theta` are
/// transformed).
fn eight_schools() -> CheckedModel {
    let path = format!(
        "{}/../models/eight_schools_noncentered.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    CheckedModel::from_json(&text, &Limits::default()).unwrap()
}

/// Blocks of positions, small and large (taken in side by side), packed to f32s, are taken
/// in as the values the model's writer writes from each position; the statistics as sent.
#[test]
fn blocks_of_positions_are_taken_in_as_the_values_written_from_them() {
    use crate::wire::WireDrawBlock;
    let model = eight_schools();
    let mut writer = OutputWriter::new(model.program());
    let (dim, n_columns) = (writer.dim(), writer.n_columns());
    assert!(n_columns > dim);
    for n_chains in [3u32, 4096] {
        let position = |chain: u32, draw: u64| -> Vec<f64> {
            (0..dim)
                .map(|k| f64::from(((chain as f32) * 0.01 + draw as f32 * 0.1 - k as f32).sin()))
                .collect()
        };
        let mut block = WireDrawBlock::new(dim, 4);
        block.positions = true;
        for chain in 0..n_chains {
            let q: Vec<f64> = (0..4).flat_map(|draw| position(chain, draw)).collect();
            let stats = vec![DrawStats::default(); 4];
            block.push(chain, false, 0, 4, &q, &stats);
        }
        block.pack();
        assert!(block.widths[..dim].iter().all(|&w| w == 4), "f32 positions");
        let mut assembler = Assembler::new(JobId(9), n_chains).with_positions(writer.clone());
        assembler
            .apply(WireJobEvent::Block {
                attempts: vec![1; n_chains as usize],
                block: block.into(),
            })
            .unwrap();
        for (chain, partial) in assembler.chains.iter().enumerate() {
            let mut expected = vec![0.0; 4 * n_columns];
            for (draw, out) in expected.chunks_exact_mut(n_columns).enumerate() {
                writer.write(&position(chain as u32, draw as u64), out);
            }
            assert_eq!(partial.draws, expected, "chain {chain}");
            assert_eq!(partial.stats.len(), 4);
        }
    }
}

/// A block of positions is refused where the client did not ask for them, and where its
/// positions are not the model's dimension.
#[test]
fn a_block_of_positions_not_asked_for_or_of_another_dimension_is_refused() {
    use crate::wire::WireDrawBlock;
    let model = eight_schools();
    let writer = OutputWriter::new(model.program());
    let block = |dim: usize| {
        let mut block = WireDrawBlock::new(dim, 1);
        block.positions = true;
        block.push(0, false, 0, 1, &vec![0.5; dim], &[DrawStats::default()]);
        WireJobEvent::Block {
            attempts: vec![1],
            block: block.into(),
        }
    };
    let error = Assembler::new(JobId(9), 1)
        .apply(block(writer.dim()))
        .unwrap_err();
    assert!(
        format!("{error:?}").contains("a block of positions, which this client did not ask for"),
        "{error:?}"
    );
    let error = Assembler::new(JobId(9), 1)
        .with_positions(writer.clone())
        .apply(block(writer.dim() + 1))
        .unwrap_err();
    assert!(
        format!("{error:?}")
            .contains("a block of positions of 11 coordinates for a model of dimension 10"),
        "{error:?}"
    );
}

/// A chain that brings more draws than the job asked for is refused before they are held,
/// in a block (of values or positions) or in a chain's own events.
#[test]
fn draws_beyond_the_job_s_are_refused() {
    use crate::wire::WireDrawBlock;
    let block = |first: u64, n: usize| {
        let mut block = WireDrawBlock::new(1, 10);
        let stats = vec![DrawStats::default(); n];
        block.push(0, false, first, first + n as u64, &vec![0.5; n], &stats);
        WireJobEvent::Block {
            attempts: vec![1],
            block: block.into(),
        }
    };
    let mut assembler = Assembler::new(JobId(9), 1).with_most_draws(3, 0);
    assembler.apply(block(0, 2)).unwrap();
    let error = assembler.apply(block(2, 2)).unwrap_err();
    assert!(
        format!("{error:?}").contains("4 kept draws arrived, more than the job's 3"),
        "{error:?}"
    );
    let mut assembler = Assembler::new(JobId(9), 1).with_most_draws(3, 0);
    let error = assembler
        .apply(progress(0, 1, 0, &[1.0, 2.0, 3.0, 4.0]))
        .unwrap_err();
    assert!(
        format!("{error:?}").contains("more than the job's 3"),
        "{error:?}"
    );
    let mut warmup = draws(0, &[1.0]);
    warmup.warmup = true;
    let error = Assembler::new(JobId(9), 1)
        .with_most_draws(3, 0)
        .apply(WireJobEvent::Progress {
            chain: 0,
            attempt: 1,
            iteration: 1,
            total: 3,
            draws: Some(warmup),
        })
        .unwrap_err();
    assert!(
        format!("{error:?}").contains("1 warmup draws arrived"),
        "{error:?}"
    );
}
