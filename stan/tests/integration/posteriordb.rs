//! The fast subset of posteriordb's reference posteriors: each is sampled on the CPU (4
//! chains, 1000 warmup + 1000 draws, a fixed seed, the reference's adapt_delta and
//! max_treedepth) and every reference column's mean and sd must be within 4 combined MCSE
//! (`stan::posteriordb`). `cluster-cli posteriordb` runs all 46.

use std::path::Path;

use sampler::{SamplerSettings, Seed};
use stan::posteriordb::{self, Reference};

/// Small, quick posteriors that lower today. Add a posteriordb name here to check it in CI.
const FAST_SUBSET: &[&str] = &[
    "kilpisjarvi_mod-kilpisjarvi",
    "mesquite-mesquite",
    "eight_schools-eight_schools_noncentered",
    "kidiq-kidscore_momiq",
    "sblrc-blr",
    "gp_pois_regr-gp_regr",
];

const SEED: Seed = Seed(20_231_128);
const N_CHAINS: u32 = 4;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/posteriordb")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Samples one posterior and returns its problems (none when it passes).
fn check(posterior: &str) -> Vec<String> {
    let reference = Reference::from_json(&read(&format!("reference/{posterior}.json")))
        .unwrap_or_else(|err| panic!("{posterior}: {err}"));
    let source = read(&format!("models/{}.stan", reference.model));
    let data = read(&format!("data/{}.json", reference.data));
    let settings = SamplerSettings {
        num_warmup: 1000,
        num_draws: 1000,
        ..SamplerSettings::default()
    };
    match posteriordb::run_on_cpu(&reference, &source, &data, &settings, SEED, N_CHAINS) {
        Err(err) => vec![format!("{posterior}: {err}")],
        Ok(run) => run
            .comparison
            .failures()
            .into_iter()
            .map(|line| format!("{posterior}: {line}"))
            .collect(),
    }
}

#[test]
fn posteriordb_fast_subset_matches_the_reference_posteriors() {
    let failures: Vec<String> = FAST_SUBSET.iter().flat_map(|p| check(p)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn posteriordb_every_reference_names_vendored_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/posteriordb/reference");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let reference =
            Reference::from_json(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        assert_eq!(
            path.file_stem().unwrap().to_string_lossy(),
            reference.posterior
        );
        assert!(!reference.columns.is_empty(), "{}", reference.posterior);
        for file in [
            format!("models/{}.stan", reference.model),
            format!("data/{}.json", reference.data),
        ] {
            read(&file);
        }
        count += 1;
    }
    assert_eq!(count, 46);
}
