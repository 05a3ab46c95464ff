//! The `ruleplane` binary: CLI entry point, wiring of the manager and the offline commands.

mod cli;
mod health;
mod http;
mod kube_client;
mod leader;
mod logging;
mod metrics;
mod offline;
mod permissions;
mod rules_watch;
mod run;
mod supervisor;
mod watch_hub;
mod workers;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap uses 0 for --help/--version and 2 for usage errors, which is our contract too.
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    logging::init(cli.log_format);
    match cli.command {
        Command::Run(args) => run::main(*args),
        Command::Validate(args) => offline::validate(&args),
        Command::Render(args) => offline::render(&args),
        Command::Crds(args) => offline::crds(&args),
        Command::Schema => offline::schema(),
        Command::Rbac(args) => offline::rbac(&args),
    }
}
