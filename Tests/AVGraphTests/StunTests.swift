import AVGraphTransport
import XCTest

/// STUN against its published test vectors (RFC 5769) and the ICE-lite answers built on it.
final class StunTests: XCTestCase {
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.filter(\.isHexDigit))
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    // RFC 5769 2.1-2.3 (the RFC's own bytes; its padding is spaces).
    static let password = Array("VOkJxbRl1RmTxUk/WvJxBt".utf8)
    static let transaction = bytes("b7e7a701 bc34d686 fa87dfae")
    static let request = bytes("""
        00010058 2112a442 b7e7a701 bc34d686 fa87dfae 80220010 5354554e 20746573 7420636c 69656e74
        00240004 6e0001ff 80290008 932ff9b1 51263b36 00060009 6576746a 3a683676 59202020
        00080014 9aeaa70c bfd8cb56 781ef2b5 b2d3f249 c1b571a2 80280004 e57a3bcf
        """)
    static let ipv4Response = bytes("""
        0101003c 2112a442 b7e7a701 bc34d686 fa87dfae 8022000b 74657374 20766563 746f7220
        00200008 0001a147 e112a643 00080014 2b91f599 fd9e90c3 8c7489f9 2af9ba53 f06be7d7
        80280004 c07d4c96
        """)
    static let ipv6Response = bytes("""
        01010048 2112a442 b7e7a701 bc34d686 fa87dfae 8022000b 74657374 20766563 746f7220
        00200014 0002a147 0113a9fa a5d3f179 bc25f4b5 bed2b9d9 00080014 a382954e 4be67bf1
        1784c97c 8292c275 bfe3ed41 80280004 c8fb0b4c
        """)

    func testTheRfc5769RequestParsesWithItsIntegrityAndFingerprint() throws {
        let m = try StunMessage.parse(Self.request)
        XCTAssertEqual(m.method, StunMessage.binding)
        XCTAssertEqual(m.kind, .request)
        XCTAssertEqual(m.transactionID, Self.transaction)
        XCTAssertEqual(m.first(StunAttribute.software)?.text, "STUN test client")
        XCTAssertEqual(m.first(StunAttribute.username)?.text, "evtj:h6vY")
        XCTAssertEqual(m.first(StunAttribute.priority)?.value, [0x6e, 0x00, 0x01, 0xff])
        XCTAssertTrue(m.hasIntegrity(Self.request, key: Self.password))
        XCTAssertTrue(m.hasFingerprint(Self.request))
        XCTAssertFalse(m.hasIntegrity(Self.request, key: Array("VOkJxbRl1RmTxUk/WvJxBu".utf8)), "another password")
        var flipped = Self.request
        flipped[30] ^= 1
        XCTAssertFalse(try StunMessage.parse(flipped).hasIntegrity(flipped, key: Self.password), "a changed byte")
        XCTAssertFalse(try StunMessage.parse(flipped).hasFingerprint(flipped))
    }

    func testTheRfc5769ResponsesAreReadAndWrittenByteForByte() throws {
        for (datagram, address) in [(Self.ipv4Response, Self.bytes("c0000201")), (Self.ipv6Response, Self.bytes("20010db8 12345678 00112233 44556677"))] {
            let m = try StunMessage.parse(datagram)
            XCTAssertEqual(m.kind, .success)
            XCTAssertTrue(m.hasIntegrity(datagram, key: Self.password))
            XCTAssertTrue(m.hasFingerprint(datagram))
            let mapped = try XCTUnwrap(m.first(StunAttribute.xorMappedAddress)?.xorMappedAddress(transactionID: m.transactionID))
            XCTAssertEqual(mapped.address, address)
            XCTAssertEqual(mapped.port, 32853)
            // Made anew from its parts (padding as the RFC's): the same bytes, MAC and CRC included.
            let made = StunMessage(kind: .success, transactionID: Self.transaction, attributes: [
                .text(StunAttribute.software, "test vector"), .xorMapped(address: address, port: 32853, transactionID: Self.transaction),
            ]).encoded(integrityKey: Self.password, fingerprint: true, padding: 0x20)
            XCTAssertEqual(made, datagram)
        }
    }

    func testMalformedMessagesAreRefusedNotTrusted() {
        XCTAssertThrowsError(try StunMessage.parse(Array(Self.request.prefix(19))))
        var long = Self.request
        long[3] = 0x5C  // a length past the datagram
        XCTAssertThrowsError(try StunMessage.parse(long))
        var attribute = Self.request
        attribute[23] = 0xFF  // SOFTWARE's length past the end
        XCTAssertThrowsError(try StunMessage.parse(attribute))
        var cookie = Self.request
        cookie[5] = 0
        XCTAssertThrowsError(try StunMessage.parse(cookie))
        XCTAssertFalse(StunMessage.looksLikeStun([0x80] + Array(Self.request.dropFirst())), "RTP's first byte")
        XCTAssertTrue(StunMessage.looksLikeStun(Self.request))
    }

    /// A browser's check as RFC 8445 makes it: USERNAME ours:theirs, MI with our password, FINGERPRINT.
    private func check(user: String, password: String, controlled: Bool = false, nominate: Bool = true) -> [UInt8] {
        var attributes: [StunAttribute] = [.text(StunAttribute.username, user), StunAttribute(type: StunAttribute.priority, value: [0x6e, 0, 1, 0xff]),
                                           StunAttribute(type: controlled ? StunAttribute.iceControlled : StunAttribute.iceControlling, value: [1, 2, 3, 4, 5, 6, 7, 8])]
        if nominate { attributes.append(StunAttribute(type: StunAttribute.useCandidate, value: [])) }
        return StunMessage(kind: .request, transactionID: Array(0..<12), attributes: attributes)
            .encoded(integrityKey: Array(password.utf8), fingerprint: true)
    }

    func testIceLiteAnswersItsOwnCredentialsAndRefusesOthers() throws {
        let ice = IceLiteResponder(localUfrag: "avgr", localPassword: "0123456789abcdefghijkl")
        let peer: [UInt8] = [127, 0, 0, 1]
        guard case .answer(let response, let nominated) = ice.respond(to: check(user: "avgr:brow", password: "0123456789abcdefghijkl"), address: peer, port: 50000) else {
            return XCTFail("a valid check is answered")
        }
        XCTAssertTrue(nominated)
        let m = try StunMessage.parse(response)
        XCTAssertEqual(m.kind, .success)
        XCTAssertEqual(m.transactionID, Array(0..<12))
        XCTAssertTrue(m.hasIntegrity(response, key: Array("0123456789abcdefghijkl".utf8)))
        XCTAssertTrue(m.hasFingerprint(response))
        XCTAssertEqual(m.first(StunAttribute.xorMappedAddress)?.xorMappedAddress(transactionID: m.transactionID)?.address, peer)
        XCTAssertEqual(m.first(StunAttribute.xorMappedAddress)?.xorMappedAddress(transactionID: m.transactionID)?.port, 50000)

        func code(_ o: IceLiteResponder.Outcome) -> Int? { if case .refuse(_, let c) = o { c } else { nil } }
        XCTAssertEqual(code(ice.respond(to: check(user: "avgr:brow", password: "wrong-password-000000"), address: peer, port: 1)), 401)
        XCTAssertEqual(code(ice.respond(to: check(user: "other:brow", password: "0123456789abcdefghijkl"), address: peer, port: 1)), 401)
        XCTAssertEqual(code(ice.respond(to: check(user: "avgr:brow", password: "0123456789abcdefghijkl", controlled: true), address: peer, port: 1)), 487)
        var noFingerprint = check(user: "avgr:brow", password: "0123456789abcdefghijkl")
        noFingerprint[noFingerprint.count - 1] ^= 0xFF
        XCTAssertEqual(ice.respond(to: noFingerprint, address: peer, port: 1), .drop("no valid FINGERPRINT"))
        XCTAssertEqual(ice.respond(to: [0x80, 0x60] + [UInt8](repeating: 0, count: 30), address: peer, port: 1),
                       .drop("not a STUN message (notStun)"))
    }
}
