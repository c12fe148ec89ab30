//! Sending commands with binary arguments, and reading an error reply as the text the server
//! wrote (`ERR syntax error`), so that tests and the benchmark compare exact error texts.

use redis::{Connection, Value};

/// A command from raw arguments (binary-safe); the first is the command name.
pub fn cmd<A: AsRef<[u8]>>(args: &[A]) -> redis::Cmd {
    let name = args
        .first()
        .map(|n| String::from_utf8_lossy(n.as_ref()).into_owned())
        .unwrap_or_default();
    let mut c = redis::cmd(&name);
    for a in args.iter().skip(1) {
        c.arg(a.as_ref());
    }
    c
}

/// The error as the server wrote it (`ERR syntax error`), or the client's description.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Runs `args`; an error reply comes back as its full text.
pub fn call<A: AsRef<[u8]>>(con: &mut Connection, args: &[A]) -> Result<Value, String> {
    cmd(args).query::<Value>(con).map_err(|e| error_text(&e))
}

/// Splits a command line on spaces (for arguments without spaces).
pub fn words(line: &str) -> Vec<&[u8]> {
    line.split(' ')
        .filter(|w| !w.is_empty())
        .map(str::as_bytes)
        .collect()
}
