//! `--exact` filters and the files that `--draws-dir` writes.

use super::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stan/tests/posteriordb")
}

#[test]
fn an_exact_filter_matches_the_whole_name_only() {
    let filter = ["mesquite-logmesquite".to_owned()];
    let names = |exact| {
        read_references(&fixtures(), &filter, exact)
            .unwrap()
            .into_iter()
            .map(|r| r.posterior)
            .collect::<Vec<_>>()
    };
    assert_eq!(names(true), ["mesquite-logmesquite"]);
    // logmesquite_logva, _logvas, _logvash, _logvolume contain it too.
    assert_eq!(names(false).len(), 5);
}

/// (header, rows) of a Stan CSV file.
fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<f64>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let header = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    (header, rows)
}

#[test]
fn the_draws_dir_holds_each_chain_and_the_parameter_columns() {
    let name = "eight_schools-eight_schools_noncentered";
    let references = read_references(&fixtures(), &[name.to_owned()], true).unwrap();
    let reference = &references[0];
    let source = read_fixture(&fixtures(), "models/eight_schools_noncentered.stan").unwrap();
    let data = read_fixture(&fixtures(), "data/eight_schools.json").unwrap();
    let dir = std::env::temp_dir().join(format!("posteriordb-draws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = SamplerSettings {
        num_warmup: 200,
        num_draws: 100,
        threads: 1,
        ..SamplerSettings::default()
    };
    let run = draws::run_on_cpu(&dir, reference, &source, &data, &base, Seed(3), 2)
        .unwrap()
        .unwrap();
    assert!(run.min_ess_bulk_per_second > 0.0);

    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap())
            .unwrap();
    // The program's `parameters` block: theta_trans (8), mu, tau; not the transformed theta.
    let mut expected: Vec<String> = (1..=8).map(|i| format!("theta_trans.{i}")).collect();
    expected.extend(["mu".to_owned(), "tau".to_owned()]);
    let columns: Vec<String> = serde_json::from_value(record["parameter_columns"].clone()).unwrap();
    assert_eq!(columns, expected);
    assert_eq!(record["adapt_delta"], reference.adapt_delta);
    let files: Vec<String> = serde_json::from_value(record["csv"].clone()).unwrap();
    assert_eq!(files, [format!("{name}_1.csv"), format!("{name}_2.csv")]);
    let stats = record["chain_stats"].as_array().unwrap();
    assert_eq!(stats.len(), 2);
    for chain in stats {
        assert!(chain["warmup_seconds"].as_f64().unwrap() > 0.0);
        assert!(chain["grad_evals_sampling"].as_u64().unwrap() >= 100);
    }

    // The files hold the draws the recorded ESS came from: recompute it from them.
    let chains: Vec<(Vec<String>, Vec<Vec<f64>>)> =
        files.iter().map(|f| read_csv(&dir.join(f))).collect();
    let mut min_ess = f64::INFINITY;
    for column in &columns {
        let values: Vec<Vec<f64>> = chains
            .iter()
            .map(|(header, rows)| {
                let k = header.iter().position(|h| h == column).unwrap();
                rows.iter().map(|row| row[k]).collect()
            })
            .collect();
        assert!(values.iter().all(|v| v.len() == 100), "{column}");
        let slices: Vec<&[f64]> = values.iter().map(Vec::as_slice).collect();
        min_ess = min_ess.min(sampler::diagnostics::ess_bulk(&slices));
    }
    let recorded = record["min_ess_bulk"].as_f64().unwrap();
    assert!(
        (min_ess - recorded).abs() <= 1e-9 * recorded,
        "{min_ess} vs {recorded}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
