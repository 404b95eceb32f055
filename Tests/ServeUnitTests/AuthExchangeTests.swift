import AVGraph
import AVGraphServe
import XCTest

/// `--auth`: the question's fields and what each answer means, decoded as `EventValue` (a JSON
/// boolean stays `true`, a number stays a number).
final class AuthExchangeTests: XCTestCase {
    func testTheQuestionCarriesTheSixFields() throws {
        let q = try XCTUnwrap(ServeJSON.object(AuthExchange.question(scheme: "srt", app: "live", key: "k", peer: "1.2.3.4:5", query: "t=1")))
        XCTAssertEqual(q, ["action": .string("publish"), "protocol": .string("srt"), "app": .string("live"), "key": .string("k"),
                           "peer": .string("1.2.3.4:5"), "query": .string("t=1")])
    }

    func testAnythingButA2xxRefuses() {
        XCTAssertEqual(AuthExchange.verdict(status: 403, body: Data(), described: "status 403"), .refused("status 403"))
        XCTAssertEqual(AuthExchange.verdict(status: nil, body: Data(), described: "no answer within 2.0 s"), .refused("no answer within 2.0 s"))
        XCTAssertEqual(AuthExchange.verdict(status: 302, body: Data(), described: "status 302"), .refused("status 302"))
    }

    func testA2xxAdmitsItsSetTypedAsWritten() {
        let body = Data(#"{"set": {"v.bitrate": 2500000, "fit.size": "160x120", "privacy.on": true, "a.gain": 1.5, "b.list": [1, "x"], "c.whole": 2.0}}"#.utf8)
        XCTAssertEqual(AuthExchange.verdict(status: 200, body: body, described: "status 200"),
                       .admitted(["a.gain=1.5", "b.list=[1,\"x\"]", "c.whole=2", "fit.size=160x120", "privacy.on=true", "v.bitrate=2500000"]))
    }

    func testA2xxWithoutASetAdmitsAsTheTemplateSays() {
        for body in ["", "{}", "[1]", "not json", #"{"set": "x"}"#, #"{"ok": true}"#] {
            XCTAssertEqual(AuthExchange.verdict(status: 204, body: Data(body.utf8), described: ""), .admitted([]), body)
        }
    }

    func testFalseIsABooleanAndZeroANumber() {
        let body = Data(#"{"set": {"a.on": false, "b.n": 0, "c.one": 1}}"#.utf8)
        XCTAssertEqual(AuthExchange.verdict(status: 200, body: body, described: ""), .admitted(["a.on=false", "b.n=0", "c.one=1"]))
    }
}
