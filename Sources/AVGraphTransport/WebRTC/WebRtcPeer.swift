import AVGraph

/// One WebRTC peer on avgraph's shared UDP port, from its first ICE check to its media: the
/// datagrams it sends are told apart by their first byte (RFC 7983: STUN 0-3, DTLS 20-63,
/// SRTP/SRTCP 128-191), answered by the ICE-lite responder, the DTLS handshake (avgraph the
/// server) and then SRTP. DTLS and media are taken only from an address the peer proved with
/// a valid check (the password of the answer), so a stranger who learns the port cannot speak
/// for it. Sans-IO: a datagram and its source in, what to send and what arrived out.
package final class WebRtcPeer {
    package struct Address: Hashable, Sendable {
        package var host: [UInt8]
        package var port: UInt16
        package init(host: [UInt8], port: UInt16) {
            self.host = host
            self.port = port
        }
    }

    package enum Event: Equatable {
        /// Send these bytes to the datagram's source.
        case send([UInt8])
        /// DTLS is done: media may flow (the SRTP profile agreed).
        case connected(DtlsSession.SrtpProfile)
        case rtp(RtpPacket)
        /// An SRTCP packet, decrypted (sender reports, feedback).
        case rtcp([UInt8])
        /// Dropped and counted: why.
        case dropped(String)
        /// The handshake failed: the peer is done.
        case failed(String)
    }

    private let ice: IceLiteResponder
    private let dtls: DtlsSession
    private var inbound: SrtpSession?
    package private(set) var outbound: SrtpSession?
    /// Addresses that passed an ICE check, and the one the peer nominated (media go back there).
    package private(set) var proven: Set<Address> = []
    package private(set) var nominated: Address?
    package private(set) var connected = false

    package convenience init(answer: WebRtcAnswer, local: WebRtcAnswer.Local, certificate: DtlsCertificate) throws {
        try self.init(remoteFingerprint: answer.remoteFingerprint, role: answer.dtlsRole, local: local, certificate: certificate)
    }

    package init(remoteFingerprint: String, role: DtlsSession.Role, local: WebRtcAnswer.Local, certificate: DtlsCertificate) throws {
        ice = IceLiteResponder(localUfrag: local.ufrag, localPassword: local.password)
        dtls = try DtlsSession(certificate: certificate, remoteFingerprint: remoteFingerprint, role: role)
    }

    package func receive(_ datagram: [UInt8], from source: Address) -> [Event] {
        guard let first = datagram.first else { return [.dropped("empty")] }
        switch first {
        case 0...3:
            switch ice.respond(to: datagram, address: source.host, port: source.port) {
            case .answer(let response, let nominating):
                proven.insert(source)
                if nominating || nominated == nil { nominated = source }
                // As the DTLS client, the handshake starts once the peer's address is proven.
                return [.send(response)] + dtls.start().map(Event.send)
            case .refuse(let response, let code): return [.send(response), .dropped("an ICE check refused (\(code))")]
            case .drop(let why): return [.dropped(why)]
            }
        case 20...63:
            guard proven.contains(source) else { return [.dropped("DTLS from an address no ICE check proved")] }
            let wasConnected = connected
            var events = dtls.receive(datagram).map(Event.send)
            switch dtls.state {
            case .handshaking: break
            case .failed(let why): events.append(.failed(why))
            case .connected(let keys):
                guard !wasConnected else { break }
                // The peer sends with its side's keys: the client's when avgraph is the server.
                let (theirs, ours) = dtls.role == .server ? ((keys.clientKey, keys.clientSalt), (keys.serverKey, keys.serverSalt))
                                                          : ((keys.serverKey, keys.serverSalt), (keys.clientKey, keys.clientSalt))
                do {
                    inbound = try SrtpSession(profile: keys.profile, key: theirs.0, salt: theirs.1, direction: .inbound)
                    outbound = try SrtpSession(profile: keys.profile, key: ours.0, salt: ours.1, direction: .outbound)
                    connected = true
                    events.append(.connected(keys.profile))
                } catch {
                    events.append(.failed("\(error)"))
                }
            }
            return events
        case 128...191:
            guard proven.contains(source), let inbound else { return [.dropped("media before the handshake, or from an unproven address")] }
            var packet = datagram
            // RFC 5761: with rtcp-mux, RTCP's packet types 192-223 read as payload types 64-95.
            let isRtcp = datagram.count >= 2 && (192...223).contains(datagram[1])
            do {
                if isRtcp {
                    try inbound.unprotectRtcp(&packet)
                    return [.rtcp(packet)]
                }
                try inbound.unprotect(&packet)
                return [.rtp(try RtpPacket.parse(packet))]
            } catch {
                return [.dropped("\(error)")]
            }
        default:
            return [.dropped("not STUN, DTLS or SRTP (first byte \(first))")]
        }
    }

    /// Seconds until the DTLS handshake wants `retransmit()` (nil: nothing pending).
    package var retransmitIn: Double? { dtls.retransmitIn }
    package func retransmit() -> [[UInt8]] { dtls.handleTimeout() }
}
