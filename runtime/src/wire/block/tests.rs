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

/// Checks that every entry of `packed` gives what the same entry of `plain` gives, bit for
/// bit, directly and through an envelope.
fn check_same_draws(plain: &WireDrawBlock, packed: &WireDrawBlock) {
    let sender = NodeName::new("a", "127.0.0.1").unwrap();
    let bytes = Envelope::new(RequestId(1), &sender, packed.clone())
        .encode()
        .unwrap();
    let decoded = Envelope::<WireDrawBlock>::decode(&bytes).unwrap().body;
    assert_eq!(&decoded, packed);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let plain_entries = plain.entries().unwrap();
    let entries = decoded.entries().unwrap();
    assert_eq!(entries, plain_entries);
    for entry in &entries {
        let (a, b) = (plain.draws(entry), decoded.draws(entry));
        assert_eq!(bits(&a.values), bits(&b.values));
        assert_eq!(
            a.stats.rows().collect::<Vec<_>>(),
            b.stats.rows().collect::<Vec<_>>()
        );
        let mut appended = vec![9.5];
        decoded.append_values_of(entry, &mut appended);
        assert_eq!(bits(&appended[1..]), bits(&a.values));
        assert_eq!(
            bits(&decoded.values_of(entry).collect::<Vec<_>>()),
            bits(&a.values)
        );
    }
    let kept = decoded.select(&entries, &[0, entries.len() - 1]);
    let plain_kept = plain.select(&plain_entries, &[0, entries.len() - 1]);
    for (a, b) in plain_kept
        .entries()
        .unwrap()
        .iter()
        .zip(kept.entries().unwrap())
    {
        assert_eq!(
            bits(&plain_kept.draws(a).values),
            bits(&kept.draws(&b).values)
        );
        assert_eq!(plain_kept.draws(a).stats, kept.draws(&b).stats);
    }
}

#[test]
fn packing_narrows_only_what_round_trips_and_the_reader_gets_the_same_draws() {
    // The sample: column 0 holds 1e300 (not an f32), column 1 NaN, -0.0 and small
    // integers (all f32s); energy has thirds (not f32s).
    let (plain, _) = sample();
    let mut packed = plain.clone();
    packed.pack();
    assert_eq!(packed.widths.len(), 2 + 6);
    assert_eq!(
        packed.widths,
        [8, 4, 4, 4, 4, 1, 2, 8],
        "values, then lp, accept, step, depth, leapfrog, energy"
    );
    check_same_draws(&plain, &packed);
    assert!(packed.estimated_bytes() < plain.estimated_bytes());

    // Every number an f32: values and floats at 4 bytes.
    let mut f32s = WireDrawBlock::new(3, 50);
    let stats: Vec<DrawStats> = (0..5)
        .map(|k| DrawStats {
            lp: -0.25 * f64::from(k),
            accept_stat: 0.5,
            step_size: f64::from(0.3f32),
            tree_depth: 300 * k,
            n_leapfrog: 70_000 * k,
            divergent: false,
            energy: f64::from(k),
        })
        .collect();
    let values: Vec<f64> = (0..15).map(|k| f64::from(k as f32 * 0.1f32)).collect();
    f32s.push(3, false, 0, 7, &values[..6], &stats[..2]);
    f32s.push(5, false, 0, 7, &values[6..], &stats[2..]);
    let mut packed = f32s.clone();
    packed.pack();
    assert_eq!(
        packed.widths,
        [4, 4, 4, 4, 4, 4, 4, 4, 4],
        "depths and leapfrogs stay wide"
    );
    assert_eq!(packed.values.len(), 15 * 4);
    check_same_draws(&f32s, &packed);
    let mut twice = packed.clone();
    twice.pack();
    assert_eq!(twice, packed, "packing a packed block changes nothing");

    // Nothing narrows: the block stays unpacked.
    let mut wide = WireDrawBlock::new(1, 10);
    let third = DrawStats {
        lp: 1.0 / 3.0,
        accept_stat: 1.0 / 3.0,
        step_size: 1.0 / 3.0,
        tree_depth: 1 << 20,
        n_leapfrog: 1 << 20,
        divergent: true,
        energy: 1.0 / 3.0,
    };
    wide.push(0, true, 0, 1, &[0.1], &[third]);
    let before = wide.clone();
    wide.pack();
    assert_eq!(wide, before);
}

#[test]
fn packed_blocks_with_wrong_widths_are_refused() {
    let (plain, _) = sample();
    let mut packed = plain.clone();
    packed.pack();
    let refused = |broken: &dyn Fn(&mut WireDrawBlock), what: &str| {
        let mut block = packed.clone();
        broken(&mut block);
        let error = block.entries().unwrap_err();
        assert!(error.contains(what), "{error}");
    };
    refused(&|b| b.widths.pop().map(drop).unwrap_or(()), "widths");
    refused(&|b| b.widths.push(4), "widths");
    refused(&|b| b.widths[0] = 2, "2 bytes wide");
    refused(&|b| b.widths[2 + 3] = 2, "2 bytes wide");
    refused(&|b| b.widths[2 + 4] = 1, "1 bytes wide");
    // A width that changes a column's size: its bytes no longer match.
    refused(&|b| b.widths[2] = 8, "lp");
    refused(&|b| b.widths[0] = 4, "values");
    // Widths of a block with a huge column count: refused, nothing sized from it.
    refused(&|b| b.n_columns = u32::MAX, "widths");
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
