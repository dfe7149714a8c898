//! `cluster-cli`: the only binary. It alone reads arguments, environment and files; everything
//! else lives in the libraries.

mod cli;
mod cookie;
mod logging;
mod progress;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // A bad model file, or a request over a limit, is the user's input: exit code 2,
            // like a usage error.
            let code = if err.downcast_ref::<cli::BadInput>().is_some()
                || err.downcast_ref::<runtime::LimitExceeded>().is_some()
            {
                2
            } else {
                1
            };
            eprintln!("error: {err:#}");
            ExitCode::from(code)
        }
    }
}
