import AVGraph
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The requests `avgraph serve` makes (its `--auth` question, its hooks, the index's previews):
/// Foundation's URLSession, which on Linux is libcurl (http and https, proxies, redirects not
/// followed for a POST) at no build cost, where a NIO client would be code of our own. The hooks
/// /// and the index's previews take the answer as a callback (no thread waits on a receiver); `--auth`
/// waits for it on the thread that asks (one of the bounded admission workers).
public enum ServeHTTP {
    public struct Answer: Sendable {
        /// nil: no answer (refused, timed out, not HTTP).
        public var status: Int?
        public var body: Data
        public var failure: String?
        public var isSuccess: Bool { status.map { (200..<300).contains($0) } ?? false }
        /// How a warning says it: the status, or why there was none.
        public var described: String { status.map { "status \($0)" } ?? (failure ?? "no answer") }
        public init(status: Int?, body: Data, failure: String? = nil) { self.status = status; self.body = body; self.failure = failure }
    }

    private static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }()

    /// POSTs `body`, calling `done` once with the answer.
    public static func post(_ url: URL, json body: Data, headers: [String: String] = [:], timeout: Double,
                            done: @escaping @Sendable (Answer) -> Void) {
        exchange(request(url, json: body, headers: headers, timeout: timeout), timeout: timeout, done: done)
    }

    /// POSTs `body` and waits for the answer.
    public static func post(_ url: URL, json body: Data, headers: [String: String] = [:], timeout: Double) -> Answer {
        waiting { exchange(request(url, json: body, headers: headers, timeout: timeout), timeout: timeout, done: $0) }
    }

    /// GETs `url`, calling `done` once with the answer.
    public static func get(_ url: URL, timeout: Double, done: @escaping @Sendable (Answer) -> Void) {
        exchange(URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout), timeout: timeout, done: done)
    }

    private static func request(_ url: URL, json body: Data, headers: [String: String], timeout: Double) -> URLRequest {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    private static func waiting(_ start: (@escaping @Sendable (Answer) -> Void) -> Void) -> Answer {
        let result = ConditionLock<Answer?>(nil)
        start { answer in result.withLockWakingAll { $0 = answer } }
        // `exchange` answers within its timeout and a half: the guard below makes it so.
        return result.wait { $0 } ?? Answer(status: nil, body: Data(), failure: "no answer")
    }

    private static func exchange(_ request: URLRequest, timeout: Double, done: @escaping @Sendable (Answer) -> Void) {
        var request = request
        request.setValue("avgraph-serve", forHTTPHeaderField: "User-Agent")
        // Whichever comes first, the answer or the guard below, is the one.
        let answered = ConditionLock(false)
        let once: @Sendable (Answer) -> Void = { answer in
            guard answered.withLock({ a in defer { a = true }; return !a }) else { return }
            done(answer)
        }
        let late = Answer(status: nil, body: Data(), failure: "no answer within \(timeout) s")
        let task = session.dataTask(with: request) { data, response, error in
            let failure = error.map { ($0 as NSError).localizedDescription }
            if response == nil, failure?.contains("timed out") == true { return once(late) }
            once(Answer(status: (response as? HTTPURLResponse)?.statusCode, body: data ?? Data(), failure: failure))
        }
        task.resume()
        // libcurl's own timeout covers the exchange; this bounds the rest (resolution, a stuck callback).
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout + 0.5) { [task] in
            once(late)
            task.cancel()
        }
    }
}
