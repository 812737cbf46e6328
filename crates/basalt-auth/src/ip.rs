//! Source-address rules: ACL 2.0's `sourceIps` (an address or a CIDR
//! block) and ACL 1.0's `whiteRemoteAddress` forms (`*`, `192.168.0.*`,
//! `192.168.0.1-100`, `192.168.0.{1,2,3}`, comma lists, CIDR).

use std::net::IpAddr;

use crate::AuthError;

/// One parsed address rule. Invariant: built only by [`IpRule::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpRule {
    /// Every address.
    All,
    /// One address, or a CIDR block (address, prefix length).
    Cidr(IpAddr, u8),
    /// IPv4 segments, each an inclusive range.
    Segments([(u8, u8); 4]),
    /// Any of several rules (comma list, `{a,b}`).
    AnyOf(Vec<IpRule>),
}

impl IpRule {
    /// Parses one rule; an unreadable rule is an error, never "match all".
    pub fn parse(s: &str) -> Result<IpRule, AuthError> {
        let s = s.trim();
        let bad = || AuthError::Invalid(format!("address rule {s:?} is not understood"));
        if s == "*" || s == "*.*.*.*" {
            return Ok(IpRule::All);
        }
        if let Some((head, tail)) = s.split_once('{') {
            let list = tail.strip_suffix('}').ok_or_else(bad)?;
            let rules = list
                .split(',')
                .map(|x| IpRule::parse(&format!("{head}{}", x.trim())))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(IpRule::AnyOf(rules));
        }
        if s.contains(',') {
            let rules = s
                .split(',')
                .filter(|x| !x.trim().is_empty())
                .map(IpRule::parse)
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(IpRule::AnyOf(rules));
        }
        if let Some((addr, len)) = s.split_once('/') {
            let addr: IpAddr = addr.parse().map_err(|_| bad())?;
            let len: u8 = len.parse().map_err(|_| bad())?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            if len > max {
                return Err(bad());
            }
            return Ok(IpRule::Cidr(addr, len));
        }
        if let Ok(addr) = s.parse::<IpAddr>() {
            let len = if addr.is_ipv4() { 32 } else { 128 };
            return Ok(IpRule::Cidr(addr, len));
        }
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() != 4 {
            return Err(bad());
        }
        let mut segs = [(0u8, 255u8); 4];
        for (i, p) in parts.iter().enumerate() {
            segs[i] = match *p {
                "*" => (0, 255),
                p => match p.split_once('-') {
                    Some((a, b)) => {
                        let (a, b) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                        if a > b {
                            return Err(bad());
                        }
                        (a, b)
                    }
                    None => {
                        let v = p.parse().map_err(|_| bad())?;
                        (v, v)
                    }
                },
            };
        }
        Ok(IpRule::Segments(segs))
    }

    /// Whether `ip` is covered.
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match self {
            IpRule::All => true,
            IpRule::AnyOf(rules) => rules.iter().any(|r| r.matches(ip)),
            IpRule::Segments(segs) => match ip {
                IpAddr::V4(v4) => v4
                    .octets()
                    .iter()
                    .zip(segs)
                    .all(|(o, (a, b))| a <= o && o <= b),
                IpAddr::V6(_) => false,
            },
            IpRule::Cidr(net, len) => match (net, ip) {
                (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), *len),
                (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), *len),
                _ => false,
            },
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let bits = bits as usize;
    let (whole, rest) = (bits / 8, bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[whole] & mask == b[whole] & mask
}

/// The address part of `host:port` (or `[v6]:port`), if it parses.
pub fn host_of(remote: &str) -> Option<IpAddr> {
    if let Ok(sa) = remote.parse::<std::net::SocketAddr>() {
        return Some(sa.ip());
    }
    remote.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rule: &str, ip: &str) -> bool {
        IpRule::parse(rule).unwrap().matches(ip.parse().unwrap())
    }

    #[test]
    fn forms() {
        assert!(m("*", "10.1.2.3"));
        assert!(m("192.168.0.*", "192.168.0.77"));
        assert!(!m("192.168.0.*", "192.168.1.77"));
        assert!(m("192.168.0.1-100", "192.168.0.100"));
        assert!(!m("192.168.0.1-100", "192.168.0.101"));
        assert!(m("192.168.0.{1,2,3}", "192.168.0.2"));
        assert!(!m("192.168.0.{1,2,3}", "192.168.0.4"));
        assert!(m("10.0.0.0/8,127.0.0.1", "127.0.0.1"));
        assert!(m("10.0.0.0/8", "10.200.0.1"));
        assert!(!m("10.0.0.0/8", "11.0.0.1"));
        assert!(m("127.0.0.1", "::ffff:127.0.0.1"));
        assert!(m("::1", "::1"));
        assert!(IpRule::parse("300.1.1.1").is_err());
        assert!(IpRule::parse("abc").is_err());
        assert!(IpRule::parse("10.0.0.0/33").is_err());
    }

    #[test]
    fn host_port() {
        assert_eq!(host_of("127.0.0.1:999"), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(host_of("[::1]:999"), Some("::1".parse().unwrap()));
    }
}
