/// The server side of ICE-lite (RFC 8445 section 2.5): it answers the binding requests a peer
/// makes with the credentials of the session's SDP (USERNAME `ours:theirs`, MESSAGE-INTEGRITY
/// keyed by our password) and learns from them the address the peer's media come from. It
/// sends no checks of its own and is always the controlled side. Sans-IO: a datagram and its
/// source in, the datagram to send back (if any) out.
package struct IceLiteResponder: Sendable {
    package let localUfrag: String
    package let localPassword: String

    package enum Outcome: Equatable {
        /// A valid check: send `response`; `nominated` when the peer chose this address (USE-CANDIDATE).
        case answer(response: [UInt8], nominated: Bool)
        /// A request refused with an error response (to send back): bad credentials, a role conflict.
        case refuse(response: [UInt8], code: Int)
        /// Not answered at all: not STUN, not a request, a failed fingerprint.
        case drop(String)
    }

    package init(localUfrag: String, localPassword: String) {
        self.localUfrag = localUfrag
        self.localPassword = localPassword
    }

    /// `address`: 4 (IPv4) or 16 (IPv6) bytes of the datagram's source, with its `port`.
    package func respond(to datagram: [UInt8], address: [UInt8], port: UInt16) -> Outcome {
        let request: StunMessage
        do { request = try StunMessage.parse(datagram) } catch { return .drop("not a STUN message (\(error))") }
        guard request.method == StunMessage.binding, request.kind == .request else { return .drop("not a binding request") }
        // RFC 8445 7.2.2: an ICE check carries a FINGERPRINT; one that does not match is not ours to answer.
        guard request.hasFingerprint(datagram) else { return .drop("no valid FINGERPRINT") }
        guard let user = request.first(StunAttribute.username)?.text, request.first(StunAttribute.messageIntegrity) != nil else {
            return refusal(to: request, 400, "Bad Request")
        }
        guard user.split(separator: ":", maxSplits: 1).first.map(String.init) == localUfrag,
              request.hasIntegrity(datagram, key: Array(localPassword.utf8)) else {
            return refusal(to: request, 401, "Unauthenticated")
        }
        // A lite agent is controlled: a peer that says it is controlled too has it wrong (7.3.1.1).
        if request.first(StunAttribute.iceControlled) != nil { return refusal(to: request, 487, "Role Conflict") }
        let response = StunMessage(kind: .success, transactionID: request.transactionID, attributes: [
            .xorMapped(address: address, port: port, transactionID: request.transactionID),
        ])
        return .answer(response: response.encoded(integrityKey: Array(localPassword.utf8), fingerprint: true),
                       nominated: request.first(StunAttribute.useCandidate) != nil)
    }

    private func refusal(to request: StunMessage, _ code: Int, _ reason: String) -> Outcome {
        let response = StunMessage(kind: .error, transactionID: request.transactionID, attributes: [.error(code, reason)])
        return .refuse(response: response.encoded(fingerprint: true), code: code)
    }
}
