//! The `cluster-cli` binary as a user runs it: sampling, its output files, reproducibility,
//! and one-line errors with exit code 2 for bad model files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cluster-cli"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("cluster-cli runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cluster-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn sample_prints_a_summary_with_every_quantity() {
    let output = cli(&[
        "sample",
        "models/eight_schools_noncentered.json",
        "--chains",
        "4",
        "--seed",
        "1",
        "--quiet",
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let text = stdout(&output);
    for header in [
        "mean", "sd", "5%", "50%", "95%", "mcse", "ess_bulk", "ess_tail", "r_hat",
    ] {
        assert!(text.contains(header), "missing column {header} in:\n{text}");
    }
    for row in ["lp__", "mu", "tau", "z[1]", "z[8]", "theta[1]", "theta[8]"] {
        assert!(
            text.lines().any(|line| line.starts_with(row)),
            "missing row {row} in:\n{text}"
        );
    }
    assert!(
        text.contains("chain 3:"),
        "per-chain diagnostics missing:\n{text}"
    );
}

/// Runs `sample` with `--output` and returns the chain files' contents.
fn sample_to_csv(dir: &Path, extra: &[&str]) -> Vec<String> {
    let output_path = dir.join("draws.csv");
    let mut args = vec![
        "sample",
        "models/eight_schools_noncentered.json",
        "--quiet",
        "--output",
    ];
    let output_str = output_path.to_string_lossy().into_owned();
    args.push(&output_str);
    args.extend_from_slice(extra);
    let output = cli(&args);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let n_chains = extra
        .windows(2)
        .find(|w| w[0] == "--chains")
        .map_or(4, |w| w[1].parse::<usize>().expect("chains"));
    (1..=n_chains)
        .map(|i| {
            std::fs::read_to_string(dir.join(format!("draws_{i}.csv"))).expect("chain file written")
        })
        .collect()
}

/// The data rows of a Stan CSV file (comments and timing removed).
fn data_rows(csv: &str) -> Vec<&str> {
    csv.lines().filter(|line| !line.starts_with('#')).collect()
}

/// The file has one timing block and ends with it, as CmdStan's do (its exact text is
/// `sampler::stan_csv`'s unit test).
fn assert_one_timing_block(csv: &str) {
    assert_eq!(csv.matches("Elapsed Time").count(), 1, "{csv}");
    assert!(csv.ends_with(" seconds (Total)\n# \n"), "{csv}");
}

/// The `stepsize__` column's values, and the `# Step size = X` comment's.
fn step_sizes(csv: &str) -> (Vec<f64>, f64) {
    let (header, rows) = parse_csv(csv);
    let column = header
        .iter()
        .position(|h| h == "stepsize__")
        .expect("a stepsize__ column");
    let tuned = csv
        .lines()
        .find_map(|line| line.strip_prefix("# Step size = "))
        .expect("a step size comment")
        .parse()
        .expect("a number");
    (rows.iter().map(|row| row[column]).collect(), tuned)
}

#[test]
fn same_seed_gives_identical_draws_whatever_the_thread_count() {
    let one = sample_to_csv(
        &scratch_dir("seed-a"),
        &["--chains", "3", "--seed", "42", "--threads", "1"],
    );
    let many = sample_to_csv(
        &scratch_dir("seed-b"),
        &["--chains", "3", "--seed", "42", "--threads", "3"],
    );
    let other = sample_to_csv(
        &scratch_dir("seed-c"),
        &["--chains", "3", "--seed", "43", "--threads", "3"],
    );
    for chain in 0..3 {
        assert_eq!(
            data_rows(&one[chain]),
            data_rows(&many[chain]),
            "chain {chain} differs between thread counts"
        );
        assert_ne!(
            data_rows(&one[chain]),
            data_rows(&other[chain]),
            "different seeds gave the same draws"
        );
    }
    assert_ne!(
        data_rows(&one[0]),
        data_rows(&one[1]),
        "chains share a random stream"
    );
}

#[test]
fn stan_csv_has_cmdstan_columns_and_every_draw() {
    let files = sample_to_csv(
        &scratch_dir("csv"),
        &["--chains", "2", "--draws", "300", "--warmup", "200"],
    );
    for csv in &files {
        let rows = data_rows(csv);
        let header: Vec<&str> = rows[0].split(',').collect();
        assert_eq!(
            &header[..7],
            &[
                "lp__",
                "accept_stat__",
                "stepsize__",
                "treedepth__",
                "n_leapfrog__",
                "divergent__",
                "energy__"
            ]
        );
        assert_eq!(&header[7..10], &["mu", "tau", "z.1"]);
        assert_eq!(header.last(), Some(&"theta.8"));
        assert_eq!(rows.len(), 1 + 300);
        assert!(
            rows[1..]
                .iter()
                .all(|row| row.split(',').count() == header.len())
        );
        assert!(csv.contains("# Adaptation terminated") && csv.contains("# Step size = "));
        assert!(csv.contains("#     num_samples = 300") && csv.contains("#     num_warmup = 200"));
        assert_one_timing_block(csv);
    }
}

/// No step-size jitter unless asked for, as Stan: every draw uses the tuned step size, and
/// the header says so; `--stepsize-jitter J` draws it from (1 ± J) x the tuned one.
#[test]
fn stepsize_jitter_is_off_unless_asked_for() {
    for adaptation in ["nutpie", "stan"] {
        let common = [
            "--chains",
            "2",
            "--draws",
            "200",
            "--warmup",
            "150",
            "--adaptation",
            adaptation,
        ];
        for csv in sample_to_csv(&scratch_dir(&format!("jitter-off-{adaptation}")), &common) {
            assert!(csv.contains("\n#         stepsize_jitter = 0.0\n"), "{csv}");
            let (steps, tuned) = step_sizes(&csv);
            assert!(steps.iter().all(|&s| s == tuned), "{adaptation}: {steps:?}");
        }
        let jittered = [&common[..], &["--stepsize-jitter", "0.1"]].concat();
        for csv in sample_to_csv(&scratch_dir(&format!("jitter-on-{adaptation}")), &jittered) {
            assert!(csv.contains("\n#         stepsize_jitter = 0.1\n"), "{csv}");
            let (steps, tuned) = step_sizes(&csv);
            assert!(
                steps.iter().all(|s| (s / tuned - 1.0).abs() <= 0.1 + 1e-12),
                "{adaptation}: {steps:?} around {tuned}"
            );
            assert!(steps.iter().any(|&s| s != tuned), "{adaptation}: {steps:?}");
        }
    }
    let output = cli(&[
        "sample",
        "models/eight_schools_noncentered.json",
        "--quiet",
        "--stepsize-jitter",
        "1.5",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("step_size_jitter must be in [0, 1), found 1.5"),
        "{}",
        stderr(&output)
    );
}

/// With `ARVIZ_PYTHON` pointing at a Python with ArviZ (`.ci/run` installs one), ArviZ's
/// `from_cmdstan` must read our files and compute the same diagnostics as we do.
#[test]
fn arviz_reads_our_stan_csv() {
    let Some(python) = std::env::var_os("ARVIZ_PYTHON") else {
        eprintln!("skipped: set ARVIZ_PYTHON to a python with arviz to run this test");
        return;
    };
    let dir = scratch_dir("arviz");
    sample_to_csv(&dir, &["--chains", "4", "--seed", "7"]);
    let script = repo_root().join("scripts/arviz_check_csv.py");
    let output = Command::new(python)
        .arg(&script)
        .arg(&dir)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "ArviZ could not read the files: {}{}",
        stdout(&output),
        stderr(&output)
    );
    // The script prints `name mean ess_bulk ess_tail r_hat` per variable; compare with ours.
    let files: Vec<String> = (1..=4)
        .map(|i| std::fs::read_to_string(dir.join(format!("draws_{i}.csv"))).expect("file"))
        .collect();
    let parsed: Vec<(Vec<String>, Vec<Vec<f64>>)> =
        files.iter().map(|csv| parse_csv(csv)).collect();
    let header = &parsed[0].0;
    let mut compared = 0;
    for line in stdout(&output).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, mean, ess_bulk, ess_tail, r_hat] = fields[..] else {
            continue;
        };
        let column = header
            .iter()
            .position(|h| h == name)
            .expect("arviz names a column we wrote");
        let chains: Vec<Vec<f64>> = parsed
            .iter()
            .map(|(_, rows)| rows.iter().map(|r| r[column]).collect())
            .collect();
        let slices: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
        let ours = sampler::diagnostics::summarize(&slices);
        for (what, theirs, ours) in [
            ("mean", mean, ours.mean),
            ("ess_bulk", ess_bulk, ours.ess_bulk),
            ("ess_tail", ess_tail, ours.ess_tail),
            ("r_hat", r_hat, ours.rhat),
        ] {
            let theirs: f64 = theirs.parse().expect("number");
            assert!(
                (theirs - ours).abs() <= 1e-6 * theirs.abs().max(1.0),
                "{name} {what}: ArviZ {theirs}, ours {ours}"
            );
        }
        compared += 1;
    }
    assert_eq!(
        compared, 18,
        "ArviZ should report mu, tau, z[8] and theta[8]"
    );
}

