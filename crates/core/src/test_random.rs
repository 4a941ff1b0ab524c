//! Deterministic randomness for the unit tests: xorshift64, the same sequence on every
//! run and machine. Test code only.

/// Advances `state` and returns it. `state` must not be 0.
pub fn xorshift64(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}
