//! The program's command line as a whole: its subcommands ([`Command`]), the examples and exit
//! statuses its `--help` ends with, and the man page and shell completions generated from the
//! same definitions (`ringslot man`, `ringslot completions SHELL`; `make dist` writes both).

use super::{apply, members, predict, status};
use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use std::io::Write;

/// What `ringslot --help` ends with: the three common jobs, and the exit statuses.
const AFTER_HELP: &str = "\
Examples:
  How the cluster stands (reads only; the verdict names the next command):
    ringslot status --url redis://10.0.0.1:7000
  What a rebalance by bytes would move, beside redis-cli's (reads only), saved as a plan:
    ringslot predict --url redis://10.0.0.1:7000 --rebalance --by bytes --json > plan.json
  Carry the plan out: first the commands it would send, then for real (asks for yes):
    ringslot apply plan.json --url redis://10.0.0.1:7000 --dry-run
    ringslot apply plan.json --url redis://10.0.0.1:7000

Exit status:
  0    done
  1    an error (a node unreachable or answering an error, a file unreadable, a value the
       tool refuses such as --parallel 0): the text says which
  2    a usage error (an unknown option, a missing argument)
  3    refused, or stopped between steps, by a safety rule (an unhealthy cluster, a plan
       that no longer fits it, a node's maxmemory, a copy that differs, a missing
       permission, no confirmation): nothing unsafe was done; fix what it names and run again
  130  Ctrl-C (apply: the slot under way is finished and closed first)
  86   only under the test hook RINGSLOT_APPLY_EXIT_AFTER_WRITES (tests of a killed apply)";

/// What each subcommand's `--help` ends with: the exit statuses, in short.
const EXIT_STATUSES: &str = "\
Exit status: 0 done; 1 an error, or a value the tool refuses; 2 a usage error; 3 refused, or
stopped between steps, by a safety rule (nothing unsafe was done: fix what it names and run
again); 130 Ctrl-C. `ringslot --help` has examples.";

/// `ringslot`, the operator's tool.
#[derive(Parser)]
#[command(
    name = "ringslot",
    version,
    about = "How a live Redis Cluster stands, what a change of masters costs it, and a plan \
             carried out; what a change of nodes costs a memcached fleet",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// How the live cluster stands, read cheaply; a verdict names the next command.
    ///
    /// Per master its slots, keys, bytes (sampled, with their error), memory against
    /// maxmemory, replicas and open slots; the balance by slots, keys and bytes; the biggest
    /// slots and the big keys met. Reads only.
    #[command(after_help = EXIT_STATUSES)]
    Status(status::StatusArgs),
    /// What a change of masters costs the live cluster (reads only), and a plan by weight.
    ///
    /// Masters joining (--add), leaving (--del), or the rebalance pending after `redis-cli
    /// --cluster add-node` (--rebalance): what redis-cli's rebalance moves, and with --by a
    /// plan that evens bytes (or memory, keys, load) instead, for `apply`.
    #[command(after_help = EXIT_STATUSES)]
    Predict(predict::PredictArgs),
    /// Carries out a plan by weight on the cluster: the one command that writes.
    ///
    /// The plan is `ringslot predict ... --by bytes --json > plan.json`. Each slot is moved as
    /// redis-cli moves one (SETSLOT IMPORTING and MIGRATING, MIGRATE in batches, SETSLOT NODE
    /// everywhere), or with --atomic by Valkey 9's atomic slot migration; --parallel N moves
    /// between disjoint pairs of masters at once. Asks for a confirmation unless --yes;
    /// --dry-run prints the commands instead. Interrupted, it goes on when run again with the
    /// same plan.
    #[command(after_help = EXIT_STATUSES)]
    Apply(apply::ApplyArgs),
    /// What a change of nodes costs a memcached fleet's keys.
    ///
    /// The keys are read from a file (one key per line, or `lru_crawler metadump` lines) or a
    /// live memcached, weighed by their sizes.
    #[command(after_help = EXIT_STATUSES)]
    Members(members::MembersArgs),
    /// Prints the man page (roff), or writes every page into a directory.
    ///
    /// `ringslot man > ringslot.1; man ./ringslot.1`; `ringslot man --dir DIR` writes
    /// ringslot.1 and a page per subcommand, ringslot-status.1, ringslot-predict.1 ... (a man1
    /// directory).
    Man {
        /// Write every page (the program's, and one per subcommand) into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
    /// Prints a shell's completions.
    ///
    /// bash: save as `ringslot` under /etc/bash_completion.d; zsh: as `_ringslot` in a
    /// directory of $fpath; fish: as ~/.config/fish/completions/ringslot.fish.
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// A shell whose completions `ringslot completions` prints.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Runs the subcommand `cli` names.
pub fn run(cli: &Cli) -> Result<()> {
    match &cli.command {
        Command::Status(a) => status::run(a),
        Command::Predict(a) => predict::run(a),
        Command::Apply(a) => apply::run(a),
        Command::Members(a) => members::run(a),
        Command::Man { dir: Some(dir) } => {
            std::fs::create_dir_all(dir)?;
            clap_mangen::generate_to(Cli::command(), dir)?;
            Ok(())
        }
        Command::Man { dir: None } => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut out)?;
            std::io::stdout().write_all(&out)?;
            Ok(())
        }
        Command::Completions { shell } => {
            let shell = match shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "ringslot",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent_and_its_help_ends_with_examples_and_exit_statuses() {
        Cli::command().debug_assert();
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("ringslot status --url"), "{help}");
        assert!(help.contains("3    refused"), "{help}");
    }

    #[test]
    fn the_man_pages_and_completions_name_every_subcommand() {
        let dir = std::env::temp_dir().join(format!("ringslot-man-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        clap_mangen::generate_to(Cli::command(), &dir).unwrap();
        let page = std::fs::read_to_string(dir.join("ringslot.1")).unwrap();
        for sub in ["status", "predict", "apply", "members"] {
            assert!(page.contains(sub), "{sub} in ringslot.1");
            let own = std::fs::read_to_string(dir.join(format!("ringslot-{sub}.1"))).unwrap();
            assert!(
                own.contains("\\-\\-url") || sub == "members",
                "{sub}: {own}"
            );
        }
        assert!(page.contains("Exit status:"), "{page}");
        std::fs::remove_dir_all(&dir).unwrap();
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "ringslot", &mut out);
            let text = String::from_utf8(out).unwrap();
            assert!(
                text.contains("bytes-sample") && text.contains("max-latency"),
                "{shell}"
            );
        }
    }
}
