use sampler::RunSummary;
use sampler::diagnostics::Summary;
use sampler::summary::Row;

use super::*;

const EIGHT_SCHOOLS: &str =
    include_str!("../../tests/posteriordb/reference/eight_schools-eight_schools_noncentered.json");

fn stats(mean: f64, sd: f64, mcse_mean: f64, mcse_sd: f64) -> Summary {
    Summary {
        mean,
        sd,
        q5: f64::NAN,
        q50: f64::NAN,
        q95: f64::NAN,
        mcse_mean,
        mcse_sd,
        ess_bulk: 1000.0,
        ess_tail: 1000.0,
        rhat: 1.0,
    }
}

fn summary(rows: &[(&str, Summary)]) -> RunSummary {
    RunSummary {
        rows: rows
            .iter()
            .map(|(name, stats)| Row {
                name: (*name).to_owned(),
                is_parameter: true,
                stats: *stats,
            })
            .collect(),
        chains: Vec::new(),
        warnings: Vec::new(),
        n_draws: 1000,
    }
}

fn reference(columns: &[(&str, f64, f64)]) -> Reference {
    Reference {
        posterior: "d-m".into(),
        model: "m".into(),
        data: "d".into(),
        n_draws: 10_000,
        n_chains: 10,
        adapt_delta: 0.8,
        max_treedepth: 10,
        columns: columns
            .iter()
            .map(|&(name, mean, sd)| ReferenceColumn {
                name: name.into(),
                mean,
                sd,
                mcse_mean: 0.3,
                mcse_sd: 0.3,
            })
            .collect(),
    }
}

#[test]
fn reads_the_vendored_reference_with_its_control() {
    let reference = Reference::from_json(EIGHT_SCHOOLS).unwrap();
    assert_eq!(
        reference.posterior,
        "eight_schools-eight_schools_noncentered"
    );
    assert_eq!(reference.model, "eight_schools_noncentered");
    assert_eq!(reference.data, "eight_schools");
    assert_eq!((reference.n_draws, reference.n_chains), (10_000, 10));
    assert_eq!((reference.adapt_delta, reference.max_treedepth), (0.95, 10));
    let names: Vec<&str> = reference.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names[..3], ["theta[1]", "theta[2]", "theta[3]"]);
    assert_eq!(names.len(), 10);
    let mu = reference.columns.iter().find(|c| c.name == "mu").unwrap();
    // posteriordb's own mean_value summary: 4.39..., MCSE 0.033 (its sd is about 3.3).
    assert!(
        (mu.mean - 4.4).abs() < 0.1 && (mu.sd - 3.3).abs() < 0.1,
        "{mu:?}"
    );
    assert!(mu.mcse_mean > 0.02 && mu.mcse_mean < 0.05, "{mu:?}");
    assert!(mu.mcse_sd > 0.01 && mu.mcse_sd < 0.05, "{mu:?}");

    let settings = reference.settings(&SamplerSettings::default());
    assert_eq!((settings.target_accept, settings.max_depth), (0.95, 10));
}

#[test]
fn refuses_a_reference_without_control() {
    let text = EIGHT_SCHOOLS.replace("\"control\"", "\"controls\"");
    let err = Reference::from_json(&text).unwrap_err();
    assert!(err.to_string().contains("control.adapt_delta"), "{err}");
}

#[test]
fn z_scores_combine_both_mcse() {
    // |10.5 - 10| / hypot(0.4, 0.3) = 0.5 / 0.5.
    let run = summary(&[
        ("a", stats(10.5, 2.0, 0.4, 0.4)),
        ("b", stats(0.0, 1.0, 0.4, 0.4)),
    ]);
    let comparison = compare(&reference(&[("a", 10.0, 4.0)]), &run);
    assert!(comparison.missing.is_empty());
    let [a] = comparison.columns.as_slice() else {
        panic!("{comparison:?}")
    };
    assert!((a.z_mean - 1.0).abs() < 1e-12, "{a:?}");
    assert!((a.z_sd - 4.0).abs() < 1e-12, "{a:?}");
    assert!(a.passed() && comparison.passed());
    assert_eq!(comparison.max_z_sd(), a.z_sd);
}

#[test]
fn a_mean_past_four_mcse_fails_and_says_which_column() {
    let run = summary(&[
        ("a", stats(10.0, 2.0, 0.4, 0.4)),
        ("b", stats(2.01, 1.0, 0.4, 0.4)),
    ]);
    let comparison = compare(&reference(&[("a", 10.0, 2.0), ("b", 0.0, 1.0)]), &run);
    assert!(!comparison.passed());
    assert!((comparison.max_z_mean() - 2.01 / 0.5).abs() < 1e-12);
    let failures = comparison.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].starts_with("b: mean 2.010000 vs 0.000000"),
        "{failures:?}"
    );
}

#[test]
fn a_missing_column_or_a_nan_mcse_fails() {
    let run = summary(&[("a", stats(10.0, 2.0, f64::NAN, 0.4))]);
    let comparison = compare(
        &reference(&[("a", 10.0, 2.0), ("theta[2]", 0.0, 1.0)]),
        &run,
    );
    assert_eq!(comparison.missing, ["theta[2]"]);
    assert!(comparison.max_z_mean().is_nan());
    assert!(!comparison.passed());
    let failures = comparison.failures();
    assert_eq!(failures[0], "columns missing from the output: theta[2]");
    assert!(failures[1].starts_with("a: "), "{failures:?}");
}

#[test]
fn load_reports_the_stage_and_the_first_line_of_the_error() {
    let source =
        "parameters {\n  real x;\n  real m;\n}\nmodel {\n  x ~ student_t(3, m, 1) T[0, ];\n}\n";
    let err = load(source, "{}", "loop").unwrap_err();
    assert_eq!(err.stage, Stage::Lower);
    assert!(
        !err.message.contains('\n') && !err.message.is_empty(),
        "{err}"
    );
    assert!(err.to_string().starts_with("unsupported: lower: "), "{err}");

    let err = load("parameters { real x; ", "{}", "cut").unwrap_err();
    assert_eq!(err.stage, Stage::Parse, "{err}");
    let err = load("data { int N; }\nparameters { real x; }\n", "{}", "no_n").unwrap_err();
    assert_eq!(err.stage, Stage::Data, "{err}");
}
