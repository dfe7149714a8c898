//! The reference of the supported Stan subset (`docs/stan-reference.md`), generated from the
//! code so that it cannot drift: every entry carries a probe, a tiny Stan program with data
//! and parameter arguments, run here through the front end, and the outcome of the probe is
//! what the reference says. Elementwise functions are listed from the host interpreter's own
//! tables; the other functions, the distributions and the language features are listed in
//! `entries` and `features` with the argument types of their probes.
//!
//! A probe that fails with the code's "not supported" message is a gap, shown as such; one
//! that fails otherwise is a broken entry (or a broken function), and the tests fail on it.

mod entries;
mod features;
mod probe;
#[cfg(test)]
mod tests;

use std::fmt::Write;

use entries::{DISTRIBUTIONS, Distribution, Function, Group};
use features::Table;
use probe::{Arg, Outcome, Parameters, call_probe, has_matrix, tilde_probe};

/// The first and last lines of the generated part of `docs/stan-reference.md`.
pub const BEGIN_MARKER: &str = "<!-- stan-reference:begin -->";
pub const END_MARKER: &str = "<!-- stan-reference:end -->";

/// A feature table with the outcome of every probe.
struct CheckedTable {
    table: Table,
    outcomes: Vec<Vec<Option<Outcome>>>,
}

/// The outcomes of a use with parameter arguments: every argument that can be a parameter
/// is one (`all`), and, where some argument is a matrix, the same with data matrices; `None`
/// where no argument is a parameter.
struct Lowered {
    all: Option<Outcome>,
    data_matrices: Option<Outcome>,
}

impl Lowered {
    /// Runs the probes that `probe(parameters)` makes.
    fn check(args: &[Arg], probe: impl Fn(Parameters) -> Option<probe::Probe>) -> Lowered {
        Lowered {
            all: probe(Parameters::All).map(|p| p.run()),
            data_matrices: has_matrix(args)
                .then(|| probe(Parameters::NotMatrices).map(|p| p.run()))
                .flatten(),
        }
    }

    fn outcomes(&self) -> impl Iterator<Item = &Outcome> {
        self.all.iter().chain(&self.data_matrices)
    }

    #[cfg(test)]
    fn works(&self) -> bool {
        self.outcomes().any(Outcome::works)
    }

    /// GPU, GPU* (with data matrices), load time (no parameter argument), not yet, broken.
    fn cell(&self) -> &'static str {
        match (&self.all, &self.data_matrices) {
            (_, _) if self.outcomes().any(|o| matches!(o, Outcome::Broken(_))) => BROKEN,
            (Some(Outcome::Works), _) => "GPU",
            (_, Some(Outcome::Works)) => "GPU*",
            (None, None) => "load time",
            _ => "not yet",
        }
    }
}

const BROKEN: &str = "**broken**";

/// A function signature with the outcomes of its probes: with parameter arguments and on
/// the host; for elementwise functions, whether each works on vectors too.
struct CheckedFunction {
    function: Function,
    lowered: Lowered,
    host: Outcome,
    on_vectors: Option<(bool, bool)>,
}

/// The suffixes of a distribution's functions, in the reference's column order.
const SUFFIXES: [&str; 5] = ["lpdf", "lupdf", "lcdf", "lccdf", "rng"];

/// A distribution with the outcomes of `~` and of each suffix: (with parameters, which
/// `_rng` has not, on the host), `None` where Stan has no such function.
struct CheckedDistribution {
    distribution: Distribution,
    tilde: Lowered,
    suffixes: Vec<Option<(Option<Lowered>, Outcome)>>,
}

/// Every entry of the reference with the outcomes of its probes.
struct Report {
    tables: Vec<CheckedTable>,
    functions: Vec<CheckedFunction>,
    distributions: Vec<CheckedDistribution>,
}

fn check_table(table: Table) -> CheckedTable {
    let outcomes = table
        .rows
        .iter()
        .map(|row| {
            row.probes
                .iter()
                .map(|p| p.as_ref().map(probe::Probe::run))
                .collect()
        })
        .collect();
    CheckedTable { table, outcomes }
}

fn signature(name: &str, args: &[Arg]) -> String {
    let types: Vec<&str> = args.iter().map(|a| a.type_name()).collect();
    format!("{name}({})", types.join(", "))
}

fn check_function(function: Function) -> CheckedFunction {
    let call = |names: &[String]| format!("{}({})", function.name, names.join(", "));
    let lowered = Lowered::check(&function.args, |parameters| {
        call_probe(parameters, &function.args, true, call)
    });
    let host = call_probe(Parameters::None, &function.args, true, call)
        .expect("host probes always exist")
        .run();
    // Informational: a failure here is shown as "scalars only", never as broken.
    let vectors: Option<Vec<Arg>> = function.args.iter().map(|a| a.vector()).collect();
    let on_vectors = vectors
        .filter(|_| function.group == Group::Elementwise)
        .map(|args| {
            let works = |parameters| {
                call_probe(parameters, &args, true, call).is_some_and(|p| p.run() == Outcome::Works)
            };
            (works(Parameters::All), works(Parameters::None))
        });
    CheckedFunction {
        function,
        lowered,
        host,
        on_vectors,
    }
}

