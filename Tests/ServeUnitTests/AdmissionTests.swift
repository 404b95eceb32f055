import AVGraphServe
import XCTest

/// serve's admission rules as values: who takes a key, who is refused and why.
final class AdmissionTests: XCTestCase {
    typealias Book = Admission<String>

    func testAFreeKeyIsAskedAboutAndASecondPublisherMeanwhileIsRefused() {
        var book = Book()
        guard case .ask = book.plan("live/a", stopping: false, holder: nil) else { return XCTFail("a free key is asked about") }
        guard case .refuse(let why) = book.plan("live/a", stopping: false, holder: nil) else { return XCTFail("a second is refused") }
        XCTAssertEqual(why, "another publisher with this key is being admitted")
        guard case .ask = book.plan("live/b", stopping: false, holder: nil) else { return XCTFail("another key is its own") }
        book.done("live/a")
        guard case .ask = book.plan("live/a", stopping: false, holder: nil) else { return XCTFail("once answered, the key is free") }
    }

    func testAWaitingRunTakesItsPublisherBackALiveOneTakesNoSecond() {
        var book = Book()
        let waiting = Book.Holder(session: "s1", exited: false, publishing: false)
        guard case .resume(let s) = book.plan("live/a", stopping: false, holder: waiting) else { return XCTFail("resumed") }
        XCTAssertEqual(s, "s1")
        XCTAssertTrue(book.asking.isEmpty, "a resume asks nobody")
        let live = Book.Holder(session: "s1", exited: false, publishing: true)
        guard case .refuse(let why) = book.plan("live/a", stopping: false, holder: live) else { return XCTFail("refused") }
        XCTAssertEqual(why, "another publisher is live with this key")
        let gone = Book.Holder(session: "s1", exited: true, publishing: false)
        guard case .ask = book.plan("live/a", stopping: false, holder: gone) else { return XCTFail("a run that ended leaves the key free") }
    }

    func testStoppingRefusesEveryone() {
        var book = Book()
        guard case .refuse(let why) = book.plan("live/a", stopping: true, holder: nil) else { return XCTFail("refused") }
        XCTAssertEqual(why, "serve is stopping")
        XCTAssertTrue(book.asking.isEmpty)
    }

    func testARunThatEndedDuringResumeIsRetaken() {
        var book = Book()
        book.retake("live/a")
        guard case .refuse = book.plan("live/a", stopping: false, holder: nil) else { return XCTFail("held while the new run starts") }
        book.done("live/a")
        XCTAssertTrue(book.asking.isEmpty)
        XCTAssertEqual(Book.mapKey(app: "live", key: "a"), "live/a")
    }
}
