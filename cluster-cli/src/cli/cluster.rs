//! What the cluster subcommands (`node`, `join`, `status`) share: address parsing, the TLS
//! flags, the async runtime, and the member table.

use std::fmt::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use runtime::{MemberState, MemberStatus, TlsIdentity};

/// TLS flags, shared by `node` and every command that talks to a cluster. All three or none:
/// with them, every connection is TLS with mutual authentication (the cookie is still
/// checked inside it). `cluster-cli tls init DIR` makes a set.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsOptions {
    /// This process's certificate (PEM, intermediates after it), signed by --tls-ca.
    #[arg(long, value_name = "PATH")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM; mode 0600).
    #[arg(long, value_name = "PATH")]
    tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM): every peer's certificate must be signed by it.
    #[arg(long, value_name = "PATH")]
    tls_ca: Option<PathBuf>,
}

impl TlsOptions {
    /// The TLS identity the flags name, or `None` without them.
    pub fn identity(&self) -> anyhow::Result<Option<TlsIdentity>> {
        let (cert, key, ca) = match (&self.tls_cert, &self.tls_key, &self.tls_ca) {
            (None, None, None) => return Ok(None),
            (Some(cert), Some(key), Some(ca)) => (cert, key, ca),
            _ => {
                let missing: Vec<&str> = [
                    (self.tls_cert.is_none(), "--tls-cert"),
                    (self.tls_key.is_none(), "--tls-key"),
                    (self.tls_ca.is_none(), "--tls-ca"),
                ]
                .into_iter()
                .filter_map(|(absent, flag)| absent.then_some(flag))
                .collect();
                bail!(
                    "--tls-cert, --tls-key and --tls-ca go together: {} missing",
                    missing.join(" and ")
                );
            }
        };
        let mode = std::fs::metadata(key)
            .with_context(|| format!("cannot read the TLS key {}", key.display()))?
            .permissions()
            .mode()
            & 0o777;
        if mode & 0o077 != 0 {
            bail!(
                "TLS key file {} is accessible by group or others (mode {mode:o}): run `chmod 600 {}`",
                key.display(),
                key.display()
            );
        }
        let read = |path: &Path, what: &str| {
            std::fs::read(path)
                .with_context(|| format!("cannot read the {what} {}", path.display()))
        };
        let identity = TlsIdentity::from_pem(
            &read(cert, "TLS certificate")?,
            &read(key, "TLS key")?,
            &read(ca, "TLS CA certificate")?,
        )
        .with_context(|| {
            format!(
                "--tls-cert {}, --tls-key {}, --tls-ca {}",
                cert.display(),
                key.display(),
                ca.display()
            )
        })?;
        Ok(Some(identity))
    }
}

/// Resolves `HOST:PORT` (an IP address or a host name) to its first address.
pub fn resolve(address: &str) -> anyhow::Result<SocketAddr> {
    address
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {address:?} (expected HOST:PORT)"))?
        .next()
        .with_context(|| format!("{address:?} resolves to no address"))
}

/// Runs `future` on a multi-threaded tokio runtime.
pub fn block_on<F: Future>(future: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}

/// The member table `join` and `status` print, and a summary line.
pub fn members_table(members: &[MemberStatus]) -> String {
    let header = [
        "NODE",
        "ADDRESS",
        "STATE",
        "CPU SLOTS",
        "GPUS",
        "RUNNING JOBS",
    ];
    let rows: Vec<[String; 6]> = members
        .iter()
        .map(|member| {
            let (cpu, gpus, jobs) = match &member.resources {
                Some(r) => (
                    r.cpu_slots.to_string(),
                    gpu_list(r),
                    r.running_jobs.to_string(),
                ),
                None => ("?".into(), "?".into(), "?".into()),
            };
            [
                member.name.to_string(),
                member.address.to_string(),
                member.state.to_string(),
                cpu,
                gpus,
                jobs,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let text: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    let up = members
        .iter()
        .filter(|m| {
            matches!(
                m.state,
                MemberState::Local | MemberState::Up | MemberState::Draining
            )
        })
        .count();
    let resources = members.iter().filter_map(|m| m.resources.as_ref());
    let (cpu, gpus, jobs) = resources.fold((0u64, 0usize, 0u64), |(c, g, j), r| {
        (
            c + u64::from(r.cpu_slots),
            g + r.gpus.iter().filter(|gpu| gpu.in_use).count(),
            j + u64::from(r.running_jobs),
        )
    });
    let _ = writeln!(
        out,
        "{} nodes ({up} up): {cpu} cpu slots, {gpus} gpus, {jobs} running jobs",
        members.len()
    );
    out
}

fn gpu_list(resources: &runtime::NodeResources) -> String {
    if resources.gpus.is_empty() {
        return "-".into();
    }
    let gpus: Vec<String> = resources
        .gpus
        .iter()
        .map(|gpu| {
            let mut notes = vec![gpu.backend.clone()];
            if let Some(bytes) = gpu.memory_bytes {
                notes.push(format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30)));
            }
            if gpu.software {
                notes.push("software".to_owned());
            }
            if !gpu.in_use {
                notes.push("not used".to_owned());
            } else if gpu.chains > 0 {
                notes.push(format!("running {} chains", gpu.chains));
            } else {
                notes.push("idle".to_owned());
            }
            format!("{} ({})", gpu.adapter, notes.join(", "))
        })
        .collect();
    gpus.join(", ")
}
