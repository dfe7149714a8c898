//! A software GPU (lavapipe, llvmpipe: Vulkan on the CPU's cores, slower than the CPU pool)
//! is used only when asked or when a node has no CPU pool: a node started without
//! `--software-gpu` on a machine that has only such an adapter runs no GPU pool, says so, and `status` shows the adapter as not
//! used, so `sample --cluster` runs on CPU slots; a node started with the flag runs its GPU
//! pool there and `--device gpu` jobs go to it, its `status` row showing the chains the
//! adapter runs (and `devices --cluster` the same). The nodes see lavapipe alone
//! (`VK_ICD_FILENAMES`), whatever else the machine has.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use workspace_tests::cluster::{Cluster, NodeOptions, NodeProcess};
use workspace_tests::posterior::NormalMean;
use workspace_tests::process::wait_until;

const MESH_LIMIT: Duration = Duration::from_secs(15);
/// A small job, start to summary, on lavapipe (which compiles its kernels first).
const JOB_LIMIT: Duration = Duration::from_secs(120);

/// lavapipe's Vulkan driver manifest: the one `VK_ICD_FILENAMES` names (a lavapipe
/// unpacked elsewhere), else where Mesa installs it.
fn lavapipe_icd() -> Option<PathBuf> {
    let is_lavapipe = |path: &PathBuf| {
        path.file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("lvp_icd"))
    };
    let given = std::env::var_os("VK_ICD_FILENAMES").map(PathBuf::from);
    if let Some(path) = given.filter(|path| is_lavapipe(path) && path.is_file()) {
        return Some(path);
    }
    ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(is_lavapipe)
}

fn skip_or_fail(why: &str) {
    assert!(
        std::env::var_os("REQUIRE_GPU").is_none_or(|v| v != "1"),
        "REQUIRE_GPU=1 but {why}"
    );
    eprintln!("skipped: {why} (set REQUIRE_GPU=1 to make this a failure)");
}

/// Runs `sample --cluster AT` and returns its output once it succeeded.
fn sample(cluster: &Cluster, at: &NodeProcess, model: &str, args: &[&str]) -> Vec<String> {
    let address = at.address.to_string();
    let mut all = vec!["sample", "--cluster", &address, model, "--quiet"];
    all.extend_from_slice(args);
    let mut client = cluster.spawn_cli(&all);
    let status = client.wait_exit(JOB_LIMIT);
    let lines = client.lines();
    assert!(
        status.is_some_and(|s| s.success()),
        "sample exited with {status:?}:\n{}",
        lines.join("\n")
    );
    lines
}

/// `node`'s own row of `status`, asked of `node` (its resources as they are now).
fn gpu_row(cluster: &Cluster, node: &NodeProcess) -> String {
    let status = cluster.cli(&["status", "--cluster", &node.address.to_string()]);
    assert!(status.status.success(), "{status:?}");
    status
        .stdout
        .lines()
        .find(|l| l.starts_with(&node.name))
        .unwrap_or_default()
        .to_owned()
}

/// The workers of the placement lines: `chains 0,1 placed on NODE (cpu)`.
fn placements(lines: &[String]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter_map(|l| l.split_once(" placed on "))
        .filter_map(|(_, rest)| {
            let (node, worker) = rest.split_once(" (")?;
            Some((node.to_owned(), worker.trim_end_matches(')').to_owned()))
        })
        .collect()
}

