//! Glob-style patterns as Redis matches key names in `KEYS` and `SCAN ... MATCH`, so that
//! `RING.MOVES ... KEYS pattern` evaluates exactly the keys those commands list.
//!
//! The rules are those of `stringmatchlen()` in Redis' `src/util.c` (7.0), case-sensitive:
//! `*` any run of bytes, `?` one byte, `[...]` one byte of a set (`^` first negates, `a-z` a
//! range whose ends may come in either order, `\x` the byte x), `\x` the byte x elsewhere.
//! Bytes compare as C's signed `char`, so a range with an end at or above 0x80 behaves as it
//! does in Redis; an unterminated `[` set ends with the pattern. As in `KEYS` and `SCAN`, the
//! pattern `*` alone matches every name, the empty one included. As in Redis 7.2 and later
//! (`util.c`, a fix for a stack overflow), a pattern whose `*`s nest more than 1000 deep
//! matches nothing, so that matching never runs out of stack.

/// Whether `name` matches `pattern` (see the module docs).
pub fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    if pattern == b"*" {
        return true;
    }
    let mut give_up = false;
    matches_from(pattern, name, &mut give_up, 0)
}

/// The deepest nesting of `*` matched, as Redis 7.2's `stringmatchlen_impl()`.
const MAX_NESTING: u32 = 1000;

/// The byte at `i` of `s`, or 0 past its end (where Redis reads the terminating NUL).
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

/// A byte as C's signed `char`, widened.
fn signed(b: u8) -> i32 {
    i32::from(b as i8)
}

/// Matches `p` against `s`; `give_up` is set when a `*` found no match for the rest of the
/// pattern anywhere in the rest of the name, so that earlier `*`s need not try longer runs.
/// Positions move as the pointers of `stringmatchlen()` do, so that its edge cases come out the
/// same.
/// `nesting` counts the `*`s this call is inside of (see the module docs).
fn matches_from(p: &[u8], s: &[u8], give_up: &mut bool, nesting: u32) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    let (mut pi, mut si) = (0usize, 0usize);
    while pi < p.len() && si < s.len() {
        match at(p, pi) {
            b'*' => {
                while pi + 1 < p.len() && at(p, pi + 1) == b'*' {
                    pi += 1;
                }
                if pi + 1 == p.len() {
                    return true;
                }
                let rest = p.get(pi + 1..).unwrap_or(&[]);
                while si < s.len() {
                    if matches_from(rest, s.get(si..).unwrap_or(&[]), give_up, nesting + 1) {
                        return true;
                    }
                    if *give_up {
                        return false;
                    }
                    si += 1;
                }
                *give_up = true;
                return false;
            }
            b'?' => si += 1,
            b'[' => {
                let (matched, end) = class(p, pi + 1, at(s, si));
                if !matched {
                    return false;
                }
                pi = end;
                si += 1;
            }
            b'\\' => {
                if p.len() - pi >= 2 {
                    pi += 1;
                }
                if at(p, pi) != at(s, si) {
                    return false;
                }
                si += 1;
            }
            c => {
                if c != at(s, si) {
                    return false;
                }
                si += 1;
            }
        }
        pi += 1;
        if si == s.len() {
            while pi < p.len() && at(p, pi) == b'*' {
                pi += 1;
            }
            break;
        }
    }
    pi >= p.len() && si == s.len()
}

/// Matches byte `c` against the set of `p` that starts at `pi` (just after its `[`). Returns
/// whether it matched and the position of the set's last byte (its `]`, or, for a set the
/// pattern does not close, the pattern's last byte), which the caller steps over.
fn class(p: &[u8], mut pi: usize, c: u8) -> (bool, usize) {
    let left = |pi: usize| p.len().saturating_sub(pi);
    let negate = at(p, pi) == b'^';
    if negate {
        pi += 1;
    }
    let mut matched = false;
    loop {
        if at(p, pi) == b'\\' && left(pi) >= 2 {
            pi += 1;
            if at(p, pi) == c {
                matched = true;
            }
        } else if at(p, pi) == b']' && left(pi) > 0 {
            break;
        } else if left(pi) == 0 {
            pi -= 1;
            break;
        } else if left(pi) >= 3 && at(p, pi + 1) == b'-' {
            let (mut start, mut end) = (signed(at(p, pi)), signed(at(p, pi + 2)));
            if start > end {
                std::mem::swap(&mut start, &mut end);
            }
            if (start..=end).contains(&signed(c)) {
                matched = true;
            }
            pi += 2;
        } else if at(p, pi) == c {
            matched = true;
        }
        pi += 1;
    }
    (matched != negate, pi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_of_redis_keys() {
        // Each expectation is what `KEYS` / `SCAN ... MATCH` answers on Redis 7.0 (the live
        // cross-check is tests/module_keys_walk.rs).
        let cases: &[(&[u8], &[u8], bool)] = &[
            (b"*", b"", true),
            (b"**", b"", false),
            (b"a*", b"a", true),
            (b"a*", b"abc", true),
            (b"*c", b"abc", true),
            (b"*c", b"abd", false),
            (b"a?c", b"abc", true),
            (b"a?c", b"ac", false),
            (b"h[ae]llo", b"hallo", true),
            (b"h[^e]llo", b"hello", false),
            (b"h[^e]llo", b"hallo", true),
            (b"h[a-b]llo", b"hbllo", true),
            (b"h[b-a]llo", b"hbllo", true),
            (b"h[a-b]llo", b"hcllo", false),
            (b"h\\*llo", b"h*llo", true),
            (b"h\\*llo", b"hello", false),
            (b"[\\]]", b"]", true),
            (b"[ab", b"a", true),
            (b"[ab", b"b", true),
            (b"[ab", b"c", false),
            (b"[^", b"x", true),
            (b"[", b"x", false),
            (b"x[^", b"xy", true),
            (b"user:*:id", b"user:42:id", true),
            (b"user:*:id", b"user:42:idx", false),
            (b"*a*b*c*", b"xaxbxcx", true),
            (b"a\\", b"a\\", true),
            // Signed chars: 0xff is -1, so [a-\xff] is [-1..97] and does not hold 'b'.
            (b"[a-\xff]", b"b", false),
            (b"[a-\xff]", b"a", true),
            (b"[\x80-\xff]", b"\xc0", true),
        ];
        for &(pattern, name, expected) in cases {
            assert_eq!(
                glob_match(pattern, name),
                expected,
                "{:?} ~ {:?}",
                String::from_utf8_lossy(pattern),
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn many_stars_do_not_take_exponential_time() {
        let pattern = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let name = vec![b'a'; 200];
        assert!(!glob_match(pattern, &name));
    }

    #[test]
    fn star_nesting_stops_at_1000_as_in_redis_7_2() {
        // Redis 7.2.6 util.c: `if (nesting > 1000) return 0;`. 1000 nested `*` still match;
        // 1001 match nothing (7.0 would recurse on), and 100000 do not exhaust the stack.
        let name = vec![b'a'; 1200];
        let pattern = |n: usize| b"*a".repeat(n);
        assert!(glob_match(&pattern(1000), &name));
        assert!(!glob_match(&pattern(1001), &name));
        assert!(!glob_match(&pattern(100_000), &vec![b'a'; 100_000]));
    }
}
