import AVGraph
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
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return exchange(request, timeout: timeout)
    }

    static func get(_ url: URL, timeout: Double) -> Answer {
        exchange(URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout), timeout: timeout)
    }

    private static func exchange(_ request: URLRequest, timeout: Double) -> Answer {
        var request = request
        request.setValue("avgraph-serve", forHTTPHeaderField: "User-Agent")
        let result = ConditionLock<Answer?>(nil)
        let task = session.dataTask(with: request) { data, response, error in
            let answer = Answer(status: (response as? HTTPURLResponse)?.statusCode, body: data ?? Data(),
                                failure: error.map { ($0 as NSError).localizedDescription })
            result.withLockWakingAll { $0 = answer }
        }
        task.resume()
        // libcurl's own timeout covers the exchange; this bounds the rest (resolution, a stuck callback).
        guard let answer = result.wait(until: Monotonic.now + timeout + 0.5, { $0 }) else {
            task.cancel()
            return Answer(status: nil, body: Data(), failure: "no answer within \(timeout) s")
        }
        if answer.status == nil, answer.failure?.contains("timed out") == true {
            return Answer(status: nil, body: Data(), failure: "no answer within \(timeout) s")
        }
        return answer
    }
}