fn check_distribution(d: Distribution) -> CheckedDistribution {
    let all: Vec<Arg> = std::iter::once(d.outcome)
        .chain(d.args.iter().copied())
        .collect();
    let suffixes = SUFFIXES
        .iter()
        .map(|&suffix| {
            let suffix = match suffix {
                "lpdf" if d.discrete() => "lpmf",
                "lupdf" if d.discrete() => "lupmf",
                other => other,
            };
            let name = format!("{}_{suffix}", d.name);
            let exists = match suffix {
                "rng" => d.rng,
                "lcdf" | "lccdf" => d.cdf,
                _ => true,
            };
            if !exists {
                return None;
            }
            if suffix == "rng" {
                let call = |names: &[String]| format!("{name}({})", names.join(", "));
                let args = d.rng_args.unwrap_or(d.args);
                let host = call_probe(Parameters::None, args, true, call).expect("host probe");
                return Some((None, host.run()));
            }
            let call =
                |names: &[String]| format!("{name}({} | {})", names[0], names[1..].join(", "));
            let lowered =
                Lowered::check(&all, |parameters| call_probe(parameters, &all, false, call));
            let host = call_probe(Parameters::None, &all, false, call).expect("host probe");
            Some((Some(lowered), host.run()))
        })
        .collect();
    CheckedDistribution {
        distribution: d,
        tilde: Lowered::check(&all, |parameters| {
            Some(tilde_probe(d.name, d.outcome, d.args, parameters))
        }),
        suffixes,
    }
}

fn report() -> Report {
    Report {
        tables: [
            features::blocks(),
            features::types(),
            features::constraints(),
            features::statements(),
        ]
        .into_iter()
        .map(check_table)
        .collect(),
        functions: entries::functions()
            .into_iter()
            .map(check_function)
            .collect(),
        distributions: DISTRIBUTIONS
            .iter()
            .map(|&d| check_distribution(d))
            .collect(),
    }
}

/// ✓, "not yet", or "broken" (which the tests refuse).
fn mark(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Works => "✓",
        Outcome::NotYet(_) => "not yet",
        Outcome::Broken(_) => BROKEN,
    }
}

/// Where a call works: its [`Lowered::cell`] when it works with parameters (or has none),
/// else "host" when it runs on the host, else "–".
fn place(lowered: Option<&Lowered>, host: &Outcome) -> &'static str {
    match (lowered.map_or("not yet", Lowered::cell), host) {
        (BROKEN, _) | (_, Outcome::Broken(_)) => BROKEN,
        (cell @ ("GPU" | "GPU*" | "load time"), _) => cell,
        (_, Outcome::Works) => "host",
        _ => "–",
    }
}

fn render_table(out: &mut String, checked: &CheckedTable) {
    let table = &checked.table;
    let _ = writeln!(out, "## {}\n\n{}\n", table.title, table.intro);
    let _ = writeln!(out, "| {} | {} |", table.label, table.columns.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(table.columns.len()));
    for (row, outcomes) in table.rows.iter().zip(&checked.outcomes) {
        let cells: Vec<&str> = outcomes
            .iter()
            .map(|o| o.as_ref().map_or("", mark))
            .collect();
        let _ = writeln!(out, "| {} | {} |", row.name, cells.join(" | "));
    }
    out.push('\n');
}

fn render_functions(out: &mut String, functions: &[CheckedFunction]) {
    out.push_str(
        "## Functions\n\n\
         **GPU**: a call with parameter arguments lowers to the IR, which the CPU and the GPU \
         back ends both run (in the probes, every argument but `int`s and sizes is a \
         parameter); **GPU\\***: the same with matrix arguments as data (with parameter \
         matrices: not yet). **host**: the call runs on the host interpreter, in \
         `transformed data` and `generated quantities`, and on data anywhere (computed once \
         at load time). **load time**: no argument can be a parameter; the value is computed \
         when the program is loaded. Elementwise functions are probed on scalars.\n\n",
    );
    for group in Group::ALL {
        let _ = writeln!(out, "### {}\n", group.title());
        let in_group: Vec<&CheckedFunction> = functions
            .iter()
            .filter(|f| f.function.group == group)
            .collect();
        if group == Group::Elementwise {
            // Short signatures: lists by where they run read better than a long table.
            for (title, wanted) in [
                ("GPU and host", "GPU"),
                ("host only", "host"),
                ("broken", BROKEN),
            ] {
                let names: Vec<String> = in_group
                    .iter()
                    .filter(|f| place(Some(&f.lowered), &f.host) == wanted)
                    .map(|f| format!("`{}`", signature(f.function.name, &f.function.args)))
                    .collect();
                if !names.is_empty() {
                    let _ = writeln!(out, "- {title}: {}", names.join(", "));
                }
            }
            render_on_vectors(out, &in_group);
            out.push('\n');
            continue;
        }
        out.push_str("| function | with parameters | host |\n|---|---|---|\n");
        for f in in_group {
            let lowered = f.lowered.cell().replace('*', "\\*");
            let host = match &f.host {
                Outcome::NotYet(_) => "–",
                other => mark(other),
            };
            let _ = writeln!(
                out,
                "| `{}` | {lowered} | {host} |",
                signature(f.function.name, &f.function.args)
            );
        }
        out.push('\n');
    }
}

