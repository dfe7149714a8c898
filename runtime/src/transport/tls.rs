//! TLS between nodes and clients: a [`TlsIdentity`] (this process's certificate and key, and
//! the cluster's CA) built from PEM bytes into rustls configurations for both directions,
//! with mutual authentication: a node requires a client certificate signed by the CA, a
//! dialler checks the node's certificate against the CA and the address it dialled. What
//! goes wrong in a handshake is sorted into the cases a user can act on ([`TlsProblem`]).
//!
//! The cookie handshake still runs inside TLS: a certificate admits a peer to the handshake,
//! the cookie to the cluster.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use tokio_rustls::rustls::{
    self, AlertDescription, CertificateError, ClientConfig, RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject},
    server::WebPkiClientVerifier,
};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::log::peer_text;

/// This process's TLS identity: its certificate chain and key, and the CA that signs every
/// certificate of the cluster. Cheap to clone; its `Debug` shows no key.
#[derive(Clone)]
pub struct TlsIdentity {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

/// PEM that does not make a TLS identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// No certificate in the certificate file (or the CA file).
    #[error("no PEM certificate in the {what}")]
    NoCertificate {
        /// Which input: "certificate" or "CA certificate".
        what: &'static str,
    },
    /// A PEM section that does not parse.
    #[error("cannot read the {what}: {reason}")]
    BadPem {
        /// Which input.
        what: &'static str,
        /// The parser's error.
        reason: String,
    },
    /// rustls refused the combination (a key that does not match the certificate, a CA
    /// certificate it cannot use).
    #[error("unusable TLS identity: {reason}")]
    Config {
        /// rustls's error.
        reason: String,
    },
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsIdentity { .. }")
    }
}

impl TlsIdentity {
    /// Builds the identity from PEM: `chain`, this process's certificate (then any
    /// intermediates); `key`, its private key (PKCS#8, PKCS#1 or SEC1); `ca`, the CA
    /// certificate(s) every peer's certificate must chain to.
    pub fn from_pem(chain: &[u8], key: &[u8], ca: &[u8]) -> Result<Self, TlsError> {
        let chain = certificates(chain, "certificate")?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|error| TlsError::BadPem {
            what: "private key",
            reason: error.to_string(),
        })?;
        let mut roots = RootCertStore::empty();
        for ca in certificates(ca, "CA certificate")? {
            roots.add(ca).map_err(config_error)?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|error| TlsError::Config {
                    reason: error.to_string(),
                })?;
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(config_error)?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(config_error)?;
        Ok(Self {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(&self.server))
    }

    pub(crate) fn connector(&self) -> TlsConnector {
        TlsConnector::from(Arc::clone(&self.client))
    }
}

/// The name a dialler checks the node's certificate against: the IP address it dialled.
pub(crate) fn server_name(ip: IpAddr) -> ServerName<'static> {
    ServerName::IpAddress(ip.into())
}

fn certificates(pem: &[u8], what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::BadPem {
            what,
            reason: error.to_string(),
        })?;
    if certificates.is_empty() {
        return Err(TlsError::NoCertificate { what });
    }
    Ok(certificates)
}

fn config_error(error: impl fmt::Display) -> TlsError {
    TlsError::Config {
        reason: error.to_string(),
    }
}

/// What went wrong in a TLS handshake, seen from the dialling side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsProblem {
    /// The node's certificate has expired (or is not valid yet).
    NodeCertificateExpired,
    /// The node's certificate is not signed by our CA: it belongs to another cluster.
    NodeCertificateUnknownIssuer,
    /// The node's certificate does not name the address dialled.
    NodeCertificateWrongName,
    /// The node refused our certificate because it has expired (or is not valid yet).
    OurCertificateExpired,
    /// The node refused our certificate because its CA did not sign it.
    OurCertificateUnknownIssuer,
    /// The node refused our certificate for another reason (the TLS alert it sent).
    OurCertificateRefused {
        /// The alert.
        alert: String,
    },
    /// Anything else, as rustls says it.
    Other {
        /// The error.
        reason: String,
    },
}

impl fmt::Display for TlsProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsProblem::NodeCertificateExpired => {
                f.write_str("its certificate has expired (or is not valid yet)")
            }
            TlsProblem::NodeCertificateUnknownIssuer => f.write_str(
                "its certificate is not signed by our CA (--tls-ca): a certificate of another cluster?",
            ),
            TlsProblem::NodeCertificateWrongName => f.write_str(
                "its certificate is not valid for the address dialled (make it with `cluster-cli tls init --host ADDRESS`)",
            ),
            TlsProblem::OurCertificateExpired => f.write_str(
                "it refused our certificate, which has expired (or is not valid yet): renew --tls-cert",
            ),
            TlsProblem::OurCertificateUnknownIssuer => f.write_str(
                "it refused our certificate, which its CA did not sign: a certificate of another cluster?",
            ),
            TlsProblem::OurCertificateRefused { alert } => {
                write!(f, "it refused our certificate (TLS alert {alert})")
            }
            TlsProblem::Other { reason } => f.write_str(reason),
        }
    }
}

/// The rustls error inside an I/O error from tokio-rustls, if there is one.
fn rustls_error(error: &std::io::Error) -> Option<&rustls::Error> {
    error.get_ref()?.downcast_ref::<rustls::Error>()
}

/// Sorts a dialler's TLS failure (from the handshake or the first read after it: with TLS 1.3
/// the node checks our certificate after our side of the handshake is done).
pub(crate) fn classify_dial_error(error: &std::io::Error) -> Option<TlsProblem> {
    let problem = match rustls_error(error)? {
        rustls::Error::InvalidCertificate(certificate) => match certificate {
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => TlsProblem::NodeCertificateExpired,
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                TlsProblem::NodeCertificateUnknownIssuer
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsProblem::NodeCertificateWrongName
            }
            other => TlsProblem::Other {
                reason: format!("the node's certificate is refused: {other}"),
            },
        },
        rustls::Error::AlertReceived(alert) => match alert {
            AlertDescription::CertificateExpired => TlsProblem::OurCertificateExpired,
            AlertDescription::UnknownCA | AlertDescription::DecryptError => {
                TlsProblem::OurCertificateUnknownIssuer
            }
            other => TlsProblem::OurCertificateRefused {
                alert: format!("{other:?}"),
            },
        },
        other => TlsProblem::Other {
            reason: other.to_string(),
        },
    };
    Some(problem)
}

/// What a node logs about a TLS handshake that failed on its side: our own words for the
/// usual cases, else rustls's, escaped and cut (the text may hold what the peer sent).
pub(crate) fn describe_accept_error(error: &std::io::Error) -> String {
    match rustls_error(error) {
        Some(rustls::Error::InvalidCertificate(certificate)) => match certificate {
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => {
                "its certificate has expired (or is not valid yet)".to_owned()
            }
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                "its certificate is not signed by this node's CA (--tls-ca)".to_owned()
            }
            other => format!(
                "its certificate is refused: {}",
                peer_text(other.to_string())
            ),
        },
        Some(rustls::Error::NoCertificatesPresented) => {
            "it sent no client certificate (give it --tls-cert and --tls-key)".to_owned()
        }
        Some(rustls::Error::AlertReceived(alert)) => {
            format!("it refused this node's certificate (TLS alert {alert:?})")
        }
        Some(other) => peer_text(other.to_string()),
        None => peer_text(error.to_string()),
    }
}
