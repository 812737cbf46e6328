//! RocketMQ's `UtilAll.crc32`: zlib/IEEE CRC32 with the sign bit cleared.

/// The masked CRC32 RocketMQ stores as BODYCRC (and uses for register bodies).
#[inline]
pub fn masked_crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes) & 0x7FFF_FFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // crc32("123456789") = 0xCBF43926; masked drops the top bit.
        assert_eq!(masked_crc32(b"123456789"), 0xCBF4_3926 & 0x7FFF_FFFF);
        assert_eq!(masked_crc32(b""), 0);
    }
}