/// Which elementwise functions work on vectors as they do on scalars (probed with vector
/// arguments of the same domain).
fn render_on_vectors(out: &mut String, functions: &[&CheckedFunction]) {
    let mut exceptions = Vec::new();
    let mut not_probed = Vec::new();
    for f in functions {
        let name = signature(f.function.name, &f.function.args);
        let Some((gpu, host)) = f.on_vectors else {
            not_probed.push(format!("`{name}`"));
            continue;
        };
        let mut only = Vec::new();
        if f.lowered.all.as_ref().is_some_and(Outcome::works) && !gpu {
            only.push("GPU");
        }
        if f.host.works() && !host {
            only.push("host");
        }
        if !only.is_empty() {
            exceptions.push(format!("`{name}` ({}: scalars only)", only.join(", ")));
        }
    }
    let _ = write!(
        out,
        "\nOn vectors, elementwise, each works where it works on scalars"
    );
    if exceptions.is_empty() {
        out.push('.');
    } else {
        let _ = write!(out, ", except {}.", exceptions.join(", "));
    }
    if !not_probed.is_empty() {
        let _ = write!(out, " Not probed on vectors: {}.", not_probed.join(", "));
    }
    out.push('\n');
}

fn render_distributions(out: &mut String, distributions: &[CheckedDistribution]) {
    out.push_str(
        "## Distributions\n\n\
         Each cell says where that use works: **GPU** (with parameter arguments, lowered to \
         the IR), **GPU\\*** (the same with matrix arguments as data), **host** \
         (`transformed data`, `generated quantities`, and constants), or – (not yet); n/a \
         where Stan has no such function. Integer outcomes use `_lpmf`/`_lupmf`; `int` \
         arguments are data in the probes.\n\n\
         | distribution | `~` | `_lpdf` | `_lupdf` | `_lcdf` | `_lccdf` | `_rng` |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for d in distributions {
        let dist = &d.distribution;
        let args: Vec<&str> = dist.args.iter().map(|a| a.type_name()).collect();
        let tilde = match d.tilde.cell() {
            "not yet" => "–",
            other => other,
        };
        let cells: Vec<String> = std::iter::once(tilde)
            .chain(
                d.suffixes
                    .iter()
                    .map(|cell| cell.as_ref().map_or("n/a", |(l, h)| place(l.as_ref(), h))),
            )
            .map(|cell| cell.replace('*', "\\*"))
            .collect();
        let bar = if args.is_empty() { "" } else { " \\| " };
        let _ = writeln!(
            out,
            "| `{}({}{bar}{})` | {} |",
            dist.name,
            dist.outcome.type_name(),
            args.join(", "),
            cells.join(" | ")
        );
    }
    out.push('\n');
}

fn render_gaps(out: &mut String, tables: &[CheckedTable]) {
    out.push_str(
        "## Not supported yet\n\n\
         What the probes above found refused, with the code's own message (a program using \
         it gets the message at the construct's `file:line:column`). Functions and \
         distributions marked – or host only are refused in the same way.\n\n",
    );
    for checked in tables {
        for (row, outcomes) in checked.table.rows.iter().zip(&checked.outcomes) {
            for (column, outcome) in checked.table.columns.iter().zip(outcomes) {
                if let Some(Outcome::NotYet(message)) = outcome {
                    let name = row.name.split(": ").next().unwrap_or(&row.name);
                    let mut place = checked.table.title.to_lowercase();
                    if checked.table.columns.len() > 1 {
                        place = format!("{place}, {column}");
                    }
                    let _ = writeln!(out, "- {name} ({place}): {message}");
                }
            }
        }
    }
}

/// The reference as Markdown: the text between [`BEGIN_MARKER`] and [`END_MARKER`] of
/// `docs/stan-reference.md`. It runs a few hundred probe programs (well under a second).
pub fn markdown() -> String {
    render(&report())
}

fn render(report: &Report) -> String {
    let mut out = String::from(
        "Generated by `stan::reference::markdown()` from probe programs run through the front \
         end: ✓ means the probe parsed, lowered to the IR and evaluated (or ran on the host), \
         \"not yet\" that the code refused it (see [Not supported yet](#not-supported-yet)).\n\n",
    );
    for table in &report.tables {
        render_table(&mut out, table);
    }
    render_functions(&mut out, &report.functions);
    render_distributions(&mut out, &report.distributions);
    render_gaps(&mut out, &report.tables);
    out
}
