//! groupcache `consistenthash` (`consistenthash.Map.Add`): the label of a node's replica,
//! which it hashes with CRC32-IEEE.

use super::push_decimal;

/// Writes groupcache's label of replica `i` of `node` into `label`: decimal `i` then the node,
/// as `strconv.Itoa(i) + key` in groupcache `consistenthash.Map.Add`.
pub fn groupcache_label(node: &[u8], i: u32, label: &mut Vec<u8>) {
    label.clear();
    push_decimal(label, i);
    label.extend_from_slice(node);
}
