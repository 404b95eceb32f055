import AVGraph
import AVGraphTransport
import AVGraphNodes
import XCTest

/// The `srt` sink's URL options, as ffmpeg's srt:// URLs write them (libavformat's names and
/// units), turned into libsrt socket options before anything connects.
final class SrtCallerURLTests: XCTestCase {
    private func described(_ url: SrtCallerURL) -> [String] {
        url.options.map { o in
            switch o.value {
            case .int32(let n): "\(o.name)=\(n)"
            case .int64(let n): "\(o.name)=\(n)L"
            case .string(let s): "\(o.name)='\(s)'"
            case .linger(let s): "\(o.name)=\(s)s"
            }
        }
    }

    func testHostPortAndTheOptionsUsersWrite() throws {
        let url = try SrtCallerURL("srt://127.0.0.1:9000?mode=caller&passphrase=phone-secret-1234&pbkeylen=16&latency=200000&streamid=publish:cam")
        XCTAssertEqual(url.host, "127.0.0.1")
        XCTAssertEqual(url.port, 9000)
        // latency in microseconds as libavformat takes it, milliseconds for libsrt.
        XCTAssertEqual(described(url), ["passphrase='phone-secret-1234'", "pbkeylen=16", "latency=200", "streamid='publish:cam'"])
        XCTAssertNil(url.timeout)
        XCTAssertNil(url.connectTimeout)
    }

    func testAccessControlStreamIdKeepsItsHashAndPercentEscapesAreDecoded() throws {
        XCTAssertEqual(described(try SrtCallerURL("srt://h:1?streamid=#!::r=live/phone,m=publish")), ["streamid='#!::r=live/phone,m=publish'"])
        XCTAssertEqual(described(try SrtCallerURL("srt://h:1?streamid=%23!::r=live/a%26b")), ["streamid='#!::r=live/a&b'"])
    }

    func testTheSinksDefaultsGiveWayToTheURL() throws {
        XCTAssertEqual(described(try SrtCallerURL("srt://h:1", defaults: ["linger": "1"])), ["linger=1s"])
        XCTAssertEqual(described(try SrtCallerURL("srt://h:1?linger=3", defaults: ["linger": "1"])), ["linger=3s"])
        XCTAssertEqual(described(try SrtCallerURL("srt://h:1?latency=1000&latency=500000")), ["latency=500"], "the last value wins")
    }

    func testTimeoutsUnitsAndIPv6() throws {
        let url = try SrtCallerURL("srt://[::1]:9000/?timeout=2500000&connect_timeout=800&maxbw=-1&tlpktdrop=0&payload_size=1456&transtype=live")
        XCTAssertEqual(url.host, "::1")
        XCTAssertEqual(url.port, 9000)
        XCTAssertEqual(url.timeout, 2.5)
        XCTAssertEqual(url.connectTimeout, 0.8)
        XCTAssertEqual(described(url), ["maxbw=-1L", "tlpktdrop=0", "payload_size=1456"])
    }

    func testWhatTheSinkCannotDoIsAnErrorThatKeepsSecretsOut() {
        func message(_ url: String) -> String {
            do { _ = try SrtCallerURL(url); return "" } catch { return "\(error)" }
        }
        XCTAssertTrue(message("srt://h:1?mode=listener").contains("mode=caller"), message("srt://h:1?mode=listener"))
        XCTAssertTrue(message("srt://h:1?transtype=file").contains("transtype=live"))
        XCTAssertTrue(message("srt://h:1?latncy=20").contains("unknown SRT option 'latncy'"))
        XCTAssertTrue(message("srt://h:1?latency=soon").contains("not a whole number"))
        XCTAssertTrue(message("srt://h:1?pbkeylen=20").contains("16, 24 or 32"))
        XCTAssertTrue(message("srt://h:1?payload_size=188").contains("outside 1316...1456"))
        let short = message("srt://h:1?passphrase=short-pw")
        XCTAssertTrue(short.contains("10 to 79 characters") && !short.contains("short-pw"), short)
        XCTAssertTrue(message("srt://h?latency=20").contains("needs a port"))
        XCTAssertTrue(message("srt://:9000").contains("needs a host"))
        XCTAssertTrue(message("srt://h:1/live/key").contains("no path"))
        XCTAssertTrue(message("rtmp://h:1").contains("not an srt://"))
        XCTAssertEqual(message("srt://h:1?passphrase="), "", "an empty passphrase turns encryption off, as in libsrt")
    }

    func testEveryOptionNamedInTheErrorIsTaken() throws {
        for name in SrtCallerURL.honoured {
            let value = ["mode": "caller", "transtype": "live", "smoother": "live", "congestion": "live", "passphrase": "0123456789",
                         "streamid": "x", "pbkeylen": "24", "oheadbw": "25", "mss": "1500", "ffs": "25600", "ipttl": "64", "iptos": "184",
                         "payload_size": "1316", "pkt_size": "1316", "tlpktdrop": "1", "nakreport": "true",
                         "enforced_encryption": "1"][name] ?? "1000"
            XCTAssertNoThrow(try SrtCallerURL("srt://h:1?\(name)=\(value)"), name)
        }
    }
}
