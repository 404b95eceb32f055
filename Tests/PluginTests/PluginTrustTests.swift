import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// Who may put code into an avgraph process: `check` runs none a `.pipe` file names unless given
/// `--allow-plugins`; a plugin file or folder that others could write, or that another user owns,
/// is refused by every command; a folder entry opens only the libraries exporting the entry point.
extension PluginTests {
    /// A C library whose constructor writes `marker` when the library is opened (before any entry
    /// point is called); with `entry` it also exports `avgraph_plugin`, registering nothing.
    func markerLibrary(in dir: String, name: String, marker: String, entry: Bool) throws -> String {
        let source = dir + "/\(name).c", library = dir + "/lib\(name).so"
        try """
        #include <stdio.h>
        #include <stdint.h>
        __attribute__((constructor)) static void leave_marker(void) {
            FILE *f = fopen("\(marker)", "w");
            if (f) { fputs("constructor ran\\n", f); fclose(f); }
        }
        \(entry ? "int32_t avgraph_plugin(int32_t version, void *registrar) { (void)registrar; return version; }" : "int not_a_plugin(void) { return 1; }")
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let cc = Process()
        cc.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        cc.arguments = ["cc", "-shared", "-fPIC", "-o", library, source]
        try cc.run()
        cc.waitUntilExit()
        guard cc.terminationStatus == 0 else { throw XCTSkip("no C compiler to build the marker library") }
        return library
    }

    func testCheckRunsNoPluginCodeAFileNamesUnlessAllowed() throws {
        let dir = Plugins.scratch()
        let marker = dir + "/constructor-ran"
        let library = try markerLibrary(in: dir, name: "Beside", marker: marker, entry: true)
        let pipe = dir + "/downloaded.pipe"
        try """
        plugins: [\((library as NSString).lastPathComponent)]
        nodes:
          src: {type: testsrc, duration: 1s}
          mark: {type: watermark, in: src}
          out: {type: null, in: mark}
        """.write(toFile: pipe, atomically: true, encoding: .utf8)

        let refused = try avgraph(["check", pipe], expect: 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "check ran the library's constructor")
        // The plugin line: not loaded and why; the node type: located, saying its plugin was not loaded.
        XCTAssertTrue(refused.out.contains("downloaded.pipe:1:11: warning: plugin ") && refused.out.contains("not loaded"), refused.out)
        XCTAssertTrue(refused.out.contains("downloaded.pipe:4:16: error: unknown node type 'watermark': the file's plugins (libBeside.so) were not loaded"), refused.out)
        XCTAssertTrue(refused.out.contains("--allow-plugins"), refused.out)

        // Allowed, the library is loaded (its constructor runs); it registers no watermark, so check still fails, on that.
        let allowed = try avgraph(["check", "--allow-plugins", pipe], expect: 1)
        XCTAssertEqual(try String(contentsOfFile: marker, encoding: .utf8), "constructor ran\n")
        XCTAssertTrue(allowed.out.contains("downloaded.pipe:4:16: error: unknown node type 'watermark'"), allowed.out)
        XCTAssertFalse(allowed.out.contains("not loaded"), allowed.out)
    }

    func testAFileNamingARealPluginChecksWithAllowPlugins() throws {
        let dir = Plugins.scratch()
        let pipe = dir + "/marked.pipe"
        try """
        plugins: [\(try Plugins.watermark)]
        nodes:
          src: {type: testsrc, size: 320x240, duration: 1s}
          mark: {type: watermark, in: src, image: \(Plugins.packageRoot)/assets/privacy.png}
          out: {type: null, in: mark}
        """.write(toFile: pipe, atomically: true, encoding: .utf8)
        _ = try avgraph(["check", pipe], expect: 1)
        XCTAssertTrue(try avgraph(["check", "--allow-plugins", pipe]).out.contains("ok (3 nodes)"))
        // --plugin is the user's own choice: loaded without --allow-plugins.
        XCTAssertTrue(try avgraph(["check", "--plugin", try Plugins.watermark, pipe]).out.contains("ok (3 nodes"))
    }

    func testAWorldWritablePluginIsRefusedByRunAndInspect() throws {
        let dir = Plugins.scratch()
        let copy = dir + "/libAVGraphWatermark.so"
        try FileManager.default.copyItem(atPath: try Plugins.watermark, toPath: copy)
        XCTAssertEqual(chmod(copy, 0o666), 0)
        let inspect = try avgraph(["inspect", "--plugin", copy], expect: 1)
        XCTAssertTrue(inspect.err.contains("libAVGraphWatermark.so") && inspect.err.contains("writable by everyone"), inspect.err)
        let pipe = dir + "/p.pipe"
        try "plugins: [libAVGraphWatermark.so]\nnodes:\n  src: {type: testsrc, duration: 1s}\n  out: {type: null, in: src}\n"
            .write(toFile: pipe, atomically: true, encoding: .utf8)
        let run = try avgraph(["run", pipe], expect: 1)
        XCTAssertTrue(run.err.contains("p.pipe:1:11: error: plugin ") && run.err.contains("writable by everyone"), run.err)
        let viaOption = try avgraph(["run", "--plugin", copy, pipe], expect: 1)
        XCTAssertTrue(viaOption.err.contains("writable by everyone"), viaOption.err)

        XCTAssertEqual(chmod(copy, 0o620), 0)
        XCTAssertTrue(try avgraph(["inspect", "--plugin", copy], expect: 1).err.contains("writable by its group"))
        XCTAssertEqual(chmod(copy, 0o755), 0)
        XCTAssertTrue(try avgraph(["inspect", "--plugin", copy]).out.contains("watermark "))
    }

    func testAPluginOwnedByAnotherUserOrInAFolderOthersWriteIsRefused() throws {
        let dir = Plugins.scratch()
        let copy = dir + "/libAVGraphWatermark.so"
        try FileManager.default.copyItem(atPath: try Plugins.watermark, toPath: copy)
        guard geteuid() == 0 else { throw XCTSkip("needs root to give the file to another user") }
        XCTAssertEqual(chown(copy, 65534, 65534), 0)
        let owned = try avgraph(["inspect", "--plugin", copy], expect: 1)
        XCTAssertTrue(owned.err.contains("owned by") && owned.err.contains("65534"), owned.err)
        XCTAssertEqual(chown(copy, 0, 0), 0)
        XCTAssertEqual(chmod(dir, 0o777), 0)
        let folder = try avgraph(["inspect", "--plugin", copy], expect: 1)
        XCTAssertTrue(folder.err.contains("its folder") && folder.err.contains("writable by others"), folder.err)
        let asFolder = try avgraph(["inspect", "--plugin", dir], expect: 1)
        XCTAssertTrue(asFolder.err.contains("plugin folder") && asFolder.err.contains("writable by everyone"), asFolder.err)
        XCTAssertEqual(chmod(dir, 0o755), 0)
    }

    /// A folder of libraries: the plugin is loaded, the library without the entry point is not
    /// even opened (its constructor never runs), and the command goes on with a warning.
    func testAFolderLoadsOnlyLibrariesExportingTheEntryPoint() throws {
        let dir = Plugins.scratch()
        let build = Plugins.scratch()
        let marker = build + "/constructor-ran"
        let other = try markerLibrary(in: build, name: "Other", marker: marker, entry: false)
        try FileManager.default.copyItem(atPath: other, toPath: dir + "/libOther.so")
        try FileManager.default.copyItem(atPath: try Plugins.watermark, toPath: dir + "/libAVGraphWatermark.so")
        try "not a library".write(toFile: dir + "/libText.so", atomically: true, encoding: .utf8)
        let r = try avgraph(["inspect", "--plugin", dir])
        XCTAssertTrue(r.out.contains("watermark ") && r.out.contains("[plugin "), r.out)
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "a library without the entry point was opened")
        XCTAssertTrue(r.err.contains("warning: plugin ") && r.err.contains("libOther.so") && r.err.contains("no 'avgraph_plugin' entry point"), r.err)
        XCTAssertTrue(r.err.contains("libText.so") && r.err.contains("not a 64-bit ELF shared library"), r.err)

        // The same through the library API: types from the plugin, a warning for each other file.
        var warnings: [String] = []
        let added = try PluginLoader.load(dir, into: BuiltinNodes.registry(), warn: { warnings.append($0) })
        XCTAssertEqual(added.map { $0.typeName }, ["watermark"])
        XCTAssertEqual(warnings.count, 2, "\(warnings)")
    }
}
