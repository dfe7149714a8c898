use super::*;
use crate::rng::ChainId;
use crate::run::Tuning;

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

/// A 2x3 matrix `m` and a 2x3 array `a` (row-major in our columns and values, as the
/// transforms produce them), around a scalar and a vector: the header and every row list
/// each container column-major, as CmdStan does (`m.1.1, m.2.1, m.1.2, ...`).
#[test]
fn matrices_and_arrays_are_written_column_major() {
    let container = |name: &'static str| {
        (0..6).map(move |k| Column {
            name: name.into(),
            index: Some(k),
            dims: vec![2, 3],
        })
    };
    let mut columns = vec![Column {
        name: "mu".into(),
        index: None,
        dims: Vec::new(),
    }];
    columns.extend(container("m"));
    columns.extend((0..2).map(|k| Column {
        name: "v".into(),
        index: Some(k),
        dims: Vec::new(),
    }));
    columns.extend(container("a"));
    // Each value is its own row-major name: m[i,j] = 10 i + j (1-based), a likewise + 100.
    let row_major: Vec<f64> = std::iter::once(0.5)
        .chain([11.0, 12.0, 13.0, 21.0, 22.0, 23.0])
        .chain([1.0, 2.0])
        .chain([111.0, 112.0, 113.0, 121.0, 122.0, 123.0])
        .collect();
    let mut trace = trace(true);
    trace.n_columns = row_major.len();
    trace.draws = row_major.repeat(3);
    trace.warmup_draws = row_major.repeat(2);
    let context = CsvContext {
        model_name: "m",
        columns: &columns,
        settings: &SamplerSettings::default(),
        seed: Seed(1),
        file_name: "draws.csv",
    };
    let mut out = Vec::new();
    write_chain(&mut out, &context, &trace).expect("writing to a vector");
    let text = String::from_utf8(out).expect("utf-8");
    let mut data = text.lines().filter(|line| !line.starts_with('#'));
    let header: Vec<&str> = data.next().expect("a header").split(',').skip(7).collect();
    assert_eq!(
        header,
        [
            "mu", "m.1.1", "m.2.1", "m.1.2", "m.2.2", "m.1.3", "m.2.3", "v.1", "v.2", "a.1.1",
            "a.2.1", "a.1.2", "a.2.2", "a.1.3", "a.2.3"
        ]
    );
    let rows: Vec<&str> = data.collect();
    assert_eq!(rows.len(), 5, "warmup and draws");
    for row in rows {
        let values: Vec<f64> = row
            .split(',')
            .skip(7)
            .map(|v| v.parse().expect("a number"))
            .collect();
        assert_eq!(
            values,
            [
                0.5, 11.0, 21.0, 12.0, 22.0, 13.0, 23.0, 1.0, 2.0, 111.0, 121.0, 112.0, 122.0,
                113.0, 123.0
            ]
        );
        // Each value sits under its own name.
        for (name, value) in header.iter().zip(&values) {
            let expected = match name.split('.').collect::<Vec<_>>()[..] {
                [base, i, j] => {
                    let offset = if base == "a" { 100.0 } else { 0.0 };
                    offset + 10.0 * i.parse::<f64>().unwrap() + j.parse::<f64>().unwrap()
                }
                _ => *value,
            };
            assert_eq!(*value, expected, "{name}");
        }
    }
}
