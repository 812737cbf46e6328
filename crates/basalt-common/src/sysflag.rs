//! `MessageSysFlag` bits: the int stored as SYSFLAG in every record (docs/protocol.md#sys-flags).

pub const COMPRESSED: i32 = 0x1;
pub const MULTI_TAGS: i32 = 0x2;
pub const TRANSACTION_NOT_TYPE: i32 = 0;
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;
pub const BORNHOST_V6: i32 = 0x1 << 4;
pub const STOREHOST_V6: i32 = 0x1 << 5;
pub const NEED_UNWRAP: i32 = 0x1 << 6;
pub const INNER_BATCH: i32 = 0x1 << 7;
pub const COMPRESSION_TYPE_MASK: i32 = 0x7 << 8;

/// The transaction type bits of a sys flag.
#[inline]
pub fn transaction_type(sys_flag: i32) -> i32 {
    sys_flag & TRANSACTION_ROLLBACK_TYPE
}

/// Whether a record with this sys flag is dispatched to a ConsumeQueue: normal
/// and committed-transaction records are; prepared and rolled-back ones are not.
#[inline]
pub fn is_consumable(sys_flag: i32) -> bool {
    matches!(
        transaction_type(sys_flag),
        TRANSACTION_NOT_TYPE | TRANSACTION_COMMIT_TYPE
    )
}

#[inline]
pub fn born_host_v6(sys_flag: i32) -> bool {
    sys_flag & BORNHOST_V6 != 0
}

#[inline]
pub fn store_host_v6(sys_flag: i32) -> bool {
    sys_flag & STOREHOST_V6 != 0
}
