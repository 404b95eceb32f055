import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// The POSTs `avgraph serve` makes (its `--auth` question, its hooks): Foundation's URLSession,
/// which on Linux is libcurl (http and https, proxies, redirects not followed for a POST) at no
/// build cost, where a NIO client would be code of our own. Blocking: each caller is a thread
/// of its own (an arrival, the hook queue), never the listeners' event loop.
enum ServeHTTP {
    struct Answer {
        /// nil: no answer (refused, timed out, not HTTP).
        var status: Int?
        var body: Data
        var failure: String?
        var isSuccess: Bool { status.map { (200..<300).contains($0) } ?? false }
        /// How a warning says it: the status, or why there was none.
        var described: String { status.map { "status \($0)" } ?? (failure ?? "no answer") }
    }

    private final class Result: Sendable {
        let value = Mutex<Answer>(Answer(status: nil, body: Data(), failure: nil))
        let done = DispatchSemaphore(value: 0)
    }

    private static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }()

    static func post(_ url: URL, json body: Data, headers: [String: String] = [:], timeout: Double) -> Answer {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("avgraph-serve", forHTTPHeaderField: "User-Agent")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let result = Result()
        let task = session.dataTask(with: request) { data, response, error in
            result.value.withLock {
                $0 = Answer(status: (response as? HTTPURLResponse)?.statusCode, body: data ?? Data(),
                            failure: error.map { ($0 as NSError).localizedDescription })
            }
            result.done.signal()
        }
        task.resume()
        // libcurl's own timeout covers the exchange; this bounds the rest (resolution, a stuck callback).
        if result.done.wait(timeout: .now() + timeout + 0.5) == .timedOut {
            task.cancel()
            return Answer(status: nil, body: Data(), failure: "no answer within \(timeout) s")
        }
        let answer = result.value.withLock { $0 }
        if answer.status == nil, answer.failure?.contains("timed out") == true {
            return Answer(status: nil, body: Data(), failure: "no answer within \(timeout) s")
        }
        return answer
    }
}
