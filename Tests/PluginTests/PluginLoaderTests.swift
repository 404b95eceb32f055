import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// One test per way a plugin can fail to load: each error is thrown (never a crash) and names the file.
final class PluginLoaderTests: XCTestCase {
    func assertRefused(_ path: String, into registry: NodeRegistry = BuiltinNodes.registry(), _ expected: PluginError.Reason,
                       mentions: String, file: StaticString = #filePath, line: UInt = #line) {
        let before = registry.names
        do {
            try PluginLoader.load(path, into: registry)
            XCTFail("\(path) loaded", file: file, line: line)
        } catch {
            XCTAssertEqual(error.reason, expected, file: file, line: line)
            let name = (path as NSString).lastPathComponent
            XCTAssertTrue(error.message.contains(name), "'\(error.message)' does not name \(name)", file: file, line: line)
            XCTAssertTrue(error.message.contains(mentions), "'\(error.message)' does not say '\(mentions)'", file: file, line: line)
        }
        XCTAssertEqual(registry.names, before, "a refused plugin adds nothing", file: file, line: line)
    }

    func testMissingFile() {
        assertRefused(Plugins.scratch() + "/libNothing.so", .notFound, mentions: "not found")
    }

    func testAFileThatIsNotASharedLibrary() throws {
        let path = Plugins.scratch() + "/libText.so"
        try "just text".write(toFile: path, atomically: true, encoding: .utf8)
        assertRefused(path, .notAPlugin, mentions: "not a plugin")
    }

    func testASharedLibraryWithoutTheEntryPoint() throws {
        assertRefused(try Plugins.library("FixtureNoEntry"), .notAPlugin, mentions: "no 'avgraph_plugin' entry point")
    }

    func testWrongAPIVersionIsRefusedBeforeRegistering() throws {
        // The fixture crashes if asked to register: the version must be checked first.
        assertRefused(try Plugins.library("FixtureWrongVersion"), .wrongVersion(plugin: 999, host: PluginAPI.version),
                      mentions: "version 999")
    }

    func testAPluginThrowingDuringRegistration() throws {
        assertRefused(try Plugins.library("FixtureThrows"), .registrationFailed, mentions: "the license key is missing")
    }

    func testTwoPluginsRegisteringTheSameTypeName() throws {
        let registry = BuiltinNodes.registry()
        let watermark = try Plugins.watermark
        try PluginLoader.load(watermark, into: registry)
        let clash = try Plugins.library("FixtureClash")
        assertRefused(clash, into: registry, .duplicate(type: "watermark", first: URL(fileURLWithPath: watermark).resolvingSymlinksInPath().path),
                      mentions: "libAVGraphWatermark.so")
        XCTAssertEqual(registry.origin(of: "watermark"), URL(fileURLWithPath: watermark).resolvingSymlinksInPath().path, "the first one stays")
    }

    func testAPluginTypeNamedLikeABuiltIn() throws {
        let registry = BuiltinNodes.registry()
        try registry.register(BuiltinWatermark.self)
        assertRefused(try Plugins.watermark, into: registry, .duplicate(type: "watermark", first: "built-in"), mentions: "built-in")
    }

    func testAFolderLoadsEveryLibraryInIt() throws {
        let dir = Plugins.scratch()
        try FileManager.default.createSymbolicLink(atPath: dir + "/libAVGraphWatermark.so", withDestinationPath: try Plugins.watermark)
        try FileManager.default.createSymbolicLink(atPath: dir + "/libAVGraphDucker.so", withDestinationPath: try Plugins.ducker)
        try "not a library".write(toFile: dir + "/README.md", atomically: true, encoding: .utf8)
        let registry = BuiltinNodes.registry()
        let added = try PluginLoader.load(dir, into: registry)
        let names = added.map { $0.typeName }.sorted()
        XCTAssertEqual(names, ["ducker", "watermark"])
        XCTAssertEqual(PluginLoader.environmentPaths(["AVGRAPH_PLUGIN_PATH": "\(dir)::/x.so"]), [dir, "/x.so"])
    }

    func testLoadingTheSameFileTwiceIsHarmless() throws {
        let registry = BuiltinNodes.registry()
        try PluginLoader.load(try Plugins.watermark, into: registry)
        try PluginLoader.load(try Plugins.watermark, into: registry)
        XCTAssertNotNil(registry["watermark"])
    }

    func testCheckReportsABadPluginAtItsLineAndColumn() throws {
        let dir = Plugins.scratch()
        let path = dir + "/p.pipe"
        try """
        plugins:
          - missing/libGone.so
        nodes:
          src: {type: testsrc, duration: 1s}
          out: {type: null, in: src}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        var checker = Checker(registry: BuiltinNodes.registry())
        checker.loadsFilePlugins = true
        let checked = checker.check(path: path)
        let d = try XCTUnwrap(checked.diagnostics.first)
        XCTAssertEqual([d.location.line, d.location.column], [2, 5])
        XCTAssertTrue(d.message.contains("libGone.so") && d.message.contains("not found"), d.message)
    }
}

/// A built-in node type that happens to be called like the watermark plugin's.
final class BuiltinWatermark: Filter, Node, @unchecked Sendable {
    static let typeName = "watermark"
    static let summary = "pretends to be built in"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let outputs = [PadSpec("video", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    init(_ setup: NodeSetup) throws {}
}

/// A plugin that loads but breaks the node contract is refused by `check`, which names the plugin.
final class PluginContractTests: XCTestCase {
    func testAFormatRuleReturningTooFewFormatsIsReportedNamingThePlugin() throws {
        let path = try Plugins.library("FixtureShortNegotiate")
        let registry = BuiltinNodes.registry()
        try PluginLoader.load(path, into: registry)
        let dir = Plugins.scratch()
        let pipe = dir + "/split.pipe"
        try """
        nodes:
          src:   {type: testsrc, size: 320x240, duration: 1s}
          split: {type: split-broken, in: src}
          a:     {type: null, in: [split.a]}
          b:     {type: null, in: [split.b]}
        """.write(toFile: pipe, atomically: true, encoding: .utf8)
        let checked = Checker(registry: registry).check(path: pipe)
        XCTAssertFalse(checked.isValid)
        let error = checked.diagnostics.first { $0.severity == .error }
        XCTAssertEqual(error?.location.line, 3, "\(checked.diagnostics)")
        let message = error?.message ?? ""
        XCTAssertTrue(message.contains("returned 1 format for 2 output pads"), message)
        XCTAssertTrue(message.contains("plugin") && message.contains("libFixtureShortNegotiate.so"), message)
    }
}
