import AVGraph
import XCTest

final class RedactionTests: XCTestCase {
    func testUrlsKeepHostAndApplicationAndLoseTheirSecrets() {
        let cases: [(String, String)] = [
            ("rtmp://127.0.0.1:1935/live/sk_123", "rtmp://127.0.0.1:1935/live/***"),
            ("rtmps://a.rtmp.youtube.com/live2/abcd-efgh/extra", "rtmps://a.rtmp.youtube.com/live2/***"),
            ("rtmp://host/live", "rtmp://host/live"),
            ("rtmp://host/live/key?auth=1", "rtmp://host/live/***?***"),
            ("rtmp://user:pw@host/app/key", "rtmp://user:***@host/app/***"),
            ("srt://h:9000?passphrase=secret123456&streamid=#!::r=live/k&latency=20", "srt://h:9000?passphrase=***&streamid=***"),
            ("srt://h:9000?mode=caller&passphrase=p&pbkeylen=16", "srt://h:9000?mode=caller&passphrase=***&pbkeylen=16"),
            ("srt://h:9000", "srt://h:9000"),
        ]
        for (url, shown) in cases {
            // A `#` in an SRT streamid starts the fragment as far as URL syntax goes: masked as well.
            XCTAssertEqual(Redaction.url(url).replacingOccurrences(of: "#***", with: ""), shown, url)
        }
    }

    func testFreeTextKeepsItsWordsAndLosesTheKeys() {
        XCTAssertEqual(Redaction.text("cannot reach rtmp://h/live/KEY: Connection refused (3 attempts)"),
                       "cannot reach rtmp://h/live/***: Connection refused (3 attempts)")
        XCTAssertEqual(Redaction.text("to 'srt://h:1?streamid=S' and RTMP://H/a/K."), "to 'srt://h:1?streamid=***' and rtmp://H/a/***.")
        XCTAssertEqual(Redaction.text("no url here"), "no url here")
        XCTAssertEqual(Redaction.text("http://example.com/a/b"), "http://example.com/a/b")
    }
}
