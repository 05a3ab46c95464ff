//! Digests, encodings and network maths: sha1, fnv64a, fromJson, Terraform's `cidrsubnet`.

use super::*;

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

pub(super) fn helper_sha1(args: &[Value]) -> Result<Value, String> {
    Ok(Value::String(hex(&sha1::Sha1::digest(text_of(&args[0])?.as_bytes()))))
}

/// 64-bit FNV-1a of the text's UTF-8 bytes, as 16 hex digits.
pub(super) fn helper_fnv64a(args: &[Value]) -> Result<Value, String> {
    use std::hash::Hasher as _;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(text_of(&args[0])?.as_bytes());
    Ok(Value::String(format!("{:016x}", hasher.finish())))
}

/// JSON text parsed to its value (serde_json bounds its nesting at 128).
pub(super) fn helper_from_json(args: &[Value]) -> Result<Value, String> {
    let text = args[0]
        .as_str()
        .ok_or_else(|| format!("expects JSON text, got {}", kind_of(&args[0])))?;
    serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))
}

/// `cidrSubnet prefix newbits netnum`, as Terraform's `cidrsubnet`: the `netnum`-th subnet of `prefix` whose
/// prefix is `newbits` longer. IPv4 and IPv6; the prefix's host bits are ignored (`10.0.0.5/16` is `10.0.0.0/16`).
pub(super) fn helper_cidr_subnet(args: &[Value]) -> Result<Value, String> {
    let prefix = args[0].as_str().ok_or_else(|| {
        format!(
            "the prefix must be text such as \"10.0.0.0/16\", got {}",
            kind_of(&args[0])
        )
    })?;
    let invalid = || {
        format!(
            "invalid CIDR prefix {}",
            serde_json::to_string(prefix).unwrap_or_default()
        )
    };
    let (address, length) = prefix.split_once('/').ok_or_else(invalid)?;
    let length: u32 = match length.len() {
        1..=3 if length.bytes().all(|b| b.is_ascii_digit()) => length.parse().map_err(|_| invalid())?,
        _ => return Err(invalid()),
    };
    let (bits, base, v4) = if let Ok(v4) = address.parse::<std::net::Ipv4Addr>() {
        (32u32, u128::from(u32::from(v4)), true)
    } else if let Ok(v6) = address.parse::<std::net::Ipv6Addr>() {
        (128u32, u128::from(v6), false)
    } else {
        return Err(invalid());
    };
    if length > bits {
        return Err(invalid());
    }
    let newbits = match args[1].as_u64() {
        Some(newbits) => newbits,
        None => {
            return Err(format!(
                "newbits must be a non-negative integer, got {}",
                to_text(&args[1])?
            ));
        }
    };
    let netnum = match args[2].as_u64() {
        Some(netnum) => netnum,
        None => {
            return Err(format!(
                "netnum must be a non-negative integer, got {}",
                to_text(&args[2])?
            ));
        }
    };
    let new_length = u64::from(length) + newbits;
    if new_length > u64::from(bits) {
        return Err(format!(
            "insufficient address space to extend prefix of {length} by {newbits}"
        ));
    }
    // newbits ≤ 128 here; a netnum (< 2^64) always fits 64 or more new bits.
    if newbits < 64 && netnum >> newbits != 0 {
        return Err(format!(
            "prefix extension of {newbits} does not accommodate a subnet numbered {netnum}"
        ));
    }
    let host_bits = bits - new_length as u32;
    let network = base & !(low_bits(bits - length));
    let subnet = network
        | if netnum == 0 {
            0
        } else {
            u128::from(netnum) << host_bits
        };
    let address = if v4 {
        std::net::Ipv4Addr::from(subnet as u32).to_string()
    } else {
        std::net::Ipv6Addr::from(subnet).to_string()
    };
    Ok(Value::String(format!("{address}/{new_length}")))
}

/// A mask of the `count` lowest bits (`count` ≤ 128).
pub(super) fn low_bits(count: u32) -> u128 {
    if count >= 128 { u128::MAX } else { (1u128 << count) - 1 }
}
