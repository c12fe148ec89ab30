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

/// The error as the server wrote it (`ERR syntax error`), or the client's description (a
/// timeout says so in words).
pub fn error_text(e: &redis::RedisError) -> String {
    if e.is_timeout() {
        return "no answer within the timeout (--timeout): the node is stopped, overloaded or \
                unreachable"
            .to_string();
    }
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

/// Walks every key of the connection's database that matches `pattern` (`*` for all) with
/// `SCAN cursor MATCH pattern COUNT 1000` until the cursor comes back to 0, handing each
/// batch of key names to `each` with the connection (free again, e.g. to pipeline a command
/// per key). SCAN may return a key twice; callers that count must not double it.
/// Reads only; the first error (SCAN's or `each`'s) ends the walk.
pub fn scan_keys<E: From<redis::RedisError>>(
    con: &mut Connection,
    pattern: &str,
    mut each: impl FnMut(&mut Connection, Vec<Vec<u8>>) -> Result<(), E>,
) -> Result<(), E> {
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query(con)?;
        each(con, batch)?;
        cursor = next;
        if cursor == 0 {
            return Ok(());
        }
    }
}
