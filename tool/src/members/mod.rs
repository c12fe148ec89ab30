//! `ringslot members`: what a change of nodes costs keys that are not in Redis: memcached's
//! keys, read from a file (one key per line, or `lru_crawler metadump` lines) or dumped from a
//! live memcached, each weighing its item size in bytes. Evaluated in-process by the engine
//! (`Topology::what_if_weighed`, the code `RING.MOVES ... WEIGH BYTES` runs), on nodes named
//! as the client names them (`host:port` for ketama clients and twemproxy).

pub mod memcached;

use crate::output::{fixed, Table};
use anyhow::{bail, Context, Result};
use memcached::text_command;
use ringslot_engine::{Change, Flavour, Limits, MemberWeight, Scheme, SchemeParams, Topology};
use serde::Serialize;
use std::path::PathBuf;

/// What `ringslot members` evaluates: where the members come from, the nodes now, the change,
/// and the ring.
#[derive(Debug, Clone)]
pub struct Query {
    /// Members from this file: one key per line, or memcached `lru_crawler metadump` lines
    /// (`key=<URI-encoded key> ... size=<bytes>`), told apart line by line; `END` is skipped.
    pub file: Option<PathBuf>,
    /// Members dumped from this memcached (`host:port`) with `lru_crawler metadump hash`.
    pub memcached: Option<String>,
    /// The nodes now, `name[=weight]`, in order.
    pub nodes: Vec<String>,
    /// Nodes that join (or, already there, are re-weighted to `weight`), with their weight.
    pub add: Vec<String>,
    pub weight: Option<i64>,
    /// Nodes that leave.
    pub del: Vec<String>,
    /// The ring's flavour, its points per unit of weight (`None`: the flavour's default) and
    /// whether members hash by their `{hash tag}`.
    pub flavour: Flavour,
    pub vnodes: Option<i64>,
    pub hashtag: bool,
    /// Schemes beyond the ring, the slot table and modulo.
    pub schemes: Vec<Scheme>,
}

/// One member of a dump: its key (decoded) and its item size (0 when the line gave none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The key, URI-decoded.
    pub key: Vec<u8>,
    /// Its item size, bytes (0 when the line gave none).
    pub bytes: u64,
}

/// The member of one line: a `metadump` line (`key=... size=...`, the key URI-decoded) or a
/// plain key; `None` for an empty line and for `END`. Error: a `metadump` line whose size or
/// key encoding is broken.
pub fn parse_line(line: &str) -> Result<Option<Item>> {
    let line = line.trim_end_matches(['\r', '\n']);
    if line.is_empty() || line == "END" {
        return Ok(None);
    }
    let Some(rest) = line.strip_prefix("key=") else {
        return Ok(Some(Item {
            key: line.as_bytes().to_vec(),
            bytes: 0,
        }));
    };
    let mut fields = rest.split(' ');
    let encoded = fields.next().unwrap_or_default();
    let key: Vec<u8> = percent_encoding::percent_decode_str(encoded).collect();
    let mut bytes = None;
    for f in fields {
        if let Some(v) = f.strip_prefix("size=") {
            bytes = Some(
                v.parse::<u64>()
                    .with_context(|| format!("size `{v}` in `{line}`"))?,
            );
        }
    }
    let Some(bytes) = bytes else {
        bail!("a metadump line without size=: `{line}`");
    };
    Ok(Some(Item { key, bytes }))
}

