import AVGraphTransport
import Foundation
import XCTest

/// WebRTC's DTLS, avgraph as the server, against a client nobody here wrote: OpenSSL's own
/// `s_client -dtls1_2` over a real UDP socket. The SRTP keys avgraph exports must be the bytes
/// s_client exports (RFC 5764's label), each side must see the other's certificate as its
/// fingerprint says, and a certificate that is not the offer's is refused.
final class DtlsTests: XCTestCase {
    struct Handshake {
        var state: DtlsSession.State
        var clientOutput: String
        var datagrams: Int
    }

    /// A client certificate and key (PEM) and its SHA-256 fingerprint as the SDP writes it.
    static func clientCertificate(_ dir: String) throws -> (cert: String, key: String, fingerprint: String) {
        let cert = dir + "/client.pem", key = dir + "/client.key"
        _ = try CLI.shell(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                           "-subj", "/CN=peer", "-keyout", key, "-out", cert])
        let line = try CLI.shell(["openssl", "x509", "-in", cert, "-noout", "-fingerprint", "-sha256"])
        return (cert, key, String(line.split(separator: "=").last ?? "").trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Runs s_client against a session on a UDP port until the handshake ends either way.
    static func handshake(_ session: DtlsSession, profile: String, length: Int, client: (cert: String, key: String, fingerprint: String)) throws -> Handshake {
        let (fd, port) = SrtpTests.udp(timeout: 100_000)
        defer { close(fd) }

        let p = Process(), input = Pipe(), output = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["openssl", "s_client", "-dtls1_2", "-connect", "127.0.0.1:\(port)", "-use_srtp", profile,
                       "-keymatexport", "EXTRACTOR-dtls_srtp", "-keymatexportlen", String(length), "-cert", client.cert, "-key", client.key, "-showcerts"]
        p.standardInput = input
        p.standardOutput = output
        p.standardError = output
        let text = CLI.DataBox()
        output.fileHandleForReading.readabilityHandler = { h in text.append(h.availableData) }
        try p.run()
        var datagrams = 0
        let end = Date().addingTimeInterval(10)
        var buffer = [UInt8](repeating: 0, count: 4096)
        var peer = sockaddr_storage()
        while Date() < end, session.state == .handshaking {
            var peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let n = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &peerLength) } }
            let replies = n > 0 ? session.receive(Array(buffer.prefix(n))) : session.handleTimeout()
            datagrams += n > 0 ? 1 : 0
            for r in replies {
                _ = withUnsafePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, r, r.count, 0, $0, peerLength) } }
            }
        }
        // s_client prints the session once its handshake is done; then the end of its input closes it.
        let printed = Date().addingTimeInterval(3)
        while Date() < printed && !text.string.contains("Keying material:") && session.state != .handshaking { usleep(20_000) }
        try input.fileHandleForWriting.close()
        let stop = Date().addingTimeInterval(3)
        while p.isRunning && Date() < stop { usleep(20_000) }
        if p.isRunning { p.terminate() }
        p.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        return Handshake(state: session.state, clientOutput: text.string, datagrams: datagrams)
    }

    /// The hex s_client prints after "Keying material:".
    static func exported(_ output: String) -> [UInt8]? {
        guard let range = output.range(of: "Keying material: ") else { return nil }
        let hex = output[range.upperBound...].prefix { $0.isHexDigit }
        return stride(from: 0, to: hex.count - 1, by: 2).compactMap { i in
            UInt8(hex[hex.index(hex.startIndex, offsetBy: i)..<hex.index(hex.startIndex, offsetBy: i + 2)], radix: 16)
        }
    }

    func testSrtpKeysAreTheOnesOpenSslsClientExportsForBothProfiles() throws {
        let dir = CLI.scratch()
        let client = try Self.clientCertificate(dir)
        let certificate = try DtlsCertificate()
        for (profile, length, expected) in [("SRTP_AES128_CM_SHA1_80", 60, DtlsSession.SrtpProfile.aes128CmHmacSha1_80),
                                            ("SRTP_AEAD_AES_128_GCM", 56, .aeadAes128Gcm)] {
            let session = try DtlsSession(certificate: certificate, remoteFingerprint: client.fingerprint)
            let h = try Self.handshake(session, profile: profile, length: length, client: client)
            guard case .connected(let keys) = h.state else { return XCTFail("\(profile): \(h.state)\n\(h.clientOutput)") }
            XCTAssertEqual(keys.profile, expected)
            XCTAssertTrue(h.clientOutput.contains("SRTP Extension negotiated, profile=\(profile)"), h.clientOutput)
            let material = keys.clientKey + keys.serverKey + keys.clientSalt + keys.serverSalt
            XCTAssertEqual(material.count, length)
            XCTAssertEqual(Self.exported(h.clientOutput), material, "\(profile): the keys are s_client's own export")
            // The server's certificate, as s_client received it, has the fingerprint the answer will carry.
            let pem = dir + "/server.pem"
            if let begin = h.clientOutput.range(of: "-----BEGIN CERTIFICATE-----"), let endMark = h.clientOutput.range(of: "-----END CERTIFICATE-----") {
                CLI.write(String(h.clientOutput[begin.lowerBound..<endMark.upperBound]) + "\n", to: pem)
            }
            let seen = try CLI.shell(["openssl", "x509", "-in", pem, "-noout", "-fingerprint", "-sha256"])
            XCTAssertTrue(seen.contains(certificate.fingerprint), "the server's fingerprint \(certificate.fingerprint); s_client saw \(seen)")
            print("dtls \(profile): \(h.datagrams) datagrams from s_client, \(length) bytes of keying material alike")
        }
    }

    func testACertificateNotTheOffersIsRefused() throws {
        let dir = CLI.scratch()
        let client = try Self.clientCertificate(dir)
        let session = try DtlsSession(certificate: try DtlsCertificate(), remoteFingerprint: String(repeating: "AB:", count: 31) + "AB")
        let h = try Self.handshake(session, profile: "SRTP_AES128_CM_SHA1_80", length: 60, client: client)
        XCTAssertEqual(h.state, .failed("the peer's certificate is not the one its offer's fingerprint names"))
        XCTAssertNotEqual(client.fingerprint, String(repeating: "AB:", count: 31) + "AB")
    }

    func testRecordsAreCutIntoDatagramsAtTheirBoundaries() {
        func record(_ length: Int, _ fill: UInt8) -> [UInt8] { [22, 0xFE, 0xFD] + [UInt8](repeating: 0, count: 8) + [UInt8(length >> 8), UInt8(length & 0xFF)] + [UInt8](repeating: fill, count: length) }
        let flight = record(500, 1) + record(600, 2) + record(100, 3) + record(1100, 4)
        let datagrams = DtlsSession.datagrams(of: flight, mtu: 1200)
        XCTAssertEqual(datagrams.map(\.count), [513 + 613, 113, 1113])
        XCTAssertEqual(datagrams.flatMap { $0 }, flight)
    }
}
