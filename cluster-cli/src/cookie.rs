//! Where the cluster cookie comes from: `--cookie`, then the `BAYES_CLUSTER_COOKIE`
//! environment variable, then the cookie file (`--cookie-file`, default
//! `$XDG_CONFIG_HOME/bayes-cluster/cookie` or `~/.config/bayes-cluster/cookie`).
//!
//! `cluster-cli node` creates a missing cookie file with a random cookie and mode 0600 (its
//! directory 0700); `join` and `status` only read it. Like Erlang with `~/.erlang.cookie`,
//! every command refuses a cookie file that group or others may read or write; like
//! OpenSSH's `StrictModes`, it also refuses a cookie file that another user owns, and one in
//! a directory that another user (root aside) owns or that group or others may write to
//! (unless sticky, as `/tmp` is): whoever can change the file or replace it can read the
//! cookie or put in one of their choosing. The cookie is never printed or logged; prefer the
//! file or the environment to `--cookie`, which other users can see in the process list.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use runtime::Cookie;

/// The environment variable holding the cookie.
pub const COOKIE_ENV: &str = "BAYES_CLUSTER_COOKIE";

/// Length of a generated cookie, in characters of `[A-Z0-9]` (about 165 bits).
const GENERATED_LEN: usize = 32;

/// Cookie arguments shared by `node`, `join` and `status`.
#[derive(Debug, Clone, clap::Args)]
pub struct CookieArgs {
    /// The cluster cookie (overrides BAYES_CLUSTER_COOKIE and the cookie file; visible to
    /// other users in the process list).
    #[arg(long, value_name = "COOKIE")]
    cookie: Option<String>,
    /// The cookie file [default: $XDG_CONFIG_HOME/bayes-cluster/cookie, else
    /// ~/.config/bayes-cluster/cookie].
    #[arg(long, value_name = "PATH")]
    cookie_file: Option<PathBuf>,
}

/// Whether a missing cookie file is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    Create,
    Fail,
}

impl CookieArgs {
    /// The cookie, from the first source that has one.
    pub fn resolve(&self, missing: Missing) -> anyhow::Result<Cookie> {
        let from_env = match std::env::var_os(COOKIE_ENV).filter(|v| !v.is_empty()) {
            Some(value) => Some(
                value
                    .into_string()
                    .map_err(|_| anyhow::anyhow!("{COOKIE_ENV} is not valid UTF-8"))?,
            ),
            None => None,
        };
        self.resolve_with(from_env.as_deref(), missing)
    }

    /// [`Self::resolve`] with the environment variable's value given.
    fn resolve_with(&self, from_env: Option<&str>, missing: Missing) -> anyhow::Result<Cookie> {
        if let Some(value) = &self.cookie {
            return Cookie::new(value).context("invalid --cookie");
        }
        if let Some(value) = from_env {
            return Cookie::new(value).with_context(|| format!("invalid {COOKIE_ENV}"));
        }
        let path = match &self.cookie_file {
            Some(path) => path.clone(),
            None => default_path()?,
        };
        match fs::metadata(&path) {
            Ok(_) => read(&path),
            Err(error) if error.kind() == ErrorKind::NotFound => match missing {
                Missing::Create => create(&path),
                Missing::Fail => bail!(
                    "no cookie: pass --cookie, set {COOKIE_ENV}, or start a node once to create {}",
                    path.display()
                ),
            },
            Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
    }
}

fn default_path() -> anyhow::Result<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .context("cannot find the cookie file: neither XDG_CONFIG_HOME nor HOME is set; pass --cookie-file")?;
    Ok(config.join("bayes-cluster").join("cookie"))
}

fn read(path: &Path) -> anyhow::Result<Cookie> {
    let metadata = fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    let uid = effective_uid();
    check_file(path, &metadata, uid)?;
    check_directory(path, uid)?;
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Cookie::new(&text).with_context(|| format!("invalid cookie file {}", path.display()))
}

/// This process's effective user: the one who must own the cookie file.
fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The cookie file is a regular file, owned by `uid`, that nobody else may read or write.
fn check_file(path: &Path, metadata: &fs::Metadata, uid: u32) -> anyhow::Result<()> {
    let shown = path.display();
    if !metadata.is_file() {
        bail!("cookie file {shown} is not a regular file");
    }
    if metadata.uid() != uid {
        bail!(
            "cookie file {shown} is owned by uid {}, not by this user (uid {uid}), who may read and change it: run `chown {uid} {shown} && chmod 600 {shown}` (as its owner or root), or use a cookie file of your own",
            metadata.uid()
        );
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "cookie file {shown} is accessible by group or others (mode {mode:03o}): run `chmod 600 {shown}`"
        );
    }
    Ok(())
}

/// The cookie file's directory belongs to `uid` (or root) and nobody else may put files in
/// it, unless it is sticky (then only a file's owner may replace it).
fn check_directory(path: &Path, uid: u32) -> anyhow::Result<()> {
    let Some(dir) = path.parent() else {
        return Ok(());
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let metadata = fs::metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    check_directory_owner_and_mode(dir, metadata.uid(), metadata.mode(), uid)
}

/// [`check_directory`] on the directory's `owner` and `mode`.
fn check_directory_owner_and_mode(
    dir: &Path,
    owner: u32,
    mode: u32,
    uid: u32,
) -> anyhow::Result<()> {
    let shown = dir.display();
    if owner != uid && owner != 0 {
        bail!(
            "the cookie file's directory {shown} is owned by uid {owner}, not by this user (uid {uid}) or root, who may replace the cookie file: run `chown {uid} {shown}` (as root), or use a cookie file in a directory of your own"
        );
    }
    let sticky = mode & 0o1000 != 0;
    if mode & 0o022 != 0 && !sticky {
        bail!(
            "the cookie file's directory {shown} is writable by group or others (mode {:03o}), who may replace the cookie file: run `chmod go-w {shown}`",
            mode & 0o777
        );
    }
    Ok(())
}

fn create(path: &Path) -> anyhow::Result<Cookie> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // A cookie written where others may replace it would not stay ours.
    check_directory(path, effective_uid())?;
    let value = random_cookie()?;
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match file {
        Ok(mut file) => {
            writeln!(file, "{value}")
                .with_context(|| format!("cannot write {}", path.display()))?;
            tracing::info!("created cookie file {}", path.display());
            Cookie::new(&value).context("generated cookie")
        }
        // Another node created it first: use theirs.
        Err(error) if error.kind() == ErrorKind::AlreadyExists => read(path),
        Err(error) => Err(error).with_context(|| format!("cannot create {}", path.display())),
    }
}

/// `GENERATED_LEN` characters of `[A-Z0-9]` from the kernel's random source.
fn random_cookie() -> anyhow::Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut random = fs::File::open("/dev/urandom").context("cannot open /dev/urandom")?;
    let mut cookie = String::with_capacity(GENERATED_LEN);
    let mut byte = [0u8; 1];
    while cookie.len() < GENERATED_LEN {
        random
            .read_exact(&mut byte)
            .context("cannot read /dev/urandom")?;
        // Rejection sampling keeps every character equally likely (252 = 7 * 36).
        if byte[0] < 252 {
            cookie.push(char::from(ALPHABET[usize::from(byte[0]) % ALPHABET.len()]));
        }
    }
    Ok(cookie)
}

#[cfg(test)]
mod tests;
