//! `cluster-cli join`: connect to a node and print its cluster, or, with `--node`, make a
//! running node join another one.
//!
//! Without `--node` this checks a join: the cookie is accepted and the node answers (exit 0),
//! or it says why not (exit 1: "authentication failed (cookie mismatch?)", or a network error
//! naming the address). The command itself never becomes a member (it is a hidden client).
//! To add a new node to a cluster, start it with `node --join PEER`; to connect two running
//! nodes (or clusters), use `join --node LOCAL PEER`.

use runtime::{ClientSettings, ClusterClient};

use super::cluster::{TlsOptions, block_on, members_table, resolve};
use crate::cookie::{CookieArgs, Missing};

/// Arguments of `join`.
#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    /// The node to join, HOST:PORT.
    #[arg(value_name = "PEER")]
    peer: String,
    /// Make the running node at this address join PEER (it keeps PEER in its cluster).
    #[arg(long, value_name = "HOST:PORT")]
    node: Option<String>,
    #[command(flatten)]
    cookie: CookieArgs,
    #[command(flatten)]
    tls: TlsOptions,
}

pub fn run(args: JoinArgs) -> anyhow::Result<()> {
    crate::logging::init(crate::logging::CLIENT_DEFAULT);
    let peer = resolve(&args.peer)?;
    let local = args.node.as_deref().map(resolve).transpose()?;
    let mut settings = ClientSettings::new(args.cookie.resolve(Missing::Fail)?);
    settings.tls = args.tls.identity()?;
    block_on(async move {
        let mut client = ClusterClient::connect(local.unwrap_or(peer), settings).await?;
        let result = async {
            if local.is_some() {
                let joined = client.join(peer).await?;
                outln!(
                    "node {} joined {} at {}",
                    client.peer(),
                    joined.name,
                    joined.address
                );
            } else {
                outln!("connected to {} at {peer}: cookie accepted", client.peer());
            }
            let members = client.members().await?;
            out!("{}", members_table(&members));
            Ok::<_, anyhow::Error>(())
        }
        .await;
        client.close().await;
        result
    })?
}
