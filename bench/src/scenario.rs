//! Migration scenarios: the starting nodes and the changes made to them one at a time, from
//! command-line flags or from a scenario file.
//!
//! Scenario file format: one change a line, `#` starts a comment, blank lines are ignored.
//! A NODE is a node name, or a plain number `i` standing for the name template (`--names`,
//! default `10.0.0.{}:6379`) with `{}` replaced by `i`.
//!
//! ```text
//! start 4            # the ring starts with nodes 1..4 (or: start NODE NODE ...)
//! add NODE [WEIGHT]  # a node joins (weight 1 by default)
//! del NODE           # a node leaves (is lost)
//! weight NODE W      # a node's weight becomes W
//! grow N             # add nodes max+1, max+2, ... one at a time until there are N
//! shrink N           # remove the most recently added nodes one at a time until N remain
//! ```

use anyhow::{anyhow, bail, Context, Result};

/// One change of the node set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A node joins with this weight.
    Add { node: String, weight: u32 },
    /// A node leaves.
    Del { node: String },
    /// A node's weight changes.
    Weight { node: String, weight: u32 },
}

impl Step {
    /// A short description for tables and charts, e.g. `add 10.0.0.5:6379`.
    pub fn describe(&self) -> String {
        match self {
            Step::Add { node, weight: 1 } => format!("add {node}"),
            Step::Add { node, weight } => format!("add {node} w={weight}"),
            Step::Del { node } => format!("del {node}"),
            Step::Weight { node, weight } => format!("weight {node} {weight}"),
        }
    }
}

/// The starting nodes (all of weight 1) and the changes, already checked against each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    pub start: Vec<String>,
    pub steps: Vec<Step>,
}

/// Builds a scenario while tracking the current nodes, so that every change is valid.
struct Builder<'a> {
    template: &'a str,
    start: Vec<String>,
    current: Vec<String>,
    next_index: usize,
    steps: Vec<Step>,
}

