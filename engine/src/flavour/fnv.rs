//! FNV-1a, 64-bit (the FNV reference: its 64-bit offset basis and prime), through the `fnv`
//! crate: the hash of native-fnv and the first step of native's, the state after more bytes,
//! and a node name's effect on any state, worked out once per name ([`FnvSpan`]).

use std::hash::Hasher;

/// FNV-1a-64's offset basis and prime (the FNV reference).
pub(super) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a-64's state after `a` then `b`, from `state`.
pub(super) fn fnv_state(state: u64, a: &[u8], b: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::with_key(state);
    hasher.write(a);
    hasher.write(b);
    hasher.finish()
}

/// What FNV-1a-64 over a fixed byte string (a node name) does to any starting state, worked
/// out once per name. A step is `h -> (h xor byte) * prime`; `h xor byte` is `h + d` where
/// `d` depends only on the low 8 bits of `h`, and those bits after a step depend only on
/// those before it (a product's low bits come from the factors' low bits). So over `L` bytes,
/// `h -> h * prime^L + C(h mod 256)`, with one offset `C` per starting low byte, each found by
/// hashing the name once from that byte: at most 256 passes over the name per node, however
/// many labels (`i#node#i`, ringslot 0.1's native) it has.
pub(super) struct FnvSpan<'a> {
    bytes: &'a [u8],
    /// `prime^len(bytes)`, wrapping.
    scale: u64,
}

impl<'a> FnvSpan<'a> {
    /// The span of `bytes`.
    pub(super) fn new(bytes: &'a [u8]) -> FnvSpan<'a> {
        let mut scale = 1u64;
        for _ in bytes {
            scale = scale.wrapping_mul(FNV_PRIME);
        }
        FnvSpan { bytes, scale }
    }

    /// FNV-1a-64's state after the span's bytes, from `state`; `offsets` caches the offset of
    /// each starting low byte (start with all `None`, keep it for the span's lifetime).
    pub(super) fn apply(&self, state: u64, offsets: &mut [Option<u64>; 256]) -> u64 {
        let low = (state & 0xff) as usize;
        let offset = match offsets.get(low).copied().flatten() {
            Some(c) => c,
            None => {
                let c = fnv_state(low as u64, self.bytes, b"")
                    .wrapping_sub((low as u64).wrapping_mul(self.scale));
                if let Some(slot) = offsets.get_mut(low) {
                    *slot = Some(c);
                }
                c
            }
        };
        state.wrapping_mul(self.scale).wrapping_add(offset)
    }
}

/// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3), as the FNV reference.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}
