//! ringslot's own flavours, `native` and `native-fnv` (ringslot 0.1's native): the native hash
//! (FNV-1a-64, `fnv.rs`, then MurmurHash3's `fmix64`, `murmur3.rs`) and the labels of both
//! flavours; the flavour module's docs say why they take these forms.

use super::{fmix64, fnv1a64, push_decimal};

/// The native flavour's hash: [`fmix64`] of [`fnv1a64`].
pub fn native_hash(bytes: &[u8]) -> u64 {
    fmix64(fnv1a64(bytes))
}

/// Writes the native label of virtual node `i` (0-based) of `node` into `label`: `node`, `#`,
/// decimal `i + 1`, as the seed article labels virtual nodes (`127.0.0.1#1`, `127.0.0.1#2`).
pub fn native_label(node: &[u8], i: u32, label: &mut Vec<u8>) {
    label.clear();
    label.extend_from_slice(node);
    label.push(b'#');
    push_decimal(label, i.saturating_add(1));
}

/// Writes the native-fnv label of virtual node `i` of `node` into `label`: decimal `i`, `#`,
/// `node`, `#`, decimal `i` (see the module docs for why the index is at both ends).
pub fn native_fnv_label(node: &[u8], i: u32, label: &mut Vec<u8>) {
    label.clear();
    push_decimal(label, i);
    label.push(b'#');
    label.extend_from_slice(node);
    label.push(b'#');
    push_decimal(label, i);
}
