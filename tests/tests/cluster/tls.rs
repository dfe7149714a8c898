//! TLS between nodes and clients: nodes with `tls init` certificates mesh and sample, the
//! cookie is still checked inside TLS, and every refusal says which: a plaintext peer of a
//! TLS node, a TLS peer of a plaintext node, a certificate from another CA, an expired one.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use workspace_tests::cluster::{Cluster, NodeProcess};
use workspace_tests::posterior::NormalMean;

const LIMIT: Duration = Duration::from_secs(15);

/// Certificate files: `(cert, key, ca)`.
#[derive(Debug, Clone)]
struct Identity {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

impl Identity {
    fn args(&self) -> Vec<String> {
        [
            ("--tls-cert", &self.cert),
            ("--tls-key", &self.key),
            ("--tls-ca", &self.ca),
        ]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_owned(), path.display().to_string()])
        .collect()
    }
}

/// `cluster-cli tls init DIR`: the node and client identities it makes.
fn tls_init(cluster: &Cluster, dir: &str) -> (Identity, Identity) {
    let dir = cluster.config_home().join(dir);
    let done = cluster.cli(&["tls", "init", &dir.display().to_string()]);
    assert!(done.status.success(), "{done:?}");
    assert!(done.stdout.contains("--tls-cert"), "{done:?}");
    let mode = fs::metadata(dir.join("node-key.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = cluster.cli(&["tls", "init", &dir.display().to_string()]);
    assert!(
        !again.status.success() && again.stderr.contains("never overwrites"),
        "{again:?}"
    );
    let identity = |who: &str| Identity {
        cert: dir.join(format!("{who}.pem")),
        key: dir.join(format!("{who}-key.pem")),
        ca: dir.join("ca.pem"),
    };
    (identity("node"), identity("client"))
}

/// A private CA made here, for certificates `tls init` does not make (expired ones).
struct TestCa {
    dir: PathBuf,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca: PathBuf,
}

impl TestCa {
    fn new(dir: &Path) -> Self {
        fs::create_dir_all(dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test CA");
        let cert = params.self_signed(&key).unwrap();
        let ca = dir.join("ca.pem");
        fs::write(&ca, cert.pem()).unwrap();
        Self {
            dir: dir.to_owned(),
            issuer: rcgen::Issuer::new(params, key),
            ca,
        }
    }

    /// A certificate for 127.0.0.1 for both ends of a connection; expired if asked.
    fn identity(&self, name: &str, expired: bool) -> Identity {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let identity = Identity {
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}-key.pem")),
            ca: self.ca.clone(),
        };
        fs::write(&identity.cert, cert.pem()).unwrap();
        fs::write(&identity.key, key.serialize_pem()).unwrap();
        fs::set_permissions(&identity.key, fs::Permissions::from_mode(0o600)).unwrap();
        identity
    }
}

fn tls_node(cluster: &Cluster, short: &str, seeds: &[&NodeProcess], id: &Identity) -> NodeProcess {
    let args = id.args();
    cluster.node_with(short, seeds, |command| {
        command.args(&args);
    })
}

/// `cluster-cli ARGS` with the identity's flags; its stderr when it fails.
fn cli_tls(cluster: &Cluster, args: &[&str], id: Option<&Identity>) -> Result<String, String> {
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    if let Some(id) = id {
        all.extend(id.args());
    }
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let done = cluster.cli(&all);
    if done.status.success() {
        Ok(done.stdout)
    } else {
        Err(done.stderr)
    }
}

#[test]
fn tls_nodes_mesh_sample_and_still_check_the_cookie() {
    let cluster = Cluster::new("tls-mesh");
    let (node, client) = tls_init(&cluster, "pki");
    let a = tls_node(&cluster, "a", &[], &node);
    let b = tls_node(&cluster, "b", &[&a], &node);
    let at = a.address.to_string();
    let listening = a.process.wait_for_line("listening on", LIMIT).unwrap();
    assert!(listening.ends_with(", TLS)"), "{listening}");
    workspace_tests::process::wait_until(LIMIT, "b up at a over TLS", || {
        let out = cli_tls(&cluster, &["status", "--cluster", &at], Some(&client))?;
        if out.contains("b@127.0.0.1") && out.contains("2 nodes (2 up)") {
            Ok(())
        } else {
            Err(out)
        }
    });
    // A job over TLS, of enough draws (4 x 1100) to follow through a link.
    let model = NormalMean::new(20);
    let path = model.write(cluster.config_home(), "normal.json");
    let sampled = cli_tls(
        &cluster,
        &[
            "sample",
            "--cluster",
            &at,
            &path,
            "--chains",
            "4",
            "--warmup",
            "200",
            "--draws",
            "1100",
        ],
        Some(&client),
    )
    .unwrap();
    assert!(sampled.contains("chains by node"), "{sampled}");
    // The job's events came through its link, over TLS too.
    assert!(
        sampled.contains("through the job link, 0 through the session"),
        "{sampled}"
    );
    // The cookie is still checked inside TLS.
    let refused = cli_tls(
        &cluster,
        &["join", "--cookie", "WRONGCOOKIE", &at],
        Some(&client),
    )
    .unwrap_err();
    assert!(
        refused.contains("authentication failed (cookie mismatch?)"),
        "{refused}"
    );
    drop(b);
}

#[test]
fn tls_and_plaintext_peers_are_refused_saying_which() {
    let cluster = Cluster::new("tls-mismatch");
    let (node, client) = tls_init(&cluster, "pki");
    let secure = tls_node(&cluster, "s", &[], &node);
    let plain = cluster.node("p", &[]);
    // A plaintext client of a TLS node.
    let refused = cli_tls(
        &cluster,
        &["status", "--cluster", &secure.address.to_string()],
        None,
    )
    .unwrap_err();
    assert!(refused.contains("requires TLS"), "{refused}");
    assert!(refused.contains("--tls-cert"), "{refused}");
    secure
        .process
        .wait_for_line("a plaintext connection from 127.0.0.1:", LIMIT)
        .unwrap();
    // A plaintext node joining a TLS node: its log says so.
    let joiner = cluster.node("q", &[&secure]);
    joiner
        .process
        .wait_for_line(&format!("cannot join {}: node at", secure.address), LIMIT)
        .and_then(|line| line.contains("requires TLS").then_some(()).ok_or(line))
        .unwrap();
    // A TLS client of a plaintext node.
    let refused = cli_tls(
        &cluster,
        &["status", "--cluster", &plain.address.to_string()],
        Some(&client),
    )
    .unwrap_err();
    assert!(refused.contains("does not speak TLS"), "{refused}");
    plain
        .process
        .wait_for_line("this node runs without TLS", LIMIT)
        .unwrap();
    // Half the flags.
    let half = cluster.cli(&[
        "status",
        "--cluster",
        &plain.address.to_string(),
        "--tls-cert",
        &client.cert.display().to_string(),
    ]);
    assert_eq!(
        half.stderr.trim(),
        "error: --tls-cert, --tls-key and --tls-ca go together: --tls-key and --tls-ca missing"
    );
}

#[test]
fn tls_certificates_of_another_ca_or_expired_are_refused_saying_which() {
    let cluster = Cluster::new("tls-certificates");
    let ca = TestCa::new(&cluster.config_home().join("ca"));
    let other = TestCa::new(&cluster.config_home().join("other"));
    let a = tls_node(&cluster, "a", &[], &ca.identity("node", false));
    let at = a.address.to_string();
    let status = |id: &Identity| cli_tls(&cluster, &["status", "--cluster", &at], Some(id));
    assert!(status(&ca.identity("client", false)).is_ok());

    // Another cluster's client: it does not trust the node, nor the node it.
    let stranger = other.identity("client", false);
    let refused = status(&stranger).unwrap_err();
    assert!(
        refused.contains("its certificate is not signed by our CA"),
        "{refused}"
    );
    // Another CA's certificate, trusting ours: the node refuses it.
    let mixed = Identity {
        ca: ca.ca.clone(),
        ..stranger
    };
    let refused = status(&mixed).unwrap_err();
    assert!(
        refused.contains("it refused our certificate, which its CA did not sign"),
        "{refused}"
    );
    a.process
        .wait_for_line("its certificate is not signed by this node's CA", LIMIT)
        .unwrap();

    // An expired client certificate.
    let refused = status(&ca.identity("expired-client", true)).unwrap_err();
    assert!(
        refused.contains("it refused our certificate, which has expired"),
        "{refused}"
    );
    a.process
        .wait_for_line("its certificate has expired", LIMIT)
        .unwrap();

    // A node whose own certificate expired.
    let old = tls_node(&cluster, "old", &[], &ca.identity("expired-node", true));
    let refused = cli_tls(
        &cluster,
        &["status", "--cluster", &old.address.to_string()],
        Some(&ca.identity("client2", false)),
    )
    .unwrap_err();
    assert!(refused.contains("its certificate has expired"), "{refused}");
}
