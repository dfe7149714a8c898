use super::*;
use crate::rng::ChainId;
use crate::sample::Tuning;

#[test]
fn file_names_follow_cmdstan() {
    assert_eq!(chain_file_names("out/draws.csv", 1), vec!["out/draws.csv"]);
    assert_eq!(
        chain_file_names("out/draws.csv", 2),
        vec!["out/draws_1.csv", "out/draws_2.csv"]
    );
    assert_eq!(
        chain_file_names("a.b/draws", 2),
        vec!["a.b/draws_1", "a.b/draws_2"]
    );
}

/// A chain of three draws of one column, with saved warmup when `save_warmup`.
fn trace(save_warmup: bool) -> ChainTrace {
    let stats = DrawStats {
        lp: -1.5,
        accept_stat: 0.9,
        step_size: 0.7,
        tree_depth: 2,
        n_leapfrog: 3,
        divergent: false,
        energy: 2.0,
    };
    let n_warmup = if save_warmup { 2 } else { 0 };
    ChainTrace {
        chain: ChainId(0),
        n_columns: 1,
        warmup_draws: vec![0.25; n_warmup],
        warmup_stats: vec![stats; n_warmup],
        draws: vec![0.5, -0.5, 1.5],
        stats: vec![stats; 3],
        tuning: Tuning {
            step_size: 0.7,
            inv_metric: vec![1.25],
            dense: false,
        },
        init: vec![0.0],
        final_position: vec![1.5],
        grad_evals_warmup: 10,
        grad_evals_sampling: 9,
        warmup_seconds: 0.5,
        sampling_seconds: 0.25,
    }
}

fn written(trace: &ChainTrace, settings: &SamplerSettings) -> String {
    let columns = [Column {
        name: "mu".into(),
        index: None,
        dims: Vec::new(),
    }];
    let context = CsvContext {
        model_name: "m",
        columns: &columns,
        settings,
        seed: Seed(1),
        file_name: "draws.csv",
    };
    let mut out = Vec::new();
    write_chain(&mut out, &context, trace).expect("writing to a vector");
    String::from_utf8(out).expect("utf-8")
}

/// The file ends with CmdStan's timing block, and has it once.
#[test]
fn one_timing_block_at_the_end_as_cmdstan_writes_it() {
    let timing = "# \n\
                  #  Elapsed Time: 0.500000 seconds (Warm-up)\n\
                  #                0.250000 seconds (Sampling)\n\
                  #                0.750000 seconds (Total)\n\
                  # \n";
    for save_warmup in [false, true] {
        let settings = SamplerSettings {
            save_warmup,
            ..SamplerSettings::default()
        };
        let csv = written(&trace(save_warmup), &settings);
        assert!(csv.ends_with(timing), "{csv}");
        assert_eq!(csv.matches("Elapsed Time").count(), 1, "{csv}");
        assert_eq!(csv.matches("seconds (").count(), 3, "{csv}");
        // The last draw comes right before the block.
        let body = &csv[..csv.len() - timing.len()];
        assert!(body.ends_with("\n-1.5,0.9,0.7,2,3,0,2,1.5\n"), "{csv}");
    }
}

/// The header states the jitter in effect: none unless asked for, whatever the adaptation.
#[test]
fn header_states_the_step_size_jitter() {
    for adaptation in [AdaptationKind::Stan, AdaptationKind::Nutpie] {
        let default = SamplerSettings {
            adaptation,
            ..SamplerSettings::default()
        };
        let csv = written(&trace(false), &default);
        assert!(csv.contains("\n#         stepsize_jitter = 0.0\n"), "{csv}");
        let jittered = SamplerSettings {
            step_size_jitter: Some(0.25),
            ..default
        };
        let csv = written(&trace(false), &jittered);
        assert!(
            csv.contains("\n#         stepsize_jitter = 0.25\n"),
            "{csv}"
        );
    }
}
