//! Offline commands (validate, render, crds, schema): pure functions of the rule files, no cluster needed.

use std::process::ExitCode;

use crate::cli::{OutputFormat, ValidateArgs};

/// Exit code for invalid input (rules, objects); clap already uses 2 for usage errors.
const INVALID: u8 = 1;

pub fn validate(args: &ValidateArgs) -> ExitCode {
    let result = ruleplane_config::load_paths(&args.paths);
    match args.output {
        OutputFormat::Json => {
            let report = match &result {
                Ok(rules) => serde_json::json!({
                    "valid": true,
                    "rules": rules.rules().iter().map(|r| serde_json::json!({
                        "name": r.name(), "kind": format!("{:?}", r.kind()), "source": r.source().to_string(),
                    })).collect::<Vec<_>>(),
                    "errors": [],
                }),
                Err(d) => serde_json::json!({"valid": false, "rules": [], "errors": d}),
            };
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
        }
        OutputFormat::Text => match &result {
            Ok(rules) => println!("{} rule(s) valid", rules.rules().len()),
            Err(d) => eprintln!("{d}"),
        },
    }
    if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(INVALID)
    }
}
