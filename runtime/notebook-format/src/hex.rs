//! Lowercase hex for digests (file hashes, cell versions, cache keys). By table, not by
//! `format!` per byte: cell versions are computed for every cell on every edit.

use sha2::{Digest, Sha256};

const DIGITS: &[u8; 16] = b"0123456789abcdef";

pub fn lower_hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 0x0f)] as char);
    }
    text
}

/// The SHA-256 of `bytes` in lowercase hex, as Jupyter's contents API gives a file's hash.
pub fn sha256(bytes: &[u8]) -> String {
    lower_hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_lowercase_digits_a_byte() {
        assert_eq!(super::lower_hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::lower_hex(&[]), "");
    }
}
