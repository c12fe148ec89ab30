//! The documentation against the code and a real server (issue 29): every command of the
//! command table has its page under `docs/commands/`, with the table's syntax, complexity,
//! flags and version, and no page names a command that does not exist; every configuration
//! has its row in `docs/configuration.md` with its real default and range; every flavour and
//! scheme the code accepts is listed in `docs/placement.md`; and every `redis-cli` session of
//! the README and of `docs/` runs on a fresh server with the module, through the real
//! `redis-cli`, and prints what the page says.
//!
//! A session is a fenced block whose info string starts with `redis-cli` (`redis-cli -3` for
//! RESP3; `redis-7.0` when its output is compared on Redis 7.0 only, as `MEMORY USAGE` figures
//! differ between servers and allocators). Lines starting `127.0.0.1:6379> ` are commands,
//! the lines after one are what `redis-cli --no-raw` prints. Each page's sessions run in order
//! on one server of their own (a one-node cluster serving every slot when the page says
//! `redis-server --cluster-enabled yes`), each command by its own `redis-cli`. Compared line
//! by line: the server's port shown as 6379, trailing spaces and redis-cli's timing lines
//! (`(0.52s)`) left out, RESP3 doubles as numbers (Redis 7.0.15 prints 17 significant digits,
//! Redis 8 and Valkey 9 the shortest text).

use ringslot::engine::{Flavour, Scheme};
use ringslot::module::cmdinfo::{Arg, ArgKind, Command as RingCommand};
use ringslot::module::config::SETTINGS;
use ringslot::module::table::COMMANDS;
use ringslot_harness::server::{server_binary, server_version};
use ringslot_harness::Server;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The address the pages show for the server they ran on.
const ADDRESS: &str = "127.0.0.1:6379";
/// The prompt a session's command lines start with.
const PROMPT: &str = "127.0.0.1:6379> ";

/// The workspace root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A page's text (panics when it is missing).
fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Markdown files of `dir` and its subfolders, sorted.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every page users read: the README, BENCHMARKS.md and `docs/**/*.md`.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md"), root().join("BENCHMARKS.md")];
    out.extend(markdown_under(&root().join("docs")));
    out
}

/// The page of `command` (`docs/commands/ring.create.md`).
fn command_page(command: &RingCommand) -> PathBuf {
    root()
        .join("docs/commands")
        .join(format!("{}.md", command.name))
}

/// One fenced block: its info string and its lines.
struct Block {
    info: String,
    lines: Vec<String>,
    /// The line of the opening fence, 1-based.
    line: usize,
}

/// The fenced blocks of a page, in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (fence, open.take()) {
            (Some(_), Some(block)) => out.push(block),
            (Some(info), None) => {
                open = Some(Block {
                    info: info.trim().to_string(),
                    lines: Vec::new(),
                    line: i + 1,
                })
            }
            (None, Some(mut block)) => {
                block.lines.push(line.to_string());
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a fenced block is not closed");
    out
}

/// The text of section `## title` of a page (up to the next `## `), empty when missing.
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let heading = format!("\n## {title}\n");
    let Some(start) = text.find(&heading) else {
        return "";
    };
    let body = &text[start + heading.len()..];
    body.find("\n## ").map_or(body, |end| &body[..end])
}

