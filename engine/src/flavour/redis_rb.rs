//! redis-rb 4.8 `Redis::HashRing` under `Redis::Distributed`: the client id of a node
//! (`Redis::Client#id`), which its points hash with CRC32.

/// redis-rb's client id for a node name: the name itself when it holds `://` (an id or URL
/// given whole), `unix://<path>/0` for a name starting with `/`, else `redis://<name>/0`
/// (`Redis::Client#id` in redis-rb 4.8: `<scheme>://<host:port or path>/<db>`).
pub fn redis_rb_id(node: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if node.windows(3).any(|w| w == b"://") {
        return std::borrow::Cow::Borrowed(node);
    }
    let scheme: &[u8] = if node.first() == Some(&b'/') {
        b"unix://"
    } else {
        b"redis://"
    };
    std::borrow::Cow::Owned([scheme, node, b"/0"].concat())
}