impl<'a> Builder<'a> {
    fn new(template: &'a str) -> Builder<'a> {
        Builder {
            template,
            start: Vec::new(),
            current: Vec::new(),
            next_index: 1,
            steps: Vec::new(),
        }
    }

    fn name(&mut self, token: &str) -> String {
        match token.parse::<usize>() {
            Ok(i) => {
                self.next_index = self.next_index.max(i + 1);
                node_name(self.template, i)
            }
            Err(_) => token.to_string(),
        }
    }

    fn start(&mut self, nodes: Vec<String>) -> Result<()> {
        if !self.start.is_empty() || !self.steps.is_empty() {
            bail!("`start` must come first, once");
        }
        for n in &nodes {
            if self.current.contains(n) {
                bail!("node {n} is named twice in `start`");
            }
            self.current.push(n.clone());
        }
        self.start = nodes;
        Ok(())
    }

    fn start_count(&mut self, n: usize) -> Result<()> {
        let nodes = (1..=n).map(|i| self.name(&i.to_string())).collect();
        self.start(nodes)
    }

    fn add(&mut self, node: String, weight: u32) -> Result<()> {
        if weight == 0 {
            bail!("weight of {node} must be >= 1");
        }
        if self.current.contains(&node) {
            bail!("cannot add {node}: it is already in the ring");
        }
        self.current.push(node.clone());
        self.steps.push(Step::Add { node, weight });
        Ok(())
    }

    fn del(&mut self, node: String) -> Result<()> {
        let Some(i) = self.current.iter().position(|n| *n == node) else {
            bail!("cannot remove {node}: it is not in the ring");
        };
        if self.current.len() == 1 {
            bail!("cannot remove {node}: it is the last node");
        }
        self.current.remove(i);
        self.steps.push(Step::Del { node });
        Ok(())
    }

    fn weight(&mut self, node: String, weight: u32) -> Result<()> {
        if weight == 0 {
            bail!("weight of {node} must be >= 1");
        }
        if !self.current.contains(&node) {
            bail!("cannot re-weight {node}: it is not in the ring");
        }
        self.steps.push(Step::Weight { node, weight });
        Ok(())
    }

    fn grow(&mut self, to: usize) -> Result<()> {
        while self.current.len() < to {
            let node = self.name(&self.next_index.to_string());
            self.add(node, 1)?;
        }
        Ok(())
    }

    fn shrink(&mut self, to: usize) -> Result<()> {
        if to == 0 {
            bail!("cannot shrink to 0 nodes");
        }
        while self.current.len() > to {
            let node = self.current.last().cloned().expect("non-empty");
            self.del(node)?;
        }
        Ok(())
    }

    fn finish(self) -> Result<Scenario> {
        if self.start.is_empty() {
            bail!("the scenario has no starting nodes");
        }
        if self.steps.is_empty() {
            bail!("the scenario has no changes");
        }
        Ok(Scenario {
            start: self.start,
            steps: self.steps,
        })
    }
}

/// The name of node `i` under `template` (`{}` replaced by `i`; appended when absent).
pub fn node_name(template: &str, i: usize) -> String {
    if template.contains("{}") {
        template.replace("{}", &i.to_string())
    } else {
        format!("{template}{i}")
    }
}

/// Parses `A..B` (or `A-B`) into `(A, B)`.
pub fn parse_range(s: &str) -> Result<(usize, usize)> {
    let (a, b) = s
        .split_once("..")
        .or_else(|| s.split_once('-'))
        .ok_or_else(|| anyhow!("expected FROM..TO, got `{s}`"))?;
    let a = a
        .trim()
        .parse()
        .with_context(|| format!("bad number in `{s}`"))?;
    let b = b
        .trim()
        .parse()
        .with_context(|| format!("bad number in `{s}`"))?;
    Ok((a, b))
}

/// Parses `NODE=W`.
pub fn parse_reweight(s: &str) -> Result<(String, u32)> {
    let (node, w) = s
        .rsplit_once('=')
        .ok_or_else(|| anyhow!("expected NODE=WEIGHT, got `{s}`"))?;
    Ok((
        node.to_string(),
        w.parse().with_context(|| format!("bad weight in `{s}`"))?,
    ))
}

/// The scenario given by flags, applied in this order: start (`grow`'s or `shrink`'s first
/// number, else `start`), grow, each re-weight, each lost node, shrink.
pub fn from_flags(
    template: &str,
    start: usize,
    grow: Option<(usize, usize)>,
    shrink: Option<(usize, usize)>,
    reweight: &[(String, u32)],
    lose: &[String],
) -> Result<Scenario> {
    let mut b = Builder::new(template);
    let first = grow.map(|g| g.0).or(shrink.map(|s| s.0)).unwrap_or(start);
    if first == 0 {
        bail!("the ring must start with at least one node");
    }
    b.start_count(first)?;
    if let Some((from, to)) = grow {
        if to <= from {
            bail!("--grow {from}..{to}: TO must be larger than FROM");
        }
        b.grow(to)?;
    }
    for (node, w) in reweight {
        let node = b.name(node);
        b.weight(node, *w)?;
    }
    for node in lose {
        let node = b.name(node);
        b.del(node)?;
    }
    if let Some((from, to)) = shrink {
        if to >= from {
            bail!("--shrink {from}..{to}: TO must be smaller than FROM");
        }
        b.shrink(to)?;
    }
    b.finish()
}

/// Parses a scenario file's text (format in the module docs). Errors name the line.
pub fn parse(text: &str, template: &str) -> Result<Scenario> {
    let mut b = Builder::new(template);
    for (no, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let result = (|| -> Result<()> {
            match (words[0].to_ascii_lowercase().as_str(), &words[1..]) {
                ("start", [n]) if n.parse::<usize>().is_ok() => b.start_count(n.parse()?),
                ("start", nodes) if !nodes.is_empty() => {
                    let nodes = nodes.iter().map(|n| b.name(n)).collect();
                    b.start(nodes)
                }
                ("add", [node]) => {
                    let node = b.name(node);
                    b.add(node, 1)
                }
                ("add", [node, w]) => {
                    let node = b.name(node);
                    b.add(node, w.parse().context("bad weight")?)
                }
                ("del", [node]) => {
                    let node = b.name(node);
                    b.del(node)
                }
                ("weight", [node, w]) => {
                    let node = b.name(node);
                    b.weight(node, w.parse().context("bad weight")?)
                }
                ("grow", [n]) => b.grow(n.parse().context("bad node count")?),
                ("shrink", [n]) => b.shrink(n.parse().context("bad node count")?),
                _ => bail!(
                    "expected `start N|NODE..`, `add NODE [W]`, `del NODE`, `weight NODE W`, \
                     `grow N` or `shrink N`"
                ),
            }
        })();
        result.with_context(|| format!("scenario line {}: `{}`", no + 1, raw.trim()))?;
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grow_flags_add_one_node_at_a_time() {
        let s = from_flags("n{}", 4, Some((4, 6)), None, &[], &[]).unwrap();
        assert_eq!(s.start, ["n1", "n2", "n3", "n4"]);
        assert_eq!(
            s.steps,
            [
                Step::Add {
                    node: "n5".into(),
                    weight: 1
                },
                Step::Add {
                    node: "n6".into(),
                    weight: 1
                }
            ]
        );
    }

    #[test]
    fn file_lines_expand_numbers_and_check_nodes() {
        let text = "start 3 # three\n\nweight 1 3\nadd 9 2\ngrow 5\ndel n2\nshrink 3\n";
        let s = parse(text, "n{}").unwrap();
        assert_eq!(s.start, ["n1", "n2", "n3"]);
        let described: Vec<String> = s.steps.iter().map(Step::describe).collect();
        assert_eq!(
            described,
            ["weight n1 3", "add n9 w=2", "add n10", "del n2", "del n10"]
        );
        let err = parse("start 2\ndel 7\n", "n{}").unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
    }
}
