//! memcached's text protocol, as much as the tool needs: one command line sent, answer lines
//! read until one ends the answer.

use anyhow::{anyhow, bail, Result};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `line` over memcached's text protocol to `address` and reads answer lines until
/// `last` says a line ends the answer (that line included). Error: a connection that fails
/// or closes first.
pub fn text_command(address: &str, line: &str, last: impl Fn(&str) -> bool) -> Result<Vec<String>> {
    let io = |e: std::io::Error| anyhow!("memcached {address}: {e}");
    let mut stream = TcpStream::connect(address).map_err(io)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(io)?;
    stream
        .write_all(format!("{line}\r\n").as_bytes())
        .map_err(io)?;
    let mut reader = BufReader::new(stream);
    let mut out = Vec::new();
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l).map_err(io)? == 0 {
            bail!("memcached {address} closed the connection");
        }
        let l = l.trim_end_matches(['\r', '\n']).to_string();
        let done = last(&l);
        out.push(l);
        if done {
            return Ok(out);
        }
    }
}
