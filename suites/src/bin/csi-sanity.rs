//! `csi-sanity`: runs the CSI sanity suite against a CSI endpoint, with csi-sanity's flags
//! (Go-style single-dash spellings such as `-csi.endpoint` are accepted too). The same
//! suite is `conformance sanity`.
//!
//! Exit status: 0 when no case failed, 1 when some did, 2 when the run could not start.
//!
//! Ctrl-C (SIGINT) or SIGTERM stops the run cleanly: the running case is cut short, the
//! volumes, snapshots, stages, publications and directories it created are removed (a call
//! cut off in flight included), the results so far are printed with a line saying so (or
//! what is left), and the exit status is 1. A second signal abandons the cleanup.

use std::process::ExitCode;

use clap::Parser;
use suites::sanity::cli;

/// CSI conformance tests of a CSI plugin (parity with kubernetes-csi's csi-sanity).
#[derive(Debug, Parser)]
#[command(name = "csi-sanity", version)]
struct Command {
    #[command(flatten)]
    args: cli::Args,
}

#[tokio::main]
async fn main() -> ExitCode {
    kube_support::telemetry::init_with_default("warn");
    let command = Command::parse_from(cli::go_style_args(std::env::args()));
    if command.args.list {
        cli::list();
        return ExitCode::SUCCESS;
    }
    match cli::run(command.args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("csi-sanity: {e:#}");
            ExitCode::from(2)
        }
    }
}