#[test]
fn software_gpu_is_used_only_by_a_node_started_with_the_flag() {
    let Some(icd) = lavapipe_icd() else {
        skip_or_fail("lavapipe (mesa-vulkan-drivers) is not installed");
        return;
    };
    let cluster = Cluster::new("software-gpu");
    let lavapipe = |flag: bool| {
        let icd = icd.clone();
        move |command: &mut Command| {
            command
                .env("VK_ICD_FILENAMES", &icd)
                .env("VK_DRIVER_FILES", &icd);
            if flag {
                command.arg("--software-gpu");
            }
        }
    };
    let gpu = NodeOptions {
        gpu: true,
        ..NodeOptions::default()
    };
    let a = cluster.node("a", &[]);
    let g = cluster.node_opts("g", &[&a], gpu, lavapipe(false));
    // Adapters are listed before the node says it listens.
    let lines = g.process.lines();
    if !lines.iter().any(|l| l.contains("software GPU adapter")) {
        skip_or_fail(&format!(
            "node g found no software adapter:\n{}",
            lines.join("\n")
        ));
        return;
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("start the node with --software-gpu")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("gpu pool on")),
        "{lines:?}"
    );
    for (me, other) in [(&a, &g), (&g, &a)] {
        cluster.wait_for_states(me, &[(me, "local"), (other, "up")], MESH_LIMIT);
    }
    let status = cluster.cli(&["status", "--cluster", &a.address.to_string()]);
    assert!(status.status.success(), "{status:?}");
    let row = status
        .stdout
        .lines()
        .find(|l| l.starts_with(&g.name))
        .unwrap_or_else(|| panic!("{}", status.stdout));
    assert!(row.contains("software, not used"), "{row}");
    assert!(
        status.stdout.contains(": 4 cpu slots, 0 gpus,"),
        "{}",
        status.stdout
    );

    let model = NormalMean::new(20);
    let path = model.write(cluster.config_home(), "normal.json");
    let lines = sample(
        &cluster,
        &a,
        &path,
        &["--chains", "4", "--warmup", "200", "--draws", "100"],
    );
    let placed = placements(&lines);
    assert!(!placed.is_empty(), "{lines:?}");
    assert!(
        placed.iter().all(|(_, worker)| worker == "cpu"),
        "{placed:?}"
    );

    // Asked for: h runs a GPU pool on lavapipe, and GPU jobs go there.
    let h = cluster.node_opts("h", &[&a], gpu, lavapipe(true));
    h.process
        .wait_for_line("gpu pool on", MESH_LIMIT)
        .expect("h runs a GPU pool");
    cluster.wait_for_states(&a, &[(&h, "up")], MESH_LIMIT);
    let lines = sample(
        &cluster,
        &a,
        &path,
        &[
            "--chains", "8", "--device", "gpu", "--warmup", "200", "--draws", "100",
        ],
    );
    let placed = placements(&lines);
    assert!(!placed.is_empty(), "{lines:?}");
    assert!(
        placed
            .iter()
            .all(|(node, worker)| *node == h.name && worker == "gpu"),
        "{placed:?}"
    );

    // While a GPU job runs on h, h's status shows the chains its adapter runs; once the
    // job is cancelled (the client interrupted), the adapter is idle again.
    let idle = gpu_row(&cluster, &h);
    assert!(idle.contains("software, idle"), "{idle}");
    let address = a.address.to_string();
    let long = cluster.spawn_cli(&[
        "sample",
        "--cluster",
        &address,
        &path,
        "--quiet",
        "--chains",
        "8",
        "--device",
        "gpu",
        "--warmup",
        "50000",
        "--draws",
        "100",
    ]);
    wait_until(JOB_LIMIT, "h's GPU running 8 chains", || {
        let row = gpu_row(&cluster, &h);
        row.contains("software, running 8 chains")
            .then_some(())
            .ok_or(row)
    });
    let devices = cluster.cli(&["devices", "--cluster", &h.address.to_string()]);
    assert!(devices.status.success(), "{devices:?}");
    assert!(
        devices.stdout.contains("software): running 8 chains"),
        "{}",
        devices.stdout
    );
    long.signal("INT");
    wait_until(JOB_LIMIT, "h's GPU idle again", || {
        let row = gpu_row(&cluster, &h);
        row.contains("software, idle").then_some(()).ok_or(row)
    });

    // A node with no CPU pool uses the software adapter without being told.
    let gpu_only = NodeOptions {
        cpu_slots: 0,
        ..gpu
    };
    let z = cluster.node_opts("z", &[&a], gpu_only, lavapipe(false));
    z.process
        .wait_for_line("gpu pool on", MESH_LIMIT)
        .expect("z, with no CPU slots, runs a GPU pool on the software adapter");
}