/// Every item of a memcached at `address`, by `lru_crawler metadump hash`. Errors: the
/// connection, or an error answer (a memcached older than 1.6, where `hash` is unknown,
/// answers `CLIENT_ERROR`; a crawler already running answers `BUSY`).
pub fn dump_memcached(address: &str) -> Result<Vec<Item>> {
    let lines = text_command(address, "lru_crawler metadump hash", |l| {
        l == "END"
            || l.starts_with("ERROR")
            || l.starts_with("CLIENT_ERROR")
            || l.starts_with("SERVER_ERROR")
            || l.starts_with("BUSY")
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(last) = lines.last().filter(|l| *l != "END") {
        bail!("memcached {address} answered `{last}` to lru_crawler metadump hash");
    }
    let mut items = Vec::new();
    for l in &lines {
        if let Some(item) = parse_line(l)? {
            items.push(item);
        }
    }
    Ok(items)
}

/// `name[=weight]`.
fn node(spec: &str) -> Result<(String, i64)> {
    match spec.rsplit_once('=') {
        Some((name, w)) => Ok((
            name.to_string(),
            w.parse().with_context(|| format!("weight in `{spec}`"))?,
        )),
        None => Ok((spec.to_string(), 1)),
    }
}

/// One scheme's row of [`Evaluation`].
#[derive(Debug, Clone, Serialize)]
pub struct SchemeRow {
    /// The scheme (`ring`, `slots`, `modulo`, ...).
    pub scheme: String,
    /// Members whose owner changes, and their bytes (item sizes).
    pub moved: u64,
    pub moved_bytes: u64,
    /// The most loaded node's share over the mean after the change, by members and by bytes.
    pub keys_peak_to_mean_after: f64,
    pub bytes_peak_to_mean_after: f64,
    /// The share of the hash space that changes owner (rings), if exact.
    pub space: Option<f64>,
}

/// What a change of nodes costs the members. Its JSON form (`ringslot members --json`) has
/// these fields.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    /// Members read, and their bytes (item sizes summed).
    pub members: u64,
    pub bytes: u64,
    /// The share of weight that changes hands under a perfect scheme (0 to 1).
    pub ideal: f64,
    /// Per scheme, what moves.
    pub schemes: Vec<SchemeRow>,
    /// The report people read (Markdown).
    #[serde(skip)]
    pub markdown: String,
    /// The table of the report (`members.csv` under `--out`).
    #[serde(skip)]
    pub table: Table,
}

/// Reads the members, evaluates the change. Errors: no source, an unreadable file or
/// memcached, a bad node or weight, no change named.
pub fn evaluate(a: &Query) -> Result<Evaluation> {
    let items = match (&a.file, &a.memcached) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("read {}", path.display()))?;
            let mut items = Vec::new();
            for line in text.lines() {
                if let Some(item) = parse_line(line)? {
                    items.push(item);
                }
            }
            items
        }
        (None, Some(address)) => dump_memcached(address)?,
        (None, None) => bail!("members needs --file PATH or --memcached host:port"),
    };
    let mut topo = Topology::new(a.flavour, a.vnodes, a.hashtag)?;
    for spec in &a.nodes {
        let (name, weight) = node(spec)?;
        topo.add(&[name.as_bytes()], Some(weight), Limits::NONE)?;
    }
    let change = match (a.add.is_empty(), a.del.is_empty()) {
        (false, true) => Change::Add {
            nodes: a.add.iter().map(|n| n.as_bytes().to_vec()).collect(),
            weight: a.weight,
        },
        (true, false) => Change::Del {
            nodes: a.del.iter().map(|n| n.as_bytes().to_vec()).collect(),
        },
        _ => bail!("say what changes: --add node[,node...] or --del node[,node...]"),
    };
    let mut schemes = Scheme::DEFAULT.to_vec();
    schemes.extend(a.schemes.iter().copied());
    let w = topo.what_if_weighed(
        &change,
        items.iter().map(|i| {
            (
                i.key.as_slice(),
                MemberWeight {
                    bytes: i.bytes,
                    hits: 0,
                },
            )
        }),
        &schemes,
        &SchemeParams::default(),
        Limits::NONE,
    )?;
    let what = match &change {
        Change::Add { nodes, .. } => format!("{} joining", nodes.len()),
        _ => format!("{} leaving", a.del.len()),
    };
    let mut t = Table::new(&[
        "scheme",
        "moved keys",
        "keys fraction",
        "moved bytes",
        "bytes fraction",
        "keys peak-to-mean after",
        "bytes peak-to-mean after",
        "exact space",
    ]);
    let share = |part: u64, of: u64| {
        if of == 0 {
            "-".to_string()
        } else {
            fixed(part as f64 / of as f64, 4)
        }
    };
    let mut rows = Vec::new();
    for r in &w.schemes {
        let peaks = r.loads.as_ref().map_or([0.0; 3], |l| l.peak_to_mean);
        rows.push(SchemeRow {
            scheme: r.scheme.name().to_string(),
            moved: r.moves.moved,
            moved_bytes: r.moves.moved_bytes,
            keys_peak_to_mean_after: peaks[0],
            bytes_peak_to_mean_after: peaks[1],
            space: r.space,
        });
        t.push(vec![
            r.scheme.name().to_string(),
            r.moves.moved.to_string(),
            share(r.moves.moved, w.members),
            r.moves.moved_bytes.to_string(),
            share(r.moves.moved_bytes, w.bytes),
            fixed(peaks[0], 3),
            if w.bytes == 0 {
                "-".into()
            } else {
                fixed(peaks[1], 3)
            },
            r.space.map_or("-".into(), |s| fixed(s, 4)),
        ]);
    }
    let source = match (&a.file, &a.memcached) {
        (Some(p), _) => p.display().to_string(),
        (_, Some(m)) => format!("memcached {m}"),
        _ => String::new(),
    };
    let md = format!(
        "## {} members of {source}, {} bytes: {} nodes ({}), {what}\n\nIdeal (the weight that changes hands): {}.\n\n{}",
        w.members,
        w.bytes,
        a.nodes.len(),
        a.flavour.name(),
        fixed(w.ideal, 4),
        t.markdown()
    );
    Ok(Evaluation {
        members: w.members,
        bytes: w.bytes,
        ideal: w.ideal,
        schemes: rows,
        markdown: md,
        table: t,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadump_lines_and_plain_keys() {
        // The line shape memcached 1.6.18 prints (shared/notes/caches.md).
        let item =
            parse_line("key=user%3A1 exp=-1 la=1796126638 cas=2 fetch=yes cls=1 size=70").unwrap();
        assert_eq!(
            item,
            Some(Item {
                key: b"user:1".to_vec(),
                bytes: 70
            })
        );
        // A key holding `%20` is dumped as `%2520`.
        let item = parse_line("key=k%2520x exp=-1 la=1 cas=3 fetch=no cls=1 size=66").unwrap();
        assert_eq!(item.map(|i| i.key), Some(b"k%20x".to_vec()));
        assert_eq!(
            parse_line("plain:key").unwrap(),
            Some(Item {
                key: b"plain:key".to_vec(),
                bytes: 0
            })
        );
        assert_eq!(parse_line("END").unwrap(), None);
        assert_eq!(parse_line("").unwrap(), None);
        assert!(parse_line("key=a exp=-1 size=x").is_err());
        assert!(parse_line("key=a exp=-1").is_err());
        assert_eq!(node("a:1=3").unwrap(), ("a:1".to_string(), 3));
        assert_eq!(
            node("10.0.0.1:11211").unwrap(),
            ("10.0.0.1:11211".to_string(), 1)
        );
    }
}
