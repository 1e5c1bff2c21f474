//! This host's own address on a network, as the kernel's routing table picks it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};

/// The source address this host uses to reach `peer`: its own address on the network that
/// routes there. Nothing is sent: connecting a UDP socket only selects the route. A node or
/// control plane in a container learns its address on the container network this way.
pub fn route_source(peer: IpAddr) -> std::io::Result<IpAddr> {
    let unspecified = match peer {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let socket = UdpSocket::bind((unspecified, 0))?;
    // Port 9 (discard): any port will do, the socket never sends.
    socket.connect((peer, 9))?;
    Ok(socket.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_route_to_loopback_starts_on_loopback() {
        let source = route_source(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        assert!(source.is_loopback(), "{source}");
    }
}
