//! Output: Markdown tables (printed, and written as `.md`), CSV files, and the files a run
//! wrote, written only where the user says (`--out DIR`).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// A table of text cells, printed as Markdown and written as CSV.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// A GitHub-flavoured Markdown table; cells that look numeric are right-aligned.
    pub fn markdown(&self) -> String {
        let numeric: Vec<bool> = (0..self.headers.len())
            .map(|c| {
                !self.rows.is_empty()
                    && self.rows.iter().all(|r| {
                        r.get(c)
                            .is_some_and(|v| v.parse::<f64>().is_ok() || v == "-")
                    })
            })
            .collect();
        let mut out = format!("| {} |\n|", self.headers.join(" | "));
        for n in &numeric {
            out.push_str(if *n { "---:|" } else { "---|" });
        }
        out.push('\n');
        for r in &self.rows {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out
    }

    /// RFC 4180 CSV: a header line, then one line per row; fields with `,`, `"` or a line
    /// break are quoted.
    pub fn csv(&self) -> String {
        let line = |cells: &[String]| {
            cells
                .iter()
                .map(|c| {
                    if c.contains([',', '"', '\n', '\r']) {
                        format!("\"{}\"", c.replace('"', "\"\""))
                    } else {
                        c.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut out = line(&self.headers);
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

/// The files written so far (by [`write`] and [`written`]) and not yet announced.
static WRITTEN: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Notes a file written by other means (a chart), for [`announce`].
pub fn written(path: &Path) {
    if let Ok(mut w) = WRITTEN.lock() {
        if !w.iter().any(|p| p == path) {
            w.push(path.to_path_buf());
        }
    }
}

/// Prints on stderr every file written since the last call, by name (`wrote a.md, a.csv`).
pub fn announce() {
    let paths = WRITTEN
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default();
    if !paths.is_empty() {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        eprintln!("wrote {}", names.join(", "));
    }
}

/// Writes `text` to `dir/name`, creating `dir`; returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
    written(&path);
    Ok(path)
}

/// A fixed number with `digits` decimals.
pub fn fixed(x: f64, digits: usize) -> String {
    format!("{x:.digits$}")
}
