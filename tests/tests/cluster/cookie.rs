//! The cookie: a mismatch is reported as such, cookie files are private, and the cookie never
//! reaches the logs.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use workspace_tests::cluster::{COMMAND_LIMIT, Cluster};
use workspace_tests::process;

const LIMIT: Duration = Duration::from_secs(15);

#[test]
fn cookie_mismatch_fails_join_with_the_authentication_message() {
    let cluster = Cluster::new("mismatch");
    let a = cluster.node("a", &[]);
    let refused = cluster.cli(&["join", "--cookie", "NOTTHECOOKIE", &a.address.to_string()]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("authentication failed (cookie mismatch?)"),
        "{refused:?}"
    );
    assert!(
        refused.stderr.contains(&a.address.to_string()),
        "{refused:?}"
    );
    assert_eq!(refused.stderr.lines().count(), 1, "{refused:?}");
    // The node says so too.
    a.process
        .wait_for_line("closed before authenticating (cookie mismatch?)", LIMIT)
        .unwrap();
}

#[test]
fn cookie_file_is_created_private_and_used_by_every_command() {
    let cluster = Cluster::new("cookie-file");
    let without_env = |command: &mut std::process::Command| {
        command.env_remove("BAYES_CLUSTER_COOKIE");
    };
    let a = cluster.node_with("a", &[], without_env);
    let path = cluster.config_home().join("bayes-cluster").join("cookie");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());
    let mut status = cluster.command();
    without_env(&mut status);
    status.args(["status", "--cluster", &a.address.to_string()]);
    let status = process::run(status, COMMAND_LIMIT);
    assert!(status.status.success(), "{status:?}");
    assert!(status.stdout.contains("a@127.0.0.1"), "{status:?}");
}

#[test]
fn cookie_file_readable_by_others_is_refused() {
    let cluster = Cluster::new("cookie-mode");
    let dir = cluster.config_home().join("bayes-cluster");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cookie");
    fs::write(&path, "SHAREDCOOKIE\n").unwrap();
    for mode in [0o644, 0o660] {
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        let mut node = cluster.command();
        node.env_remove("BAYES_CLUSTER_COOKIE").args([
            "node",
            "--name",
            "a",
            "--listen",
            "127.0.0.1:1",
            "--no-gpu",
        ]);
        let refused = process::run(node, COMMAND_LIMIT);
        assert_eq!(refused.status.code(), Some(1), "{refused:?}");
        let expected = format!(
            "error: cookie file {} is accessible by group or others (mode {mode:o}): run `chmod 600 {}`",
            path.display(),
            path.display()
        );
        assert_eq!(refused.stderr.trim_end(), expected);
    }
}

#[test]
fn cookie_never_appears_in_logs_even_at_trace_level() {
    let cluster = Cluster::new("cookie-trace");
    let trace = |command: &mut std::process::Command| {
        command.env("RUST_LOG", "trace");
    };
    let mut a = cluster.node_with("a", &[], trace);
    let mut b = cluster.node_with("b", &[&a], trace);
    cluster.wait_for_states(&a, &[(&b, "up")], LIMIT);
    let mut status = cluster.command();
    status
        .env("RUST_LOG", "trace")
        .args(["status", "--cluster", &a.address.to_string()]);
    let status = process::run(status, COMMAND_LIMIT);
    assert!(status.status.success(), "{status:?}");
    for node in [&a, &b] {
        node.process.signal("TERM");
    }
    for node in [&mut a, &mut b] {
        let exit = node.process.wait_exit(LIMIT);
        assert!(
            exit.is_some_and(|e| e.success()),
            "{} did not stop: {exit:?}",
            node.name
        );
    }
    let mut output = a.process.lines();
    output.extend(b.process.lines());
    output.extend(status.stdout.lines().map(str::to_owned));
    output.extend(status.stderr.lines().map(str::to_owned));
    // Trace level was really on, for our crates and ractor's.
    for target in ["TRACE", "runtime::", "ractor_cluster::"] {
        assert!(
            output.iter().any(|l| l.contains(target)),
            "no {target} line"
        );
    }
    let leaks: Vec<_> = output
        .iter()
        .filter(|l| l.contains(cluster.cookie()))
        .collect();
    assert!(leaks.is_empty(), "the cookie is in the logs: {leaks:?}");
}
