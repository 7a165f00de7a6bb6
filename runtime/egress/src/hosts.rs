//! Host entries (a guest's `allowed_hosts`, a sandboxed kernel's `[kernel_sandbox] hosts`) and
//! which addresses count as internal (refused unless listed literally).

use std::net::IpAddr;

/// One host entry, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// `http` or `https` when the entry names one; else both.
    scheme: Option<String>,
    /// Lower-case; for a wildcard, the suffix after `*.`.
    host: String,
    wildcard: bool,
    /// Unset: the scheme's default port only.
    port: Option<u16>,
}

impl HostRule {
    /// An extension's `allowed_hosts` entry.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_in("allowed_hosts", text)
    }

    /// An entry of the setting named `setting`, which the error names.
    pub fn parse_in(setting: &str, text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "{setting} entry '{text}' {why}; write a host name (api.example.org), a \
                 wildcard (*.example.org) or an address, optionally with :PORT and an http:// or \
                 https:// in front"
            )
        };
        let (scheme, rest) = match text.split_once("://") {
            Some((scheme @ ("http" | "https"), rest)) => (Some(scheme.to_owned()), rest),
            Some(_) => return Err(bad("names a scheme other than http or https")),
            None => (None, text),
        };
        if rest.contains(['/', '?', '#', '@']) || rest.trim().is_empty() {
            return Err(bad("is not a bare host"));
        }
        let (host, port) = split_host_port(rest).ok_or_else(|| bad("has a bad port"))?;
        let (wildcard, host) = match host.strip_prefix("*.") {
            Some(suffix) => (true, suffix),
            None => (false, host),
        };
        if host.is_empty() || host.contains('*') {
            return Err(bad("has a '*' that is not a leading '*.'"));
        }
        Ok(HostRule {
            scheme,
            host: host.to_ascii_lowercase(),
            wildcard,
            port,
        })
    }

    pub fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        let scheme_ok = self.scheme.as_deref().is_none_or(|s| s == scheme);
        let host_ok = if self.wildcard {
            host.strip_suffix(&self.host)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
        } else {
            host == self.host
        };
        let port_ok = match self.port {
            Some(listed) => listed == port,
            None => port == default_port(scheme),
        };
        scheme_ok && host_ok && port_ok
    }

    /// Whether a host matched by this entry may be reached at `ip`: a public address always; a
    /// loopback or private one only when the entry names that very address (so a name that
    /// resolves inside the network reaches nothing the operator did not list).
    pub fn reaches(&self, ip: IpAddr) -> bool {
        !is_internal(ip) || self.literal() == Some(ip)
    }

    /// The address this entry names literally (`127.0.0.1:8123`, `[::1]`), if it names one.
    pub fn literal(&self) -> Option<IpAddr> {
        (!self.wildcard)
            .then(|| self.host.trim_matches(['[', ']']).parse().ok())
            .flatten()
    }
}

pub fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`.
fn split_host_port(text: &str) -> Option<(&str, Option<u16>)> {
    if text.starts_with('[') {
        let end = text.find(']')?;
        let (host, rest) = text.split_at(end + 1);
        return match rest.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok()?))),
            None if rest.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match text.rsplit_once(':') {
        Some((host, port)) => Some((host, Some(port.parse().ok()?))),
        None => Some((text, None)),
    }
}

/// Loopback, private, link-local, shared, unspecified, multicast and other addresses that are
/// not the public internet.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let segments = v6.segments();
            let first = segments[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                // Deprecated site-local fec0::/10.
                || (first & 0xffc0) == 0xfec0
                // Addresses that carry or reach an IPv4 one through a translator, any of which
                // can land on an internal address: IPv4-compatible ::a.b.c.d, NAT64
                // (64:ff9b::/96 and the local-use 64:ff9b:1::/48), 6to4 (2002::/16) and
                // Teredo (2001::/32). Refused whole: an allowed public host has a plain address.
                || segments[..6] == [0; 6]
                || (first == 0x64 && segments[1] == 0xff9b)
                || first == 0x2002
                || (first == 0x2001 && segments[1] == 0)
        }
    }
}
