//! The report of a prediction, for people: named sections ([`Report`]) that [`report`] fills
//! and [`Report::markdown`] puts in order: the plan with the keys and bytes of each move, each
//! scheme's moves, the masters before and after, a plan by weight beside redis-cli's, what to
//! run, the duration and memory of each migration method, and the time of each step; and the
//! tables as CSV (plan.rs: the plan and its tables; by_weight.rs: the plan by weight beside
//! redis-cli's; methods.rs: duration and memory per method). A caller may widen the tables and add sections of its own (the benchmark
//! program sets what a real change measured beside the prediction).

mod by_weight;
mod limits;
mod methods;
mod plan;
mod risks;

use super::change::MasterChange;
use super::method::Method;
use super::options::Options;
use super::prediction::Prediction;
use crate::output::{self, fixed, Table};
use anyhow::Result;
use by_weight::by_weight_section;
use limits::{big_keys_section, capacity_section};
use methods::{duration_text, methods_section};
use plan::{
    head, masters_table, moves_table, notes_section, scheme_check, schemes_table, what_to_run,
};
use std::path::Path;

/// `moved / keys`, 0 for no keys.
pub fn fraction(moved: u64, keys: u64) -> f64 {
    if keys == 0 {
        0.0
    } else {
        moved as f64 / keys as f64
    }
}

/// Bytes as a report shows them: `12.3 MiB`.
pub fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// A prediction's report, section by section, in the order [`Report::markdown`] prints them.
pub struct Report {
    /// The title, how the prediction ran (with what it did to each master) and what the plan
    /// moves: everything above the moves' table.
    pub head: String,
    /// The plan, move by move (`<name>-moves.csv`).
    pub moves: Table,
    /// Each scheme's moved keys (`<name>.csv`), slots first, then the rings, then modulo.
    pub schemes: Table,
    /// The slot scheme counted key by key, against the keys counted in the moved slots.
    pub scheme_check: String,
    /// Each master before and after (`<name>-masters.csv`).
    pub masters: Table,
    /// "A plan by ..., beside redis-cli's" (`--by`).
    pub by_weight: Option<String>,
    /// "Memory against each node's limit" and "Big keys".
    pub capacity: Option<String>,
    pub big_keys: Option<String>,
    /// "Not measured, and what the run did".
    pub notes: Option<String>,
    /// "What to run": the commands that carry the plan out.
    pub what_to_run: Option<String>,
    /// Sections a caller sets beside the prediction (each starting with a blank line and its
    /// heading).
    pub beside: Vec<String>,
    /// The rings' moved bytes, as estimated.
    pub rings_note: String,
    /// "Duration": the per-key estimate and what it is made of.
    pub duration: String,
    /// "How the slots move": each method's duration and memory.
    pub methods: MethodsSection,
    /// Sections a caller adds before the time (each starting with a blank line and its
    /// heading).
    pub after: Vec<String>,
    /// The time of each step.
    pub times: Table,
}

/// "How the slots move: duration and memory".
pub struct MethodsSection {
    /// What the servers offer, and any master whose memory could not be read.
    pub intro: String,
    /// One part per method.
    pub parts: Vec<MethodPart>,
    /// What the figures leave out (two methods).
    pub outro: String,
}

/// One method's part of [`MethodsSection`].
pub struct MethodPart {
    /// The method.
    pub method: Method,
    /// Its heading and estimated duration.
    pub heading: String,
    /// Each master's memory (its first cell the master's address).
    pub memory: Table,
    /// Text a caller adds under the table.
    pub after: String,
}

impl Report {
    /// The whole report in Markdown.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "{}\n\n{}\n## Moves per scheme\n\n{}\n{}\n## Masters (slot scheme)\n\n{}",
            self.head,
            self.moves.markdown(),
            self.schemes.markdown(),
            self.scheme_check,
            self.masters.markdown()
        );
        for part in [
            &self.by_weight,
            &self.capacity,
            &self.big_keys,
            &self.notes,
            &self.what_to_run,
        ]
        .into_iter()
        .flatten()
        {
            md.push_str(part);
        }
        for part in &self.beside {
            md.push_str(part);
        }
        md.push_str(&self.rings_note);
        md.push_str(&self.duration);
        md.push_str(&self.methods.markdown());
        for part in &self.after {
            md.push_str(part);
        }
        md.push_str(&format!("\n## Time\n\n{}", self.times.markdown()));
        md
    }

    /// Writes `dir/name.md`, `dir/name.csv` (the schemes), `dir/name-moves.csv` and
    /// `dir/name-masters.csv`.
    pub fn write(&self, dir: &Path, name: &str) -> Result<()> {
        output::write(dir, &format!("{name}.md"), &self.markdown())?;
        output::write(dir, &format!("{name}.csv"), &self.schemes.csv())?;
        output::write(dir, &format!("{name}-moves.csv"), &self.moves.csv())?;
        output::write(dir, &format!("{name}-masters.csv"), &self.masters.csv())?;
        Ok(())
    }
}

impl MethodsSection {
    /// The section in Markdown.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "\n## How the slots move: duration and memory\n\n{}",
            self.intro
        );
        for part in &self.parts {
            md.push_str(&part.heading);
            md.push_str(&part.memory.markdown());
            md.push_str(&part.after);
        }
        md.push_str(&self.outro);
        md
    }
}

/// The report of the prediction `p` of `change`, run with `opts`.
pub fn report(p: &Prediction, change: &MasterChange, opts: &Options) -> Report {
    Report {
        head: head(p, change, opts),
        moves: moves_table(p),
        schemes: schemes_table(p),
        scheme_check: scheme_check(p),
        masters: masters_table(p),
        by_weight: p.by_weight.as_ref().map(by_weight_section),
        capacity: capacity_section(p),
        big_keys: big_keys_section(p),
        notes: notes_section(p),
        what_to_run: what_to_run(p),
        beside: Vec::new(),
        rings_note: format!(
            "\nThe rings' moved bytes are their moved keys at the mean size of the keys \
             measured ({:.0} bytes): they move other keys than the slot plan.\n",
            p.mean_bytes
        ),
        duration: format!("\n## Duration\n\n{}\n", duration_text(p)),
        methods: methods_section(p),
        after: Vec::new(),
        times: times_table(p),
    }
}

/// The time of each step, and of the whole prediction.
fn times_table(p: &Prediction) -> Table {
    let mut times = Table::new(&["step", "seconds"]);
    for (step, secs) in &p.steps {
        times.push(vec![format!("- {step}"), fixed(*secs, 2)]);
    }
    times.push(vec!["prediction".into(), fixed(p.seconds, 2)]);
    times
}
