//! Gradients per second of the CPU evaluator on posteriordb's programs: a benchmark of the
//! evaluator alone (no sampler), for comparing evaluator changes.
//!
//! `cargo run --release -p stan --example grad_rate -- [FILTER...]` prints, per posterior
//! whose name contains a filter (all without one), the program's instruction count, its
//! tape length and the median over 3 rounds of `logp_grad` calls per second at a fixed
//! point (the unconstrained point 0.1, 0.2, ...), each round about 1 s. With `DUMP_IR=1` it
//! also prints each model's IR (JSON), with `DUMP=1` its instruction mix, to stderr.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sampler::{Evaluator, LogDensity};

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/posteriordb");
    let mut names: Vec<String> = std::fs::read_dir(dir.join("reference"))
        .expect("stan/tests/posteriordb/reference")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".json")?.to_owned())
        })
        .filter(|name| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    names.sort();
    println!("| posterior | instructions | tape | gradients/s |");
    println!("|---|---:|---:|---:|");
    for name in names {
        let Some((data, model)) = name.split_once('-') else {
            continue;
        };
        let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
        let source = read(&dir.join("models").join(format!("{model}.stan")));
        let data_json = read(&dir.join("data").join(format!("{data}.json")));
        let checked = match stan::posteriordb::load(&source, &data_json, &name) {
            Ok(checked) => checked,
            Err(err) => {
                println!("| {name} | - | - | not lowered: {} |", err.message);
                continue;
            }
        };
        let program = checked.program().clone();
        if std::env::var_os("DUMP_IR").is_some() {
            eprintln!(
                "{}",
                serde_json::to_string(checked.model()).unwrap_or_default()
            );
        }
        if std::env::var_os("DUMP").is_some() {
            dump(&program);
        }
        let mut evaluator = Evaluator::new(Arc::clone(&program));
        let dim = evaluator.dim();
        let theta: Vec<f64> = (0..dim).map(|i| 0.1 * ((i % 7) as f64 + 1.0)).collect();
        let mut grad = vec![0.0; dim];
        let mut rates = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let mut calls = 0u64;
            while start.elapsed() < Duration::from_secs(1) {
                for _ in 0..16 {
                    std::hint::black_box(
                        evaluator.logp_grad(std::hint::black_box(&theta), &mut grad),
                    );
                }
                calls += 16;
            }
            rates.push(calls as f64 / start.elapsed().as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "| {name} | {} | {} | {:.0} |",
            program.insts.len(),
            program.tape_len,
            rates[1]
        );
    }
}
/// Prints the program's instruction mix (kind, whether it writes one value) to stderr.
fn dump(program: &sampler::Program) {
    let mut counts = std::collections::BTreeMap::new();
    for inst in &program.insts {
        let kind = format!("{inst:?}");
        let kind = kind
            .split([' ', '{', '('])
            .next()
            .unwrap_or_default()
            .to_owned();
        let detail = match inst {
            sampler::Inst::Map { op, .. } => format!("{op:?}"),
            sampler::Inst::Zip { op, .. } => format!("{op:?}"),
            sampler::Inst::Density { kind, .. } => format!("{kind:?}"),
            _ => String::new(),
        };
        let scalar = inst.writes().map(|dst| program.slot(dst).len == 1);
        *counts.entry((kind, detail, scalar)).or_insert(0) += 1;
    }
    for ((kind, detail, scalar), n) in counts {
        eprintln!("{n:6} {kind} {detail} scalar={scalar:?}");
    }
}
