//! Blocks of draws: what goes in comes out, through MessagePack, and a block whose columns
//! do not match its counts is refused before anything reads it.

use sampler::DrawStats;

use super::*;
use crate::ids::{NodeName, RequestId};
use crate::wire::Envelope;

fn stats(k: u32) -> DrawStats {
    DrawStats {
        lp: -1.5 * f64::from(k),
        accept_stat: 0.25 + f64::from(k) / 64.0,
        step_size: 0.125 * f64::from(k + 1),
        tree_depth: k % 7,
        n_leapfrog: 3 * k + 1,
        divergent: k.is_multiple_of(3),
        energy: 2.0 + f64::from(k) / 3.0,
    }
}

/// An entry as pushed: chain, warmup, first draw, values, statistics.
type Entry = (u32, bool, u64, Vec<f64>, Vec<DrawStats>);

/// Four entries: chain 4's warmup draws, chain 4's kept ones, chain 9's progress only,
/// chain 2's kept ones; two columns per draw.
fn sample() -> (WireDrawBlock, Vec<Entry>) {
    let entries = vec![
        (
            4,
            true,
            10,
            vec![1.0, 2.0, 3.0, 4.0],
            vec![stats(1), stats(2)],
        ),
        (4, false, 0, vec![5.0, -6.0], vec![stats(3)]),
        (9, false, 7, vec![], vec![]),
        (
            2,
            false,
            3,
            vec![0.5, f64::NAN, 1e300, -0.0, 7.0, 8.0],
            vec![stats(4), stats(5), stats(6)],
        ),
    ];
    let mut block = WireDrawBlock::new(2, 100);
    block.reserve(4, 6);
    for (chain, warmup, first, values, stats) in &entries {
        block.push(*chain, *warmup, *first, 42, values, stats);
    }
    assert_eq!(
        block.values.capacity(),
        block.values.len(),
        "room for every value"
    );
    (block, entries)
}

#[test]
fn a_block_round_trips_through_an_envelope_and_gives_each_entry_its_draws() {
    let (block, expected) = sample();
    let sender = NodeName::new("a", "127.0.0.1").unwrap();
    let bytes = Envelope::new(RequestId(1), &sender, block.clone())
        .encode()
        .unwrap();
    let decoded = Envelope::<WireDrawBlock>::decode(&bytes).unwrap().body;
    assert_eq!(decoded.total, 100);
    let entries = decoded.entries().unwrap();
    assert_eq!(entries.len(), expected.len());
    for (entry, (chain, warmup, first, values, stats)) in entries.iter().zip(&expected) {
        assert_eq!(
            (entry.chain, entry.warmup, entry.first, entry.iteration),
            (*chain, *warmup, *first, 42)
        );
        let draws = decoded.draws(entry);
        assert_eq!(draws.warmup, *warmup);
        assert_eq!(draws.first, *first);
        // Bit for bit (NaN included).
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&draws.values), bits(values));
        assert_eq!(draws.stats.rows().collect::<Vec<_>>(), *stats);
        assert_eq!(
            bits(&decoded.values_of(entry).collect::<Vec<_>>()),
            bits(values)
        );
        let mut appended = vec![9.5];
        decoded.append_values_of(entry, &mut appended);
        assert_eq!(bits(&appended[1..]), bits(values));
        assert_eq!(appended[0], 9.5);
        assert_eq!(decoded.stats_of(entry).collect::<Vec<_>>(), *stats);
    }
    // Raw bytes: a few bytes of framing per column, not one MessagePack value per number.
    assert!(
        bytes.len() < block.estimated_bytes(),
        "{} bytes",
        bytes.len()
    );
}

#[test]
fn select_keeps_the_chosen_entries_and_their_draws() {
    let (block, expected) = sample();
    let entries = block.entries().unwrap();
    let kept = block.select(&entries, &[1, 3]);
    let kept_entries = kept.entries().unwrap();
    assert_eq!(kept_entries.len(), 2);
    for (entry, index) in kept_entries.iter().zip([1, 3]) {
        let (chain, _, first, values, stats) = &expected[index];
        assert_eq!((entry.chain, entry.first), (*chain, *first));
        let draws = kept.draws(entry);
        assert_eq!(draws.values.len(), values.len());
        assert_eq!(draws.stats.rows().collect::<Vec<_>>(), *stats);
    }
}

/// Checks that `broken` is refused with an error naming `what`.
fn check_refused(broken: impl FnOnce(&mut WireDrawBlock), what: &str) {
    let (mut block, _) = sample();
    broken(&mut block);
    let error = block.entries().unwrap_err();
    assert!(error.contains(what), "{error}");
}

#[test]
fn malformed_blocks_are_refused() {
    check_refused(|b| b.chains.pop().map(drop).unwrap_or(()), "chains");
    check_refused(|b| b.iteration.extend_from_slice(&[0; 8]), "iteration");
    check_refused(|b| b.first.truncate(3), "first");
    check_refused(|b| b.lp.extend_from_slice(&[0; 8]), "lp");
    check_refused(|b| b.tree_depth.truncate(4), "tree_depth");
    check_refused(|b| b.energy.clear(), "energy");
    check_refused(|b| b.values.truncate(8), "values");
    check_refused(|b| b.n_columns = 3, "values");
    check_refused(|b| b.n_columns = u32::MAX, "values");
    check_refused(|b| b.divergent[0] = 2, "flag");
    check_refused(|b| b.warmup[1] = 7, "flag");
    // A count larger than the draws (a huge one too: nothing is sized from it).
    check_refused(
        |b| b.count[0..4].copy_from_slice(&u32::MAX.to_le_bytes()),
        "count more",
    );
    check_refused(
        |b| b.count[0..4].copy_from_slice(&3u32.to_le_bytes()),
        "count more",
    );
    // Counts that leave draws over.
    check_refused(
        |b| b.count[12..16].copy_from_slice(&2u32.to_le_bytes()),
        "holds 6",
    );
}

#[test]
fn an_empty_block_has_no_entries() {
    assert_eq!(WireDrawBlock::new(3, 10).entries().unwrap(), Vec::new());
}
