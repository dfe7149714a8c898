//! The summary of many chains: computed in parallel exactly as `RunSummary::new` computes it,
//! printed with one line for all chains and one warning for all low E-BFMIs; the hint added
//! to a GPU's refusal of f32.

use sampler::{ChainId, ChainTrace, DrawStats, SamplerSettings, Tuning};

use super::{MAX_CHAIN_LINES, summary_text, with_hint};

/// A chain of one column; its energy either alternates (a high E-BFMI) or drifts (low).
fn trace(chain: u32, low_ebfmi: bool) -> ChainTrace {
    let n_draws = 200;
    let draws: Vec<f64> = (0..n_draws)
        .map(|i| ((i * 7919 + chain as usize * 104_729) % 1000) as f64 / 1000.0)
        .collect();
    let stats = (0..n_draws)
        .map(|i| DrawStats {
            lp: -draws[i],
            accept_stat: 0.8,
            step_size: 0.5 + f64::from(chain) / 100.0,
            tree_depth: 2,
            n_leapfrog: 3,
            divergent: chain == 3 && i < 2,
            energy: if low_ebfmi {
                i as f64
            } else if i % 2 == 0 {
                1.0
            } else {
                -1.0
            },
        })
        .collect();
    ChainTrace {
        chain: ChainId(chain),
        n_columns: 1,
        warmup_draws: Vec::new(),
        warmup_stats: Vec::new(),
        draws,
        stats,
        tuning: Tuning {
            step_size: 0.5 + f64::from(chain) / 100.0,
            inv_metric: vec![1.0],
            dense: false,
        },
        init: vec![0.0],
        final_position: vec![0.0],
        grad_evals_warmup: 0,
        grad_evals_sampling: 0,
        warmup_seconds: 0.0,
        sampling_seconds: 0.0,
    }
}

fn summary(n_chains: u32, low: &[u32]) -> sampler::RunSummary {
    let traces: Vec<ChainTrace> = (0..n_chains).map(|c| trace(c, low.contains(&c))).collect();
    let columns = [sampler::Column {
        name: "mu".into(),
        index: None,
        dims: Vec::new(),
    }];
    sampler::RunSummary::new(&columns, 1, &traces, &SamplerSettings::default())
}

#[test]
fn a_few_chains_get_a_line_each() {
    let text = summary_text(summary(4, &[1]));
    assert!(text.contains("chain 3: step size"), "{text}");
    assert!(text.contains("warning: chain 1: E-BFMI"), "{text}");
}

#[test]
fn many_chains_get_one_line_and_one_e_bfmi_warning() {
    let n = MAX_CHAIN_LINES as u32 + 24;
    let text = summary_text(summary(n, &[2, 5, 30]));
    assert!(!text.contains("chain 3: step size"), "{text}");
    let chains_line = text
        .lines()
        .find(|line| line.starts_with(&format!("{n} chains: step size")))
        .unwrap_or_else(|| panic!("no line for all chains in:\n{text}"));
    assert!(
        chains_line.contains("2 divergent in 1 chains"),
        "{chains_line}"
    );
    let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with("warning:")).collect();
    assert!(
        warnings.iter().all(|w| !w.starts_with("warning: chain ")),
        "{warnings:?}"
    );
    let ebfmi: Vec<&&str> = warnings.iter().filter(|w| w.contains("E-BFMI")).collect();
    assert_eq!(ebfmi.len(), 1, "{warnings:?}");
    assert!(
        ebfmi[0].contains(&format!("3 of {n} chains")),
        "{}",
        ebfmi[0]
    );
    // The table comes first, then the chains line, then the warnings.
    let table = text.find("mu ").expect("the table");
    let chains = text.find(chains_line).expect("the chains line");
    let first_warning = text.find("warning:").expect("a warning");
    assert!(table < chains && chains < first_warning, "{text}");
}

/// The library's refusal names no flag; the command adds how to insist on f32, to that
/// refusal only.
#[test]
fn a_refusal_of_f32_says_how_to_insist() {
    let error = gpu_actor::GpuError::NeedsF64 {
        adapter: "llvmpipe".into(),
        found: "f32 log density off by 2.2e0".into(),
    };
    let message = error.to_string();
    assert!(!message.contains("--"), "{message}");
    let hinted = with_hint(&message);
    assert!(
        hinted.starts_with(&message) && hinted.contains("--precision f32"),
        "{hinted}"
    );
    let other = "GPU adapter llvmpipe cannot run this model: one leapfrog step takes too long";
    assert_eq!(with_hint(other), other);
}

/// So does a GPU that computes the model wrongly: the command adds how to sample on the CPU.
#[test]
fn a_wrong_gpu_density_says_how_to_sample_on_the_cpu() {
    let error = gpu_actor::GpuError::DensityMismatch {
        adapter: "llvmpipe".into(),
        chain: 1,
        point: gpu_actor::CheckedPoint::Initial,
        what: "log density: gpu -3.5 cpu -3.25".into(),
    };
    let message = error.to_string();
    assert!(!message.contains("--"), "{message}");
    let hinted = with_hint(&message);
    assert!(
        hinted.starts_with(&message) && hinted.contains("--device cpu"),
        "{hinted}"
    );
    assert!(!hinted.contains("--precision"), "{hinted}");
}
