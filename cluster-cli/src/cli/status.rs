//! `cluster-cli status`: the nodes of a cluster as one of its nodes sees them, with their
//! state, CPU slots, GPUs and running jobs.

use runtime::{ClientSettings, ClusterClient};

use super::cluster::{TlsOptions, block_on, members_table, resolve};
use crate::cookie::{CookieArgs, Missing};

/// Arguments of `status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// A node of the cluster, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:4370")]
    cluster: String,
    #[command(flatten)]
    cookie: CookieArgs,
    #[command(flatten)]
    tls: TlsOptions,
}

pub fn run(args: StatusArgs) -> anyhow::Result<()> {
    crate::logging::init(crate::logging::CLIENT_DEFAULT);
    let address = resolve(&args.cluster)?;
    let mut settings = ClientSettings::new(args.cookie.resolve(Missing::Fail)?);
    settings.tls = args.tls.identity()?;
    block_on(async move {
        let mut client = ClusterClient::connect(address, settings).await?;
        let members = client.members().await;
        client.close().await;
        out!("{}", members_table(&members?));
        Ok::<_, anyhow::Error>(())
    })?
}
