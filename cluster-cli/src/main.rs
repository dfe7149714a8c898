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
            // A bad model file is the user's input: exit code 2, like a usage error.
            let code = if err.downcast_ref::<cli::BadInput>().is_some() {
                2
            } else {
                1
            };
            eprintln!("error: {err:#}");
            ExitCode::from(code)
        }
    }
}
