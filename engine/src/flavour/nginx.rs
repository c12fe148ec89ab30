//! nginx `hash $key consistent` (`ngx_http_upstream_init_chash()` in
//! `src/http/modules/ngx_http_upstream_hash_module.c`, nginx 1.22): a server's host and port,
//! which its points hash with CRC32-IEEE.

/// nginx's host and port of a `server` text, as `ngx_http_upstream_init_chash()` splits it:
/// after a `unix:` prefix (any case) the path is the host and there is no port; else the run
/// of digits after the last `:` is the port when a `:` ends the run; else no port.
pub fn nginx_host_port(server: &[u8]) -> (&[u8], &[u8]) {
    if server.len() >= 5 && server[..5].eq_ignore_ascii_case(b"unix:") {
        return (&server[5..], &[]);
    }
    let digits = server
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    match server.len().checked_sub(digits + 1) {
        Some(colon) if server.get(colon) == Some(&b':') => (&server[..colon], &server[colon + 1..]),
        _ => (server, &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_splits_host_and_port_as_nginx() {
        // ngx_http_upstream_init_chash(): digits after the last `:` are the port; `unix:`
        // leaves the path as host.
        assert_eq!(
            nginx_host_port(b"10.0.0.1:80"),
            (&b"10.0.0.1"[..], &b"80"[..])
        );
        assert_eq!(
            nginx_host_port(b"example.com"),
            (&b"example.com"[..], &b""[..])
        );
        assert_eq!(
            nginx_host_port(b"unix:/tmp/a.sock"),
            (&b"/tmp/a.sock"[..], &b""[..])
        );
        assert_eq!(nginx_host_port(b"UNIX:/a:80"), (&b"/a:80"[..], &b""[..]));
        assert_eq!(
            nginx_host_port(b"[::1]:8080"),
            (&b"[::1]"[..], &b"8080"[..])
        );
        assert_eq!(nginx_host_port(b"host:8a"), (&b"host:8a"[..], &b""[..]));
        assert_eq!(nginx_host_port(b":"), (&b""[..], &b""[..]));
    }
}
