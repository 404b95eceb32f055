// swift-tools-version:6.0
import PackageDescription

/// Plugins resolve AVGraph's symbols from the program that loads them, so there is one copy of
/// each type (`as? Node.Type`, registries and metadata agree). The host exports its symbols...
let hostExportsAVGraph: [LinkerSetting] = [.unsafeFlags(["-Xlinker", "--export-dynamic"])]
/// ...and a plugin is linked without AVGraph's (and Yams') objects: scripts/link-plugin drops them.
let pluginLink: [LinkerSetting] = [.unsafeFlags(["-use-ld=\(Context.packageDirectory)/scripts/link-plugin"])]

let package = Package(
    name: "avgraph",
    products: [
        .library(name: "AVGraph", type: .dynamic, targets: ["AVGraph"]),
        .library(name: "AVGraphNodes", targets: ["AVGraphNodes"]),
        // Test support for node authors (NodeHarness, TestMedia, the conformance verifier): not in the shipped library.
        .library(name: "AVGraphTesting", targets: ["AVGraphTesting"]),
        // A pipeline as a swift-service-lifecycle `Service`: its own library, so the core does not depend on it.
        .library(name: "AVGraphService", targets: ["AVGraphService"]),
        // `avgraph serve` as a library: many publishers through one door, a run each.
        .library(name: "AVGraphServe", targets: ["AVGraphServe"]),
        .executable(name: "avgraph", targets: ["avgraph"]),
        // Example plugins: loadable node libraries (see docs/WRITING-NODES.md).
        .library(name: "AVGraphWatermark", type: .dynamic, targets: ["AVGraphWatermark"]),
        .library(name: "AVGraphDucker", type: .dynamic, targets: ["AVGraphDucker"]),
        // Broken plugins for the loader's tests (Tests/PluginFixtures).
        .library(name: "FixtureNoEntry", type: .dynamic, targets: ["FixtureNoEntry"]),
        .library(name: "FixtureWrongVersion", type: .dynamic, targets: ["FixtureWrongVersion"]),
        .library(name: "FixtureThrows", type: .dynamic, targets: ["FixtureThrows"]),
        .library(name: "FixtureClash", type: .dynamic, targets: ["FixtureClash"]),
        .library(name: "FixtureShortNegotiate", type: .dynamic, targets: ["FixtureShortNegotiate"]),
        // A plugin that declares its own event kind and option value type.
        .library(name: "FixtureDeclares", type: .dynamic, targets: ["FixtureDeclares"]),
    ],
    dependencies: [
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // Every TCP server of a run (the operator page, /metrics, the RTMP listener) on NIO's event loops;
        // TLS (rtmps://, --http-tls) from swift-nio-ssl's BoringSSL.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // HTTP/2 for --http-tls (ALPN h2): Apple's players fetch LL-HLS over HTTP/2 only. Its cost to a clean
        // `swift build -c release` on 2 cores: 443 s against 393 s without it (+50 s, one run each); NIOHPACK and
        // NIOHTTP2 alone compile in 35 s.
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        // `PipelineService` and the RecordServer example only (it brings swift-log and swift-async-algorithms).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CFFmpeg",
            pkgConfig: "libavformat",
            providers: [.apt(["libavcodec-dev", "libavformat-dev", "libavutil-dev", "libswscale-dev", "libswresample-dev", "libavdevice-dev"])]
        ),
        // libsrt itself (the library libavformat's srt protocol loads): the `srt` source's own listener.
        .systemLibrary(name: "CSrt", pkgConfig: "srt", providers: [.apt(["libsrt-gnutls-dev"])]),
        // The system's OpenSSL 3: STUN's MESSAGE-INTEGRITY (HMAC-SHA1) for WebRTC, DTLS next. No cryptography of our own.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSrtp", pkgConfig: "libsrtp2", providers: [.apt(["libsrtp2-dev"])]),
        // Pixel kernels in C for the vector shuffles Swift does not reach.
        .target(name: "CKernels"),
        .target(name: "AVGraph", dependencies: ["CFFmpeg", "CKernels", "Yams"]),
        // The wire: RTMP (connection, chunks, AMF0), FLV tags, the H.264/HEVC bitstream facts they carry, the RTMP and
        // SRT listeners and the doors in front of them, TLS loading. It knows no node: a node adapts it.
        .target(name: "AVGraphTransport", dependencies: [
            "AVGraph", "CFFmpeg", "CSrt", "COpenSSL", "CSrtp",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ]),
        .target(name: "AVGraphNodes", dependencies: ["AVGraph", "AVGraphTransport", "CFFmpeg", "CSrt"]),
        .target(name: "AVGraphTesting", dependencies: ["AVGraph", "CFFmpeg"]),
        // The operator's page, its API and /metrics on NIO (HTTP/1.1 from NIOHTTP1, HTTP/2 over TLS from NIOHTTP2,
        // TLS from NIOSSL): a library of its own so the HTTP fuzz target drives the same server pipeline the program serves.
        .target(name: "AVGraphHTTP", dependencies: [
            "AVGraph", "AVGraphTransport",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOTLS", package: "swift-nio"), .product(name: "NIOHTTP2", package: "swift-nio-http2"),
        ]),
        // `avgraph serve`'s logic (admission, sessions and their relay, hooks, the index): the program only
        // parses flags and wires it up, and its unit tests (ServeUnitTests) need no process.
        .target(name: "AVGraphServe", dependencies: [
            "AVGraph", "AVGraphNodes", "AVGraphTransport", "AVGraphHTTP",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .executableTarget(
            name: "avgraph",
            dependencies: ["AVGraph", "AVGraphNodes", "AVGraphTransport", "AVGraphHTTP", "AVGraphServe", "CFFmpeg", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            linkerSettings: hostExportsAVGraph
        ),
        .target(name: "AVGraphService", dependencies: [
            "AVGraph", "AVGraphNodes", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .executableTarget(name: "PushExample", dependencies: ["AVGraph", "AVGraphNodes"], path: "Examples/PushExample"),
        .executableTarget(name: "RecordServer", dependencies: [
            "AVGraph", "AVGraphNodes", "AVGraphService", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ], path: "Examples/RecordServer"),
        .testTarget(name: "AVGraphTests", dependencies: ["AVGraph", "AVGraphNodes", "AVGraphTransport", "AVGraphTesting", "CFFmpeg"],
                    exclude: ["Fixtures"], linkerSettings: hostExportsAVGraph),
        .testTarget(name: "ServeUnitTests", dependencies: ["AVGraph", "AVGraphNodes", "AVGraphHTTP", "AVGraphServe"], linkerSettings: hostExportsAVGraph),
        // AVGraphHTTP: HttpTwoTests serves routes of its own (.chunked, held .later) through the real server.
        .testTarget(name: "EndToEndTests", dependencies: ["AVGraph", "AVGraphNodes", "AVGraphTransport", "AVGraphHTTP", "AVGraphTesting", "CFFmpeg"],
                    linkerSettings: hostExportsAVGraph),
        .target(name: "AVGraphWatermark", dependencies: ["AVGraph", "CFFmpeg"], path: "Plugins/watermark/Sources",
                linkerSettings: pluginLink),
        .target(name: "AVGraphDucker", dependencies: ["AVGraph", "CFFmpeg"], path: "Plugins/ducker/Sources",
                linkerSettings: pluginLink),
        .target(name: "FixtureNoEntry", path: "Tests/PluginFixtures/NoEntry"),
        .target(name: "FixtureWrongVersion", dependencies: ["AVGraph"], path: "Tests/PluginFixtures/WrongVersion", linkerSettings: pluginLink),
        .target(name: "FixtureThrows", dependencies: ["AVGraph"], path: "Tests/PluginFixtures/Throws", linkerSettings: pluginLink),
        .target(name: "FixtureClash", dependencies: ["AVGraph"], path: "Tests/PluginFixtures/Clash", linkerSettings: pluginLink),
        .target(name: "FixtureShortNegotiate", dependencies: ["AVGraph"], path: "Tests/PluginFixtures/ShortNegotiate", linkerSettings: pluginLink),
        .target(name: "FixtureDeclares", dependencies: ["AVGraph"], path: "Tests/PluginFixtures/Declares", linkerSettings: pluginLink),
        // Loads the plugins above as files (never links them: each would bring its own avgraph_plugin).
        .testTarget(name: "PluginTests", dependencies: ["AVGraph", "AVGraphNodes", "AVGraphTesting", "CFFmpeg"], linkerSettings: hostExportsAVGraph),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets (Fuzz/), only when scripts/fuzz builds them: their entry point is
// LLVMFuzzerTestOneInput, so they link only with -sanitize=fuzzer.
if Context.environment["AVGRAPH_FUZZ"] != nil {
    // control and http answer against a built run (FuzzSupport); http drives the server's own NIO
    // pipeline in an EmbeddedChannel.
    let more: [String: [Target.Dependency]] = [
        "control": ["FuzzSupport"],
        "flv": ["CFFmpeg"],
        "webrtc": ["CFFmpeg"],
        "http": ["FuzzSupport", "AVGraphHTTP", .product(name: "NIOCore", package: "swift-nio"),
                 .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio")],
    ]
    let fuzzers: [Target] = ["pipe", "ingest", "control", "rtmp", "flv", "http", "webrtc", "sdp", "srtla"].map { name in
        .executableTarget(name: "Fuzz\(name.prefix(1).uppercased() + name.dropFirst())",
                          dependencies: ["AVGraph", "AVGraphNodes", "AVGraphTransport", "CFuzzDriver"] + (more[name] ?? []), path: "Fuzz/\(name)")
    }
    package.targets += [.target(name: "CFuzzDriver", path: "Fuzz/driver"),
                        .target(name: "FuzzSupport", dependencies: ["AVGraph", "AVGraphNodes"], path: "Fuzz/support")] + fuzzers
}