/// `s` with every run of white space made one space.
fn collapsed(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An argument as its command's syntax shows it: `[OPTION value]` for an optional one, `<a
/// | b>` for a choice, `name [name ...]` for a repeated one (the conventions of the Redis
/// command reference), from the same `Arg`s `COMMAND DOCS` is built from.
fn render(arg: &Arg) -> String {
    let parts = |sep: &str| arg.sub.iter().map(render).collect::<Vec<_>>().join(sep);
    let mut s = match arg.kind {
        ArgKind::OneOf => parts(" | "),
        ArgKind::Block => parts(" "),
        ArgKind::PureToken => arg.token.unwrap_or(arg.name).to_string(),
        _ => arg.name.to_string(),
    };
    if arg.kind == ArgKind::OneOf && (!arg.optional || arg.token.is_some() || arg.multiple) {
        s = format!("<{s}>");
    }
    if arg.multiple {
        s = format!("{s} [{s} ...]");
    }
    if let (Some(token), false) = (arg.token, arg.kind == ArgKind::PureToken) {
        s = format!("{token} {s}");
    }
    if arg.optional {
        s = format!("[{s}]");
    }
    s
}

/// A command's syntax line, as its page must show it.
fn syntax(command: &RingCommand) -> String {
    let mut s = command.name.to_uppercase();
    for arg in command.args {
        s.push(' ');
        s.push_str(&render(arg));
    }
    s
}

/// The value after `**label:**` on a page, without a trailing `<br>`.
fn field<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let prefix = format!("**{label}:** ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim_end_matches("<br>").trim())
}

#[test]
fn every_command_has_a_page_with_its_syntax() {
    let mut problems = Vec::new();
    for command in &COMMANDS {
        let path = command_page(command);
        let Ok(text) = std::fs::read_to_string(&path) else {
            problems.push(format!("{} has no page {}", command.name, path.display()));
            continue;
        };
        let name = command.name.to_uppercase();
        let page = format!("docs/commands/{}.md", command.name);
        if text.lines().next() != Some(format!("# {name}").as_str()) {
            problems.push(format!("{page}: the first line is not `# {name}`"));
        }
        let shown = blocks(section(&text, "Syntax"))
            .first()
            .map(|b| collapsed(&b.lines.join(" ")));
        if shown.as_deref() != Some(syntax(command).as_str()) {
            problems.push(format!(
                "{page}: the syntax is\n  {}\nwhere the command table (COMMAND DOCS) says\n  {}",
                shown.unwrap_or_default(),
                syntax(command)
            ));
        }
        let facts = [
            ("Available since", format!("ringslot {}", command.since)),
            ("Time complexity", command.complexity.to_string()),
            (
                "Flags",
                command
                    .flags
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ];
        for (label, want) in facts {
            if field(&text, label) != Some(want.as_str()) {
                problems.push(format!(
                    "{page}: **{label}:** is {:?}, the table says {want:?}",
                    field(&text, label)
                ));
            }
        }
        for title in [
            "Arguments",
            "Reply",
            "Errors",
            "Cost",
            "Examples",
            "See also",
        ] {
            if section(&text, title).trim().is_empty() {
                problems.push(format!("{page}: no section `## {title}`"));
            }
        }
        let runs_itself = blocks(section(&text, "Examples")).iter().any(|b| {
            b.info.starts_with("redis-cli")
                && b.lines.iter().any(|l| {
                    l.strip_prefix(PROMPT).is_some_and(|c| {
                        c.split_whitespace()
                            .next()
                            .is_some_and(|w| w.eq_ignore_ascii_case(&name))
                    })
                })
        });
        if !runs_itself {
            problems.push(format!("{page}: no `redis-cli` example runs {name}"));
        }
    }
    // Nothing else lives beside the command pages but their index.
    let known: BTreeSet<PathBuf> = COMMANDS.iter().map(command_page).collect();
    for path in markdown_under(&root().join("docs/commands")) {
        if !known.contains(&path) && !path.ends_with("docs/commands/README.md") {
            problems.push(format!("{} is no command's page", path.display()));
        }
    }
    // The README's command list and the commands' index link every page.
    for index in ["README.md", "docs/commands/README.md"] {
        let text = read(&root().join(index));
        for command in &COMMANDS {
            let link = if index == "README.md" {
                format!("(docs/commands/{}.md)", command.name)
            } else {
                format!("({}.md)", command.name)
            };
            if !text.contains(&link) {
                problems.push(format!("{index} does not link {link}"));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The command names a text mentions: `RING.X` in capitals, and `ring.x` after a character
/// that is not part of a word or a path (a link `ring.get.md`, an ACL rule `+ring.get`, a
/// keyspace event `ring.add`).
fn named_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (prefix, lower) in [("RING.", false), ("ring.", true)] {
        let mut from = 0;
        while let Some(at) = text[from..].find(prefix) {
            let start = from + at;
            from = start + prefix.len();
            let before = text[..start].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '/')
            {
                continue;
            }
            let word: String = text[from..]
                .chars()
                .take_while(|c| {
                    if lower {
                        c.is_ascii_lowercase()
                    } else {
                        c.is_ascii_uppercase()
                    }
                })
                .collect();
            if !word.is_empty() {
                out.push(format!("ring.{}", word.to_ascii_lowercase()));
            }
        }
    }
    out
}

#[test]
fn no_page_names_a_command_that_does_not_exist() {
    let commands: BTreeSet<&str> = COMMANDS.iter().map(|c| c.name).collect();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for path in pages() {
        for name in named_commands(&read(&path)) {
            if !commands.contains(name.as_str()) {
                problems.push(format!("{} names {name}, no such command", path.display()));
            }
            seen.insert(name);
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    // The scan sees the commands at all (a broken scanner passes every page).
    assert_eq!(seen.len(), COMMANDS.len());
}

/// The rows of `docs/configuration.md`'s table: name -> (default, min, max) as written.
fn configuration_rows() -> BTreeMap<String, (String, String, String)> {
    let text = read(&root().join("docs/configuration.md"));
    let mut rows = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `ringslot.")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, default, min, max, ..] = cells.as_slice() else {
            panic!("configuration row {line:?}: | name | default | min | max | ... |");
        };
        let name = name.trim_matches('`').trim_start_matches("ringslot.");
        let row = (default.to_string(), min.to_string(), max.to_string());
        assert!(
            rows.insert(name.to_string(), row).is_none(),
            "two rows for {name}"
        );
    }
    rows
}

#[test]
fn configuration_page_has_every_setting_with_its_real_default() {
    let rows = configuration_rows();
    let names: BTreeSet<&str> = SETTINGS.iter().map(|s| s.name).collect();
    for name in rows.keys() {
        assert!(
            names.contains(name.as_str()),
            "docs/configuration.md has a row for ringslot.{name}, which is no setting"
        );
    }
    // The server's own defaults: the module's registered values on a fresh server.
    let server = Server::start();
    let mut con = server.client();
    let live: Vec<String> = ringslot_harness::redis::cmd("CONFIG")
        .arg("GET")
        .arg("ringslot.*")
        .query(&mut con)
        .expect("CONFIG GET ringslot.*");
    let live: BTreeMap<&str, &str> = live
        .chunks(2)
        .filter_map(|kv| match kv {
            [k, v] => Some((k.trim_start_matches("ringslot."), v.as_str())),
            _ => None,
        })
        .collect();
    for setting in &SETTINGS {
        let want = (
            setting.default.to_string(),
            setting.min.to_string(),
            setting.max.to_string(),
        );
        assert_eq!(
            rows.get(setting.name),
            Some(&want),
            "docs/configuration.md: ringslot.{} (default, min, max)",
            setting.name
        );
        assert_eq!(
            live.get(setting.name).copied(),
            Some(want.0.as_str()),
            "CONFIG GET ringslot.{}",
            setting.name
        );
    }
}

/// The names written in backticks on a page (`` `native` ``).
fn quoted(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The first cell of the table rows of `text` that start `` | `name` | ``.
fn first_cells(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |").map(|(name, _)| name.to_string()))
        .collect()
}

/// Every field path of a JSON value (`moves[].slot` for the fields of an array's objects); an
/// empty object or a scalar is a leaf.
fn json_fields(v: &serde_json::Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(fields) if !fields.is_empty() => {
            for (name, field) in fields {
                let path = if at.is_empty() {
                    name.clone()
                } else {
                    format!("{at}.{name}")
                };
                json_fields(field, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            out.insert(at.to_string());
            for item in items {
                if item.is_object() {
                    json_fields(item, &format!("{at}[]"), out);
                }
            }
        }
        _ => {
            out.insert(at.to_string());
        }
    }
}

#[test]
fn the_plan_files_fields_are_the_ones_its_page_lists() {
    // The plan file as the tool writes it (one type, `ringslot_tool::plan::SlotPlan`, writes
    // and reads it), against the table of docs/cluster.md's "The plan file".
    use ringslot_tool::plan::{lanes_of, owned_ranges, SlotMove, SlotPlan, PLAN_VERSION};
    use ringslot_tool::predict::WeightBy;
    let moves = vec![SlotMove {
        slot: 0,
        from: "10.0.0.1:7000".into(),
        to: "10.0.0.2:7000".into(),
        keys: 1,
        bytes: 10.0,
        memory: Some(100.0),
        big: Some(600_000.0),
    }];
    let plan = SlotPlan {
        version: PLAN_VERSION,
        by: WeightBy::Bytes,
        tolerance: 0.05,
        start: owned_ranges(&vec![Some("10.0.0.1:7000".to_string()); 16384]),
        ids: Default::default(),
        lanes: lanes_of(&moves),
        moves,
    };
    let mut written = BTreeSet::new();
    json_fields(&serde_json::to_value(&plan).unwrap(), "", &mut written);
    let page = read(&root().join("docs/cluster.md"));
    let start = page
        .find("\n### The plan file\n")
        .expect("docs/cluster.md has a section \"The plan file\"");
    let body = &page[start + 1..];
    let end = body[4..].find("\n##").map_or(body.len(), |e| e + 4);
    let listed = first_cells(&body[..end]);
    assert_eq!(
        listed, written,
        "docs/cluster.md's plan file fields (left) against the fields the tool writes (right)"
    );
}

/// The rows of the field table in the section of docs/cluster.md that starts with `heading`.
fn cluster_page_fields(heading: &str) -> BTreeSet<String> {
    let page = read(&root().join("docs/cluster.md"));
    let start = page
        .find(heading)
        .unwrap_or_else(|| panic!("docs/cluster.md has a section {heading:?}"));
    let body = &page[start + 1..];
    let end = body[4..].find("\n## ").map_or(body.len(), |e| e + 4);
    first_cells(&body[..end])
}

#[test]
fn the_status_fields_are_the_ones_its_page_lists() {
    // `ringslot status --json` as the tool writes it (`ringslot_tool::status::Status`, every
    // list holding one item so that its items' fields are written), against the table of
    // docs/cluster.md's "How the cluster stands".
    use ringslot_tool::predict::estimate::Estimate;
    use ringslot_tool::status::*;
    let master = MasterStatus {
        address: "10.0.0.1:7000".into(),
        id: "0".repeat(40),
        slots: 16384,
        keys: 1,
        keys_in_slots: 1,
        bytes: Estimate::default(),
        sampled: 1,
        used_memory: 1.0,
        maxmemory: 0.0,
        policy: "noeviction".into(),
        evicted_keys: 0,
        memory: None,
        replicas: vec![ReplicaStatus {
            address: "10.0.0.2:7000".into(),
            link: "up".into(),
            lag_bytes: Some(0),
            unread: String::new(),
        }],
        migrating: vec![OpenSlot {
            slot: 1,
            peer: "10.0.0.3:7000".into(),
        }],
        importing: vec![OpenSlot {
            slot: 2,
            peer: "10.0.0.3:7000".into(),
        }],
        atomic_migrations: vec![AtomicMigration {
            operation: "EXPORT".into(),
            slots: "3-4".into(),
            state: "snapshotting".into(),
            peer: "10.0.0.3:7000".into(),
        }],
        unread: String::new(),
        slots_share: 1.0,
        keys_share: 1.0,
        bytes_share: 1.0,
    };
    let status = Status {
        version: STATUS_VERSION,
        seed: "10.0.0.1:7000".into(),
        server: "redis 7.0.15".into(),
        verdict: "balanced".into(),
        findings: Vec::new(),
        masters: vec![master],
        flagged: vec![FlaggedNode {
            address: "10.0.0.4:7000".into(),
            flag: "fail".into(),
            master: false,
        }],
        uncovered_slots: 0,
        balance: Balance::default(),
        biggest_slots: vec![SlotStatus {
            slot: 0,
            master: "10.0.0.1:7000".into(),
            keys: 1,
            bytes: 1.0,
        }],
        big_keys: vec![BigKeyStatus {
            key: "k".into(),
            slot: 0,
            master: "10.0.0.1:7000".into(),
            kind: "string".into(),
            length: 1,
            memory: 1.0,
        }],
        keys_per_slot: 8,
        keys_sized: 1,
        big_keys_screened: false,
        seconds: 0.1,
        owners: Vec::new(),
    };
    let mut written = BTreeSet::new();
    json_fields(&serde_json::to_value(&status).unwrap(), "", &mut written);
    assert_eq!(
        cluster_page_fields("\n## How the cluster stands: `ringslot status`\n"),
        written,
        "docs/cluster.md's status fields (left) against the fields the tool writes (right)"
    );
}

#[test]
fn the_exit_statuses_and_findings_are_the_ones_the_tool_has() {
    // docs/cluster.md's one table of exit statuses against `ringslot_tool::cli::EXIT_STATUSES`,
    // and its table of findings against `Finding::samples()`: each kind with its exit status
    // and the fields `--json` gives it.
    use ringslot_tool::cli::EXIT_STATUSES;
    use ringslot_tool::cluster::finding::Finding;
    let page = read(&root().join("docs/cluster.md"));
    let start = page
        .find("\n### Exit status\n")
        .expect("docs/cluster.md has a section \"Exit status\"");
    let section = &page[start + 1..];
    let section = &section[..section[4..].find("\n#").map_or(section.len(), |e| e + 4)];
    let rows: Vec<Vec<String>> = section
        .lines()
        .filter(|l| {
            l.starts_with("| ") && !l.starts_with("| status") && !l.starts_with("| finding")
        })
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let statuses: BTreeSet<i32> = rows
        .iter()
        .filter(|r| r.len() == 2)
        .filter_map(|r| r[0].parse().ok())
        .collect();
    assert_eq!(
        statuses,
        EXIT_STATUSES.iter().copied().collect::<BTreeSet<i32>>(),
        "the exit statuses docs/cluster.md lists (left) and the tool's (right)"
    );
    let documented: BTreeMap<String, (String, i32)> = rows
        .iter()
        .filter(|r| r.len() == 4)
        .map(|r| {
            (
                r[0].trim_matches('`').to_string(),
                (r[2].clone(), r[3].parse().unwrap_or(-1)),
            )
        })
        .collect();
    let mut kinds = BTreeSet::new();
    for f in Finding::samples() {
        kinds.insert(f.kind().to_string());
        let (fields, status) = documented
            .get(f.kind())
            .unwrap_or_else(|| panic!("docs/cluster.md's findings lack `{}`", f.kind()));
        assert_eq!(
            *status,
            f.exit_status(),
            "the exit status of `{}`",
            f.kind()
        );
        let json = serde_json::to_value(&f).unwrap();
        for name in json.as_object().unwrap().keys().filter(|k| *k != "kind") {
            assert!(
                fields.contains(&format!("`{name}`")),
                "docs/cluster.md's `{}` lacks its field `{name}`",
                f.kind()
            );
        }
    }
    assert_eq!(
        documented.keys().cloned().collect::<BTreeSet<String>>(),
        kinds,
        "the findings docs/cluster.md lists (left) and the tool's (right)"
    );
}

#[test]
fn placement_lists_every_flavour_and_scheme() {
    let flavours: BTreeSet<String> = Flavour::ALL.iter().map(|f| f.name().into()).collect();
    let schemes: BTreeSet<String> = Scheme::ALL.iter().map(|s| s.name().into()).collect();
    let placement = read(&root().join("docs/placement.md"));
    let create = read(&root().join("docs/commands/ring.create.md"));
    let moves = read(&root().join("docs/commands/ring.moves.md"));
    // The flavour tables list every flavour the code accepts, and nothing else.
    assert_eq!(
        first_cells(section(&placement, "The ring: its flavours")),
        flavours,
        "docs/placement.md's flavour table"
    );
    assert_eq!(
        first_cells(section(&create, "Arguments")),
        flavours,
        "ring.create.md's flavour table"
    );
    // Every flavour has its paragraph, every scheme but the ring and the slot table its own.
    let bullets = |text: &str| -> BTreeSet<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("- **"))
            .filter_map(|l| l.split_once("**").map(|(name, _)| name.to_string()))
            .collect()
    };
    assert_eq!(
        bullets(section(&placement, "The ring: its flavours")),
        flavours,
        "docs/placement.md: a paragraph per flavour"
    );
    let others: BTreeSet<String> = schemes
        .iter()
        .filter(|s| *s != "ring" && *s != "slots")
        .cloned()
        .collect();
    assert_eq!(
        bullets(section(&placement, "Other schemes")),
        others,
        "docs/placement.md: a paragraph per scheme"
    );
    for (page, text, names) in [
        ("docs/placement.md", &placement, &schemes),
        ("docs/commands/ring.moves.md", &moves, &schemes),
        ("docs/commands/ring.create.md", &create, &flavours),
    ] {
        let named = quoted(text);
        let missing: Vec<&String> = names.difference(&named).collect();
        assert!(missing.is_empty(), "{page} does not name {missing:?}");
    }
}

/// One command of a session and the lines the page says it prints.
struct Step {
    command: String,
    expected: Vec<String>,
    resp3: bool,
    /// Compared only on Redis 7.0.
    redis_70_only: bool,
    /// The page's line of the command.
    line: usize,
}

/// The sessions of a page, in order.
fn sessions(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for block in blocks(text) {
        let mut words = block.info.split_whitespace();
        if words.next() != Some("redis-cli") {
            continue;
        }
        let flags: Vec<&str> = words.collect();
        for flag in &flags {
            assert!(
                ["-3", "redis-7.0"].contains(flag),
                "line {}: unknown session flag {flag:?}",
                block.line
            );
        }
        let first = steps.len();
        for (i, line) in block.lines.iter().enumerate() {
            if let Some(command) = line.strip_prefix(PROMPT) {
                steps.push(Step {
                    command: command.to_string(),
                    expected: Vec::new(),
                    resp3: flags.contains(&"-3"),
                    redis_70_only: flags.contains(&"redis-7.0"),
                    line: block.line + 1 + i,
                });
            } else if steps.len() > first {
                if let Some(step) = steps.last_mut() {
                    step.expected.push(line.trim_end().to_string());
                }
            } else {
                panic!(
                    "line {}: a session starts with a command",
                    block.line + 1 + i
                );
            }
        }
    }
    steps
}

/// Whether two printed lines say the same: equal, or equal but for a RESP3 double that reads
/// back to the same number.
fn same_line(expected: &str, actual: &str) -> bool {
    if expected == actual {
        return true;
    }
    const DOUBLE: &str = "(double) ";
    match (expected.split_once(DOUBLE), actual.split_once(DOUBLE)) {
        (Some((e, ev)), Some((a, av))) => {
            e == a && ev.parse::<f64>().ok().is_some() && ev.parse::<f64>().ok() == av.parse().ok()
        }
        _ => false,
    }
}

/// What `redis-cli --no-raw` prints for `command` (one line, as typed at the prompt) against
/// the server on `port`, trailing spaces and timing lines left out and the port shown as 6379.
fn redis_cli(port: u16, command: &str, resp3: bool) -> Vec<String> {
    let mut cli = Command::new("redis-cli");
    cli.args(["-p", &port.to_string(), "--no-raw"]);
    if resp3 {
        cli.arg("-3");
    }
    let mut child = cli
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redis-cli (Debian's redis-tools)");
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        stdin
            .write_all(format!("{command}\n").as_bytes())
            .expect("write to redis-cli");
    }
    let out = child.wait_with_output().expect("redis-cli's output");
    let text = String::from_utf8_lossy(&out.stdout).replace(&format!("127.0.0.1:{port}"), ADDRESS);
    text.lines()
        .map(|l| l.trim_end().to_string())
        .filter(|l| !is_timing(l))
        .collect()
}

/// redis-cli's `(0.52s)` after a command that took half a second or more.
fn is_timing(line: &str) -> bool {
    line.strip_prefix('(')
        .and_then(|l| l.strip_suffix("s)"))
        .is_some_and(|n| n.parse::<f64>().is_ok())
}

/// A one-node cluster with the module, serving every slot, named `127.0.0.1:<port>` in
/// `CLUSTER NODES` (a lone node learns no address of its own).
fn cluster_node() -> Server {
    let server = Server::builder()
        .cluster()
        .args(&["--cluster-announce-ip", "127.0.0.1"])
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut con = server.client();
    let _: () = ringslot_harness::redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut con)
        .expect("CLUSTER ADDSLOTSRANGE 0 16383");
    // A master that just took its slots reports the cluster down for a moment (Redis waits
    // before it calls a fresh master writable); the deadline is far beyond that.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info: String = ringslot_harness::redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut con)
            .expect("CLUSTER INFO");
        if info.contains("cluster_state:ok") {
            return server;
        }
        assert!(Instant::now() < deadline, "the cluster stays down: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a page's sessions on a server of its own; returns what differs.
fn check_page(path: &Path, redis_70: bool) -> Vec<String> {
    let text = read(path);
    let steps = sessions(&text);
    if steps.is_empty() {
        return Vec::new();
    }
    let server = if text.contains("redis-server --cluster-enabled yes") {
        cluster_node()
    } else {
        Server::start()
    };
    let shown = path
        .strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string();
    let mut problems = Vec::new();
    for step in &steps {
        let actual = redis_cli(server.port, &step.command, step.resp3);
        if step.redis_70_only && !redis_70 {
            continue;
        }
        let differs = actual.len() != step.expected.len()
            || step
                .expected
                .iter()
                .zip(&actual)
                .any(|(e, a)| !same_line(e, a));
        if differs {
            problems.push(format!(
                "{shown}:{}: {}\n--- the page says:\n{}\n--- redis-cli printed:\n{}",
                step.line,
                step.command,
                step.expected.join("\n"),
                actual.join("\n")
            ));
        }
    }
    problems
}

#[test]
fn sessions_print_what_the_pages_say() {
    let version = server_version(&server_binary());
    // `Redis server v=7.0.15 ...`; Valkey says `Valkey server v=...`.
    let redis_70 = version.starts_with("Redis ") && version.contains("v=7.0.");
    let pages: Vec<PathBuf> = pages()
        .into_iter()
        .filter(|p| !sessions(&read(p)).is_empty())
        .collect();
    assert!(
        pages.len() > COMMANDS.len(),
        "the command pages, the README and the configuration page have sessions"
    );
    // A few pages at a time, each on its own server.
    let queue = Mutex::new(pages);
    let problems = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| loop {
                let next = queue.lock().map(|mut q| q.pop()).unwrap_or(None);
                let Some(page) = next else { break };
                let found = check_page(&page, redis_70);
                if let Ok(mut all) = problems.lock() {
                    all.extend(found);
                }
            });
        }
    });
    let problems = problems.into_inner().unwrap_or_default();
    assert!(
        problems.is_empty(),
        "on {version}:\n\n{}",
        problems.join("\n\n")
    );
}

/// The anchors GitHub gives a page's headings: lower case, letters, digits, `-` and `_` kept,
/// spaces made `-`, anything else dropped.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        let Some(title) = line.strip_prefix('#').filter(|_| !in_code) else {
            continue;
        };
        let title = title.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        out.insert(slug);
    }
    out
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 260,
        "README.md has {lines} lines (about 250 at most)"
    );
    for needle in ["make run", "make test", "```redis-cli"] {
        assert!(readme.contains(needle), "README.md lacks {needle:?}");
    }
    // Every relative link of every page leads to a file that exists, and to a heading of it.
    let mut broken = Vec::new();
    for path in pages() {
        let text = read(&path);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(root);
        for target in text.split("](").skip(1).filter_map(|t| t.split(')').next()) {
            if target.contains("://") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if file.is_empty() {
                path.clone()
            } else {
                dir.join(file)
            };
            let found = if anchor.is_empty() {
                file.exists()
            } else {
                std::fs::read_to_string(&file).is_ok_and(|t| anchors(&t).contains(anchor))
            };
            if !found {
                broken.push(format!("{}: {target}", path.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}
