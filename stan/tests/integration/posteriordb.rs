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

/// On every program that lowers, the CPU evaluator's decoded steps give what its
/// instructions one at a time give, bit for bit, at points across the unconstrained space.
#[test]
fn posteriordb_decoded_steps_equal_the_instructions_one_at_a_time() {
    use sampler::LogDensity;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/posteriordb/reference");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let reference = Reference::from_json(&text).unwrap();
        let source = read(&format!("models/{}.stan", reference.model));
        let data = read(&format!("data/{}.json", reference.data));
        let Ok(model) = posteriordb::load(&source, &data, &reference.model) else {
            continue;
        };
        let mut evaluator = model.evaluator();
        let dim = evaluator.dim();
        for k in 0..3 {
            let theta: Vec<f64> = (0..dim)
                .map(|i| ((i * 7 + k * 3) % 11) as f64 / 5.0 - 1.0)
                .collect();
            let (mut fast, mut slow) = (vec![0.0; dim], vec![0.0; dim]);
            let lp_fast = evaluator.logp_grad(&theta, &mut fast);
            let lp_slow = evaluator.logp_grad_per_instruction(&theta, &mut slow);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                (lp_fast.to_bits(), bits(&fast)),
                (lp_slow.to_bits(), bits(&slow)),
                "{}: log density {lp_fast} against {lp_slow}",
                reference.posterior
            );
        }
        checked += 1;
    }
    assert!(checked >= 44, "only {checked} posteriors lower");
}