fn parse_csv(csv: &str) -> (Vec<String>, Vec<Vec<f64>>) {
    let mut rows = data_rows(csv).into_iter();
    let header = rows
        .next()
        .expect("header")
        .split(',')
        .map(str::to_owned)
        .collect();
    let values = rows
        .map(|row| row.split(',').map(|v| v.parse().expect("number")).collect())
        .collect();
    (header, values)
}

/// A malformed model gets one line on stderr that names the problem, and exit code 2.
fn check_bad_model(name: &str, content: &str, expected: &str) {
    let dir = scratch_dir(name);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, content).expect("write model");
    let output = cli(&["sample", path.to_str().expect("utf8 path"), "--quiet"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{name}: stderr {}",
        stderr(&output)
    );
    let message = stderr(&output);
    assert_eq!(
        message.trim_end().lines().count(),
        1,
        "{name}: not one line: {message}"
    );
    assert!(
        message.contains(expected),
        "{name}: `{message}` does not mention `{expected}`"
    );
    assert!(
        message.contains(&format!("{name}.json")),
        "{name}: `{message}` does not name the file"
    );
}

#[test]
fn malformed_model_files_get_one_line_and_exit_code_2() {
    let model = |statement: &str| {
        format!(
            r#"{{"ir_version": 1, "name": "m", "data": {{"y": {{"vector": [1.0, 2.0]}}}},
               "parameters": [{{"name": "mu"}}], "model": [{statement}]}}"#
        )
    };
    check_bad_model("truncated", r#"{"ir_version": 1, "name": "#, "EOF");
    check_bad_model("not_json", "hello", "expected value");
    check_bad_model(
        "unknown_dist",
        &model(r#"{"sample": {"value": "y", "dist": {"normall": {"mu": "mu", "sigma": 1}}}}"#),
        "unknown variant `normall`",
    );
    check_bad_model(
        "negative_sigma",
        &model(r#"{"sample": {"value": "y", "dist": {"normal": {"mu": "mu", "sigma": -1}}}}"#),
        "model[0].sample.dist.normal.sigma: sigma must be > 0, found -1",
    );
    check_bad_model(
        "unknown_name",
        &model(r#"{"sample": {"value": "y", "dist": {"normal": {"mu": "mu_", "sigma": 1}}}}"#),
        "unknown name `mu_` (did you mean `mu`?)",
    );
    check_bad_model("missing_file_is_exit_2_too", "", "EOF");
}

#[test]
fn a_missing_model_file_is_reported_with_its_path() {
    let output = cli(&["sample", "models/does_not_exist.json", "--quiet"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("models/does_not_exist.json: cannot read the model file"));
}

/// `devices` lists adapters, or says in one line that there is none (exit code 1); with
/// `--check` each adapter's GPU results match the CPU. `REQUIRE_GPU=1` makes "none" a failure.
#[test]
fn devices_lists_adapters_or_says_there_is_none() {
    let output = cli(&["devices", "--check", "--chains", "70"]);
    let (out, err) = (stdout(&output), stderr(&output));
    if output.status.code() == Some(1) && err.contains("no GPU adapter") {
        assert!(
            std::env::var("REQUIRE_GPU").map_or(true, |v| v != "1"),
            "REQUIRE_GPU=1 but: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line, got:\n{err}");
        eprintln!("skipping the GPU part of this test: {}", err.trim());
        return;
    }
    assert!(output.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    for field in [
        "backend:  vulkan",
        "type:",
        "memory:",
        "features:",
        "limits:",
    ] {
        assert!(out.contains(field), "missing {field} in:\n{out}");
    }
    assert!(out.contains("eight_schools_noncentered"), "{out}");
    assert!(out.contains("every check passed"), "{out}");
}

/// `y ~ normal(mu, 1)`, flat prior: the posterior of `mu` is normal(mean(y), 1 / sqrt(4)) =
/// normal(0.3, 0.5).
const NORMAL_MODEL: &str = r#"{"ir_version": 1, "name": "normal_mean",
    "data": {"y": {"vector": [0.4, -1.1, 1.6, 0.3]}},
    "parameters": [{"name": "mu"}],
    "model": [{"sample": {"value": "y", "dist": {"normal": {"mu": "mu", "sigma": 1}}}}]}"#;

/// The summary row of `name`: mean, sd, 5%, 50%, 95%, mcse, ess_bulk, ess_tail, r_hat.
fn summary_row(text: &str, name: &str) -> Vec<f64> {
    let line = text
        .lines()
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{text}"));
    line.split_whitespace()
        .skip(1)
        .map(|v| v.parse().expect("a number"))
        .collect()
}

/// Whether the run's header line says it ran on a GPU; if not, there must be no usable GPU
/// here (and REQUIRE_GPU unset), said in exactly one warning line.
fn ran_on_gpu(output: &Output) -> bool {
    let (out, err) = (stdout(output), stderr(output));
    let header = out.lines().next().unwrap_or_default();
    if header.contains(" on GPU ") {
        return true;
    }
    assert!(
        std::env::var("REQUIRE_GPU").map_or(true, |v| v != "1"),
        "REQUIRE_GPU=1 but: {header}\n{err}"
    );
    assert!(header.contains("on CPU (no usable GPU)"), "{header}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "one warning line, got:\n{err}");
    assert!(warnings[0].contains("sampling runs on the CPU"), "{err}");
    eprintln!("no usable GPU here: {}", warnings[0]);
    false
}

/// `sample --device gpu` with many chains: the usual summary, one line for all chains, sane
/// diagnostics and the right posterior, and one Stan CSV file per chain.
#[test]
fn sample_on_the_gpu_gives_a_sane_summary_for_many_chains() {
    let dir = scratch_dir("gpu");
    let model = dir.join("normal_mean.json");
    std::fs::write(&model, NORMAL_MODEL).expect("write model");
    let csv = dir.join("draws.csv");
    let output = cli(&[
        "sample",
        model.to_str().expect("utf8 path"),
        "--device",
        "gpu",
        "--chains",
        "64",
        "--warmup",
        "200",
        "--draws",
        "200",
        "--seed",
        "5",
        "--quiet",
        "--output",
        csv.to_str().expect("utf8 path"),
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    ran_on_gpu(&output);
    let text = stdout(&output);
    let mu = summary_row(&text, "mu");
    let (mean, sd, ess_bulk, ess_tail, rhat) = (mu[0], mu[1], mu[6], mu[7], mu[8]);
    // 12800 draws: the Monte Carlo error of the mean is about 0.5 / sqrt(ESS) < 0.01.
    assert!((mean - 0.3).abs() < 0.05, "mean {mean}\n{text}");
    assert!((sd - 0.5).abs() < 0.05, "sd {sd}\n{text}");
    assert!(rhat < 1.01, "r_hat {rhat}\n{text}");
    assert!(ess_bulk > 3000.0 && ess_tail > 3000.0, "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("64 chains: step size")),
        "no line for all chains in:\n{text}"
    );
    assert!(!text.contains("chain 5: step size"), "{text}");
    for chain in 1..=64 {
        let file = dir.join(format!("draws_{chain}.csv"));
        let csv = std::fs::read_to_string(&file).expect("the chain's file");
        assert_one_timing_block(&csv);
        // No jitter by default on the GPU either: one step size per chain.
        let (steps, _) = step_sizes(&csv);
        assert!(steps.iter().all(|&s| s == steps[0]), "{steps:?}");
    }
}

/// Refusing software devices leaves a lavapipe-only machine (CI) without a usable GPU: one
/// warning line, and the CPU samples.
#[test]
fn sample_on_the_gpu_without_a_usable_gpu_falls_back_to_the_cpu() {
    let output = cli(&[
        "sample",
        "models/eight_schools_noncentered.json",
        "--device",
        "gpu",
        "--no-software-gpu",
        "--chains",
        "2",
        "--warmup",
        "200",
        "--draws",
        "200",
        "--quiet",
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let header = stdout(&output)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let software_only = !header.contains(" on GPU ");
    if software_only {
        let err = stderr(&output);
        assert_eq!(err.trim_end().lines().count(), 1, "one line, got:\n{err}");
        assert!(err.contains("software devices are not allowed"), "{err}");
        assert!(header.contains("on CPU (no usable GPU)"), "{header}");
    }
    assert!(stdout(&output).contains("theta[8]"));
}

/// A bad model is the same error with `--device gpu`: one line, exit code 2, before any GPU
/// work; GPU options without `--device gpu` are refused.
#[test]
fn sample_on_the_gpu_keeps_the_exit_codes() {
    let dir = scratch_dir("gpu_bad");
    let path = dir.join("bad.json");
    std::fs::write(&path, "{\"ir_version\": 1, \"name\": ").expect("write model");
    let output = cli(&["sample", path.to_str().expect("utf8"), "--device", "gpu"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(stderr(&output).trim_end().lines().count(), 1);
    assert!(stderr(&output).contains("bad.json"));

    let output = cli(&[
        "sample",
        "models/eight_schools_noncentered.json",
        "--kernel",
        "fused",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("need --device gpu"));
}

#[test]
fn a_closed_stdout_ends_quietly_with_status_0_and_the_files_are_written() {
    let dir = scratch_dir("broken-pipe");
    let csv = dir.join("draws.csv");
    let csv_arg = csv.to_string_lossy().into_owned();
    // The reader is gone before the command prints anything (`| head` that already has its
    // lines): every write to stdout fails with a broken pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_cluster-cli"))
        .args(["sample", "models/eight_schools_noncentered.json"])
        .args(["--chains", "2", "--draws", "200", "--warmup", "200"])
        .args(["--quiet", "--output", &csv_arg])
        .current_dir(repo_root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cluster-cli runs");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("cluster-cli ends");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
    assert!(err.is_empty(), "stderr: {err}");
    // The output after the summary is still written.
    for chain in 1..=2 {
        let file = dir.join(format!("draws_{chain}.csv"));
        let text = std::fs::read_to_string(&file).expect("the chain's file");
        assert_eq!(data_rows(&text).len(), 1 + 200, "{}", file.display());
    }

    // The same through a shell pipeline: the command's own status, not head's.
    let script = format!(
        "set -o pipefail; {:?} sample models/eight_schools_noncentered.json --chains 2 --quiet | head -1 >/dev/null",
        env!("CARGO_BIN_EXE_cluster-cli")
    );
    let output = Command::new("bash")
        .args(["-c", &script])
        .current_dir(repo_root())
        .output()
        .expect("bash runs");
    let err = stderr(&output);
    assert!(output.status.success(), "{:?}: {err}", output.status);
    assert!(!err.contains("panicked"), "stderr: {err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A Stan program with its data file samples as a JSON model does: posteriordb's
/// kidscore_momiq with its data, the posterior mean of the slope against posteriordb's
/// reference within 4 combined MCSE (ours from the summary's mcse column).
#[test]
fn sample_runs_a_stan_program_with_its_data() {
    let output = cli(&[
        "sample",
        "stan/tests/programs/kidscore_momiq.stan",
        "--data",
        "stan/tests/data/kidiq.json",
        "--chains",
        "4",
        "--quiet",
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let text = stdout(&output);
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            repo_root().join("stan/tests/data/kidiq-kidscore_momiq.summary.json"),
        )
        .expect("the reference summary"),
    )
    .expect("json");
    for (j, name) in ["beta[1]", "beta[2]", "sigma"].into_iter().enumerate() {
        let row = summary_row(&text, name);
        let (mean, mcse) = (row[0], row[5]);
        let expected = reference["mean"][j].as_f64().expect("a mean");
        let expected_mcse = reference["mcse_mean"][j].as_f64().expect("an mcse");
        let z = (mean - expected) / (mcse * mcse + expected_mcse * expected_mcse).sqrt();
        assert!(
            z.abs() < 4.0,
            "{name}: mean {mean}, reference {expected}, z {z}"
        );
    }
}

/// The README's main job: the Stan program of models/stan with its data file prints the
/// summary of every parameter and transformed parameter.
#[test]
fn readme_main_job_samples_the_stan_program() {
    let output = cli(&[
        "sample",
        "models/stan/eight_schools_noncentered.stan",
        "--data",
        "models/stan/eight_schools.data.json",
        "--chains",
        "4",
        "--seed",
        "1",
        "--quiet",
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let text = stdout(&output);
    for row in [
        "lp__",
        "theta_trans[1]",
        "mu",
        "tau",
        "theta[1]",
        "theta[8]",
    ] {
        assert!(
            text.lines().any(|line| line.starts_with(row)),
            "missing row {row} in:\n{text}"
        );
    }
}

/// Errors in a Stan program point at file:line:column with the source line and a caret;
/// a program that declares data needs --data, and data that do not fit the declarations
/// are named. Exit code 2 for all.
#[test]
fn stan_errors_point_at_the_source_and_exit_with_code_2() {
    let dir = scratch_dir("stan-errors");
    let bad = dir.join("bad.stan");
    std::fs::write(
        &bad,
        "parameters {\n  real mu\n}\nmodel {\n  mu ~ normal(0, 1);\n}\n",
    )
    .expect("write");
    let output = cli(&["sample", bad.to_str().expect("utf8"), "--quiet"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("bad.stan:3:1: error: "), "{message}");
    assert!(message.contains("^"), "no caret: {message}");

    let program = "stan/tests/programs/kidscore_momiq.stan";
    let output = cli(&["sample", program, "--quiet"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--data"), "{}", stderr(&output));

    let data = dir.join("data.json");
    std::fs::write(&data, r#"{"N": 2, "kid_score": [1, 2]}"#).expect("write");
    let output = cli(&[
        "sample",
        program,
        "--data",
        data.to_str().expect("utf8"),
        "--quiet",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("data.json: ") && message.contains("mom_iq"),
        "{message}"
    );
}

/// A normal model whose generated quantities hold `log_lik`, `y_rep` and a count, with its
/// data; written to `dir`, returned as (program, data) paths.
fn write_gq_program(dir: &Path) -> (String, String) {
    let program = dir.join("normal_gq.stan");
    std::fs::write(
        &program,
        "data { int N; vector[N] y; }
parameters { real mu; real<lower=0> sigma; }
model { mu ~ normal(0, 10); sigma ~ normal(0, 5); y ~ normal(mu, sigma); }
generated quantities {
  vector[N] log_lik;
  array[N] real y_rep;
  int n_above = 0;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[n] | mu, sigma);
    y_rep[n] = normal_rng(mu, sigma);
    n_above += y_rep[n] > mu;
  }
}
",
    )
    .expect("write program");
    let data = dir.join("normal_gq.json");
    std::fs::write(&data, r#"{"N": 6, "y": [1.2, -0.4, 2.5, 0.9, 1.7, 3.1]}"#).expect("write data");
    let path = |p: PathBuf| p.to_str().expect("utf8").to_owned();
    (path(program), path(data))
}

const GQ_Y: [f64; 6] = [1.2, -0.4, 2.5, 0.9, 1.7, 3.1];

/// Generated quantities run once per kept draw: their columns follow the parameters in the
/// Stan CSV and the summary, `log_lik[n]` is the normal log density of `y[n]` at the draw's
/// `mu` and `sigma` (checked against the formula), and the same seed gives the same `y_rep`.
#[test]
fn sample_appends_generated_quantities_to_every_draw() {
    let dir = scratch_dir("gq");
    let (program, data) = write_gq_program(&dir);
    let run = |name: &str| {
        let out = dir.join(name);
        let output = cli(&[
            "sample",
            &program,
            "--data",
            &data,
            "--chains",
            "2",
            "--draws",
            "200",
            "--warmup",
            "200",
            "--seed",
            "3",
            "--quiet",
            "--output",
            out.to_str().expect("utf8"),
        ]);
        assert!(output.status.success(), "stderr: {}", stderr(&output));
        let files: Vec<String> = (1..=2)
            .map(|i| {
                let file = out
                    .to_str()
                    .expect("utf8")
                    .replace(".csv", &format!("_{i}.csv"));
                std::fs::read_to_string(file).expect("chain file")
            })
            .collect();
        (stdout(&output), files)
    };
    let (text, files) = run("a.csv");
    for row in ["log_lik[1]", "log_lik[6]", "y_rep[6]", "n_above"] {
        assert!(
            text.lines().any(|l| l.starts_with(row)),
            "missing row {row} in:\n{text}"
        );
    }
    let (header, rows) = parse_csv(&files[0]);
    let at = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no {name} in {header:?}"))
    };
    assert!(at("sigma") < at("log_lik.1") && at("log_lik.6") < at("y_rep.1"));
    assert!(at("y_rep.6") < at("n_above"));
    assert_eq!(rows.len(), 200);
    for row in &rows {
        let (mu, sigma) = (row[at("mu")], row[at("sigma")]);
        for (n, y) in GQ_Y.iter().enumerate() {
            let z = (y - mu) / sigma;
            let expected = -0.5 * z * z - sigma.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln();
            let ours = row[at(&format!("log_lik.{}", n + 1))];
            assert!(
                (ours - expected).abs() < 1e-9 * expected.abs().max(1.0),
                "{ours} vs {expected}"
            );
        }
        let above = (1..=6)
            .filter(|n| row[at(&format!("y_rep.{n}"))] > mu)
            .count();
        assert_eq!(row[at("n_above")], above as f64);
    }
    let (_, again) = run("b.csv");
    assert_eq!(
        parse_csv(&again[1]).1,
        parse_csv(&files[1]).1,
        "same seed, same draws and y_rep"
    );
}

/// With `ARVIZ_PYTHON` set, ArviZ reads `log_lik` from our Stan CSV as the log likelihood
/// and computes PSIS-LOO; its `elpd_loo + p_loo` is by definition the log pointwise
/// predictive density, which we compute here from the same files.
#[test]
fn arviz_computes_loo_from_our_log_lik() {
    let Some(python) = std::env::var_os("ARVIZ_PYTHON") else {
        eprintln!("skipped: set ARVIZ_PYTHON to a python with arviz to run this test");
        return;
    };
    let dir = scratch_dir("arviz-loo");
    let (program, data) = write_gq_program(&dir);
    let out = dir.join("draws.csv");
    let output = cli(&[
        "sample",
        &program,
        "--data",
        &data,
        "--chains",
        "4",
        "--seed",
        "5",
        "--quiet",
        "--output",
        out.to_str().expect("utf8"),
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let output = Command::new(python)
        .arg(repo_root().join("scripts/arviz_loo_csv.py"))
        .arg(&dir)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "ArviZ failed: {}{}",
        stdout(&output),
        stderr(&output)
    );
    let text = stdout(&output);
    let fields: Vec<f64> = text
        .split_whitespace()
        .map(|f| f.parse().expect("number"))
        .collect();
    let [n_obs, elpd_loo, p_loo] = fields[..] else {
        panic!("unexpected output: {text}");
    };
    assert_eq!(n_obs, 6.0);
    // lppd = sum_n log mean_s exp(log_lik[s, n]) over all chains' draws.
    let mut per_obs: Vec<Vec<f64>> = vec![Vec::new(); 6];
    for i in 1..=4 {
        let csv = std::fs::read_to_string(dir.join(format!("draws_{i}.csv"))).expect("file");
        let (header, rows) = parse_csv(&csv);
        for (n, values) in per_obs.iter_mut().enumerate() {
            let k = header
                .iter()
                .position(|h| *h == format!("log_lik.{}", n + 1))
                .expect("log_lik column");
            values.extend(rows.iter().map(|r| r[k]));
        }
    }
    let lppd: f64 = per_obs
        .iter()
        .map(|v| {
            let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            m + (v.iter().map(|x| (x - m).exp()).sum::<f64>() / v.len() as f64).ln()
        })
        .sum();
    assert!(
        (elpd_loo + p_loo - lppd).abs() < 1e-6 * lppd.abs().max(1.0),
        "ArviZ elpd_loo {elpd_loo} + p_loo {p_loo}, our lppd {lppd}"
    );
    assert!(
        p_loo > 0.5 && p_loo < 6.0,
        "p_loo {p_loo} for a two-parameter model"
    );
}

/// A JSON IR file without data samples with its data given apart in Stan's JSON format, and
/// gives the same draws as the file with the data inside; data given twice is an error.
#[test]
fn sample_reads_an_ir_file_with_data_apart() {
    let dir = scratch_dir("ir-data");
    let original =
        std::fs::read_to_string(repo_root().join("models/eight_schools_noncentered.json"))
            .expect("model");
    let mut model: serde_json::Value = serde_json::from_str(&original).expect("json");
    model["data"] = serde_json::json!({});
    let bare = dir.join("model.json");
    std::fs::write(&bare, model.to_string()).expect("write model");
    let data = dir.join("data.json");
    std::fs::write(
        &data,
        r#"{"y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}"#,
    )
    .expect("write data");
    let common = ["--chains", "2", "--seed", "4", "--quiet"];
    let apart = cli(&[
        &[
            "sample",
            bare.to_str().expect("utf8"),
            "--data",
            data.to_str().expect("utf8"),
        ][..],
        &common,
    ]
    .concat());
    assert!(apart.status.success(), "stderr: {}", stderr(&apart));
    let whole = cli(&[
        &["sample", "models/eight_schools_noncentered.json"][..],
        &common,
    ]
    .concat());
    let table = |o: &Output| {
        stdout(o)
            .lines()
            .filter(|l| l.starts_with("mu ") || l.starts_with("tau ") || l.starts_with("theta[8]"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(table(&apart), table(&whole));
    assert_eq!(table(&whole).len(), 3);
    let twice = cli(&[
        "sample",
        "models/eight_schools_noncentered.json",
        "--data",
        data.to_str().expect("utf8"),
        "--quiet",
    ]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(
        stderr(&twice).contains("give it once"),
        "{}",
        stderr(&twice)
    );
}
