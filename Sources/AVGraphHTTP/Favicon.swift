/// The icon a browser asks every page's server for (`/favicon.ico`, unasked): a small SVG,
/// served under both names, so a tab shows avgraph and the console shows no 404 on each load.
public enum Favicon {
    /// A play mark on the page's own colours.
    static let svg: [UInt8] = Array("""
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#202328"/>\
        <circle cx="16" cy="16" r="11" fill="none" stroke="#3c9" stroke-width="3"/><path d="M13 10.5v11l9-5.5z" fill="#e8e8e8"/></svg>
        """.utf8)

    /// What the pages link to in their head.
    public static let link = #"<link rel="icon" href="/favicon.svg" type="image/svg+xml">"#

    /// The answer for `path`, or nil when it is not the icon's.
    public static func response(for path: String) -> HTTPResponse? {
        guard path == "/favicon.ico" || path == "/favicon.svg" else { return nil }
        return .full(status: 200, contentType: "image/svg+xml", body: svg, headers: ["Cache-Control": "max-age=86400"])
    }
}
