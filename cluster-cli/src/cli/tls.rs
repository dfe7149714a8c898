//! `cluster-cli tls init DIR`: a private CA and two certificates signed by it, for a quick
//! start with TLS: `node.pem` for nodes (server and client use: a node also dials its peers)
//! and `client.pem` for the commands that talk to a cluster (`join`, `status`,
//! `sample --cluster`). Their names are 127.0.0.1, ::1, localhost and every `--host`: a
//! dialler checks the node's certificate against the address it dialled, so list every
//! address nodes are reached at (their `--advertise` addresses).
//!
//! Keys are written with mode 0600 and nothing is overwritten. Anyone with `ca-key.pem` can
//! make certificates the cluster accepts: keep it off the nodes.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Arguments of `tls`.
#[derive(Debug, clap::Args)]
pub struct TlsArgs {
    #[command(subcommand)]
    command: TlsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TlsCommand {
    /// Make a private CA (ca.pem, ca-key.pem), a node certificate (node.pem, node-key.pem) and
    /// a client certificate (client.pem, client-key.pem) in DIR.
    Init {
        /// The directory (created if missing; existing files in it are never overwritten).
        dir: PathBuf,
        /// Another name or IP address the nodes are reached at (repeatable); 127.0.0.1, ::1
        /// and localhost are always in.
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
    },
}

/// Files `tls init` writes, certificates then keys.
const FILES: [&str; 6] = [
    "ca.pem",
    "node.pem",
    "client.pem",
    "ca-key.pem",
    "node-key.pem",
    "client-key.pem",
];

/// The CA's validity.
const CA_DAYS: u64 = 3650;
/// The node and client certificates' validity.
const LEAF_DAYS: u64 = 825;

pub fn run(args: TlsArgs) -> anyhow::Result<()> {
    match args.command {
        TlsCommand::Init { dir, hosts } => init(&dir, &hosts),
    }
}

fn init(dir: &Path, hosts: &[String]) -> anyhow::Result<()> {
    let names = make(dir, hosts)?;
    let at = |file: &str| dir.join(file).display().to_string();
    outln!(
        "wrote a private CA and certificates for {} to {}\n",
        names.join(", "),
        dir.display()
    );
    outln!(
        "nodes:   cluster-cli node ... --tls-cert {} --tls-key {} --tls-ca {}",
        at("node.pem"),
        at("node-key.pem"),
        at("ca.pem")
    );
    outln!(
        "clients: cluster-cli status ... --tls-cert {} --tls-key {} --tls-ca {}",
        at("client.pem"),
        at("client-key.pem"),
        at("ca.pem")
    );
    outln!(
        "\nCopy ca.pem and the node files to every node; keep ca-key.pem elsewhere (it makes certificates the cluster trusts)."
    );
    Ok(())
}

/// Writes the CA and the two certificates to `dir`; returns the names in the node
/// certificate.
pub fn make(dir: &Path, hosts: &[String]) -> anyhow::Result<Vec<String>> {
    for file in FILES {
        let path = dir.join(file);
        if path.exists() {
            bail!(
                "{} exists: `tls init` never overwrites; choose another directory",
                path.display()
            );
        }
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;

    // rcgen's dates: the epoch plus the time since.
    let now = rcgen::date_time_ymd(1970, 1, 1)
        + SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
    let mut names = vec![
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
        "localhost".to_owned(),
    ];
    for host in hosts {
        if !names.contains(host) {
            names.push(host.clone());
        }
    }

    let ca_key = KeyPair::generate().context("cannot make the CA key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.distinguished_name
        .push(DnType::CommonName, "bayes-cluster private CA");
    ca.not_before = now - Duration::from_secs(86_400);
    ca.not_after = now + Duration::from_secs(CA_DAYS * 86_400);
    let ca_cert = ca
        .self_signed(&ca_key)
        .context("cannot make the CA certificate")?;
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca, ca_key);

    let leaf = |common_name: &str, names: Vec<String>, usages: Vec<ExtendedKeyUsagePurpose>| {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = usages;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.not_before = now - Duration::from_secs(86_400);
        params.not_after = now + Duration::from_secs(LEAF_DAYS * 86_400);
        let cert = params.signed_by(&key, &issuer)?;
        Ok::<_, rcgen::Error>((cert, key))
    };
    let (node, node_key) = leaf(
        "bayes-cluster node",
        names.clone(),
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    )
    .context("cannot make the node certificate")?;
    let (client, client_key) = leaf(
        "bayes-cluster client",
        Vec::new(),
        vec![ExtendedKeyUsagePurpose::ClientAuth],
    )
    .context("cannot make the client certificate")?;

    let contents: [(&str, String, u32); 6] = [
        ("ca.pem", ca_cert.pem(), 0o644),
        ("node.pem", node.pem(), 0o644),
        ("client.pem", client.pem(), 0o644),
        ("ca-key.pem", ca_key_pem, 0o600),
        ("node-key.pem", node_key.serialize_pem(), 0o600),
        ("client-key.pem", client_key.serialize_pem(), 0o600),
    ];
    for (file, text, mode) in contents {
        write_new(&dir.join(file), text.as_bytes(), mode)?;
    }
    Ok(names)
}

/// Writes a new file with `mode`; an existing one is an error.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
