//! `cluster-cli`: the only binary. It alone reads arguments, environment and files; everything
//! else lives in the libraries.

// First: its printing macros are used everywhere below.
#[macro_use]
mod output;

mod cli;
mod cookie;
mod logging;
mod progress;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    // A reader of stdout that went away is no error; a write that failed otherwise is.
    let result = cli::run(args).and_then(|()| match output::failure() {
        Some(error) => Err(anyhow::anyhow!("cannot write to stdout: {error}")),
        None => Ok(()),
    });
    match result {
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
            // A rendered Stan error says `file:line:column: error:` itself.
            if let Some(cli::BadInput::Rendered(text)) = err.downcast_ref::<cli::BadInput>() {
                errln!("{text}");
            } else {
                errln!("error: {err:#}");
            }
            ExitCode::from(code)
        }
    }
}
