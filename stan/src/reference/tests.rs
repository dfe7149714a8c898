//! The reference: no probe is broken, every listed function and distribution works somewhere,
//! and `docs/stan-reference.md` holds exactly what [`super::markdown`] generates.

use std::path::PathBuf;

use super::probe::Outcome;
use super::{BEGIN_MARKER, END_MARKER, Report, render, report};

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/stan-reference.md")
}

/// Every failure that is not a "not supported" refusal, with the probe that found it.
fn broken(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |what: String, outcome: Option<&Outcome>| {
        if let Some(Outcome::Broken(message)) = outcome {
            out.push(format!("{what}: {message}"));
        }
    };
    for checked in &report.tables {
        for (row, outcomes) in checked.table.rows.iter().zip(&checked.outcomes) {
            for (probe, outcome) in row.probes.iter().zip(outcomes) {
                let source = probe.as_ref().map_or("", |p| p.source.as_str());
                note(format!("{}\n{source}", row.name), outcome.as_ref());
            }
        }
    }
    for f in &report.functions {
        let name = super::signature(f.function.name, &f.function.args);
        for outcome in f.lowered.outcomes() {
            note(format!("{name} with parameters"), Some(outcome));
        }
        note(format!("{name} on the host"), Some(&f.host));
    }
    for d in &report.distributions {
        let name = d.distribution.name;
        for outcome in d.tilde.outcomes() {
            note(format!("{name} ~"), Some(outcome));
        }
        for (suffix, cell) in super::SUFFIXES.iter().zip(&d.suffixes) {
            let Some((lowered, host)) = cell else {
                continue;
            };
            for outcome in lowered.iter().flat_map(super::Lowered::outcomes) {
                note(format!("{name}_{suffix} with parameters"), Some(outcome));
            }
            note(format!("{name}_{suffix} on the host"), Some(host));
        }
    }
    out
}

#[test]
fn reference_probe_outcomes_tell_gaps_from_breakage() {
    use super::probe::{Probe, Runner};
    let model = |body: &str| {
        let source = format!("parameters {{\n  real mu;\n}}\nmodel {{\n{body}\n}}\n");
        Probe::new(Runner::Lowered, source, "{}").run()
    };
    assert_eq!(model("  mu ~ normal(0, 1);"), Outcome::Works);
    assert!(matches!(model("  mu ~ wobbly(0, 1);"), Outcome::NotYet(_)));
    // A wrong probe (here, one that does not parse or has the wrong arity) is broken.
    assert!(matches!(model("  mu ~ normal(0, 1)"), Outcome::Broken(_)));
    assert!(matches!(model("  mu ~ normal(0);"), Outcome::Broken(_)));
    let host = |expr: &str| {
        let source = format!("transformed data {{\n  real x = {expr};\n}}\n");
        Probe::new(Runner::Host, source, "{}").run()
    };
    assert_eq!(host("log(2)"), Outcome::Works);
    assert!(matches!(host("wobbly(2)"), Outcome::NotYet(_)));
    assert!(matches!(host("log(2, 3)"), Outcome::Broken(_)));
}

#[test]
fn reference_probes_are_not_broken_and_every_entry_works_somewhere() {
    let report = report();
    let broken = broken(&report);
    assert!(
        broken.is_empty(),
        "{} probe(s) failed other than with \"not supported\" (a wrong probe in \
         stan/src/reference/, or a broken function):\n{}",
        broken.len(),
        broken.join("\n\n")
    );
    let nowhere: Vec<String> = report
        .functions
        .iter()
        .filter(|f| !f.host.works() && !f.lowered.works())
        .map(|f| super::signature(f.function.name, &f.function.args))
        .chain(
            report
                .distributions
                .iter()
                .filter(|d| {
                    !d.tilde.works()
                        && d.suffixes
                            .iter()
                            .flatten()
                            .all(|(l, h)| !h.works() && !l.as_ref().is_some_and(|l| l.works()))
                })
                .map(|d| d.distribution.name.to_owned()),
        )
        .collect();
    assert!(
        nowhere.is_empty(),
        "listed in the reference but working nowhere: {nowhere:?}"
    );
}

#[test]
fn reference_doc_matches_the_code() {
    let path = doc_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (Some((before, rest)), true) = (text.split_once(BEGIN_MARKER), text.contains(END_MARKER))
    else {
        panic!(
            "{} lacks the markers {BEGIN_MARKER} and {END_MARKER}",
            path.display()
        );
    };
    let (current, after) = rest.split_once(END_MARKER).expect("checked");
    let expected = format!("\n{}", render(&report()));
    if current == expected {
        return;
    }
    if std::env::var_os("UPDATE_REFERENCE").is_some_and(|v| v == "1") {
        std::fs::write(
            &path,
            format!("{before}{BEGIN_MARKER}{expected}{END_MARKER}{after}"),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let first_difference = current
        .lines()
        .zip(expected.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map_or_else(
            || "one is a prefix of the other".to_owned(),
            |(i, (a, b))| format!("generated line {i}:\n  doc:  {a}\n  code: {b}"),
        );
    panic!(
        "{} is out of date with the code ({first_difference}).\nIf the change is intended, \
         regenerate it with:\n  UPDATE_REFERENCE=1 cargo test --release -p stan reference_doc\n\
         and review the diff.",
        path.display()
    );
}

/// Words that appear as string literals in match arms of the lowering and the host but are
/// not Stan functions or distributions.
const NOT_FUNCTIONS: &[&str] = &["lcdf", "lccdf", "covariance", "one"];

/// Identifier-like string literals on the match-arm lines (`"name" =>`, `("name" | ...`) of
/// the Rust files under `dir`, with the file each was found in.
fn names_in_match_arms(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            names_in_match_arms(&path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable source");
        for line in text.lines().map(str::trim) {
            let arm = line.starts_with('"')
                || line.starts_with("(\"")
                || line.starts_with("| \"")
                || line.contains("=>");
            if !arm || line.starts_with("//") {
                continue;
            }
            for literal in line.split('"').skip(1).step_by(2) {
                let mut chars = literal.chars();
                let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                    && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
                if identifier {
                    out.push((literal.to_owned(), path.display().to_string()));
                }
            }
        }
    }
}

/// The other direction of drift: a function or distribution the lowering or the host
/// dispatches on by name, which the reference does not list.
#[test]
fn reference_lists_every_name_the_code_dispatches_on() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    names_in_match_arms(&src.join("lower"), &mut found);
    names_in_match_arms(&src.join("host"), &mut found);
    assert!(
        found.len() > 100,
        "the scan found only {} names",
        found.len()
    );
    let functions = super::entries::functions();
    let listed = |name: &str| {
        NOT_FUNCTIONS.contains(&name)
            || functions.iter().any(|f| f.name == name)
            || super::DISTRIBUTIONS.iter().any(|d| d.name == name)
    };
    let mut missing: Vec<String> = found
        .iter()
        .filter(|(name, _)| !listed(name))
        .map(|(name, file)| format!("`{name}` ({file})"))
        .collect();
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "the code dispatches on names the reference does not list; add each to \
         stan/src/reference/entries.rs with the argument types of its probe (or, if it is not \
         a Stan function, to NOT_FUNCTIONS in stan/src/reference/tests.rs), then regenerate \
         the reference (UPDATE_REFERENCE=1 cargo test --release -p stan reference_doc):\n{}",
        missing.join("\n")
    );
}
