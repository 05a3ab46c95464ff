//! The `ruleplane` binary: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;
use ruleplane::cli::{Cli, Command};
use ruleplane::{diff, logging, offline, run};

/// The manager allocates and frees small objects at a high rate (decoded watch events, per-node decision
/// results, rendered children); mimalloc's thread-local free lists do that with far less CPU than glibc's malloc
/// (docs/benchmarks.md, History).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        Command::Simulate(args) => offline::simulate(&args),
        Command::ConvertSchedulerConfig(args) => offline::convert_scheduler_config(&args),
        Command::Test(args) => offline::test(&args),
        Command::Diff(args) => diff::main(args),
        Command::Completion(args) => offline::completion(&args),
        Command::Version(args) => offline::version(&args),
    }
}
