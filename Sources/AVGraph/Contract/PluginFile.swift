import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What can be known about a plugin file without running any of it: who may change it, and
/// whether its ELF dynamic symbol table defines the entry point. dlopen runs a library's
/// constructors, so a file is opened only once both say yes.
enum PluginFile {
    /// Why the file (or folder) at `path` must not be trusted, or nil. Like ssh with its keys:
    /// writable by group or others, or owned by someone other than us or root, it could hold
    /// another user's code. The folder holding a file is checked too, unless it is sticky (`/tmp`:
    /// others cannot replace a file there).
    static func distrust(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return "cannot stat it: \(String(cString: strerror(errno)))" }
        let me = geteuid()
        let isDir = st.st_mode & S_IFMT == S_IFDIR
        let what = isDir ? "folder" : "file"
        if st.st_uid != me && st.st_uid != 0 {
            return "the \(what) is owned by \(userName(st.st_uid)), not by you or root"
        }
        if st.st_mode & 0o022 != 0 && !(isDir && st.st_mode & S_ISVTX != 0) {
            let who = st.st_mode & 0o002 != 0 ? "everyone" : "its group"
            return "the \(what) is writable by \(who) (mode \(String(st.st_mode & 0o7777, radix: 8))); make it writable by its owner only: chmod go-w \(path)"
        }
        if !isDir {
            let folder = (path as NSString).deletingLastPathComponent
            var dst = stat()
            if stat(folder.isEmpty ? "." : folder, &dst) == 0 {
                if dst.st_uid != me && dst.st_uid != 0 {
                    return "its folder \(folder) is owned by \(userName(dst.st_uid)), not by you or root"
                }
                if dst.st_mode & 0o022 != 0 && dst.st_mode & S_ISVTX == 0 {
                    return "its folder \(folder) is writable by others (mode \(String(dst.st_mode & 0o7777, radix: 8))), who could replace it"
                }
            }
        }
        return nil
    }

    static func userName(_ uid: uid_t) -> String {
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return "uid \(uid)" }
        return "\(String(cString: name)) (uid \(uid))"
    }

    enum Symbols: Equatable {
        case notELF
        case exports
        case lacks
    }

    /// Looks for a defined `symbol` in the ELF dynamic symbol table (`.dynsym`) of a 64-bit
    /// little-endian shared object, reading the file only. Every offset is bounds-checked:
    /// the file may be anything.
    static func dynamicSymbols(of path: String, defining symbol: String) -> Symbols {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) else { return .notELF }
        return data.withUnsafeBytes { (b: UnsafeRawBufferPointer) -> Symbols in
            func u16(_ o: Int) -> Int? { o >= 0 && o + 2 <= b.count ? Int(b.loadUnaligned(fromByteOffset: o, as: UInt16.self).littleEndian) : nil }
            func u32(_ o: Int) -> Int? { o >= 0 && o + 4 <= b.count ? Int(b.loadUnaligned(fromByteOffset: o, as: UInt32.self).littleEndian) : nil }
            func u64(_ o: Int) -> Int? {
                guard o >= 0, o + 8 <= b.count else { return nil }
                let v = b.loadUnaligned(fromByteOffset: o, as: UInt64.self).littleEndian
                return v <= UInt64(Int.max) ? Int(v) : nil
            }
            // ELF magic, 64-bit class, little-endian, type ET_DYN.
            guard b.count >= 64, b[0] == 0x7f, b[1] == 0x45, b[2] == 0x4c, b[3] == 0x46, b[4] == 2, b[5] == 1,
                  u16(16) == 3 else { return .notELF }
            guard let shoff = u64(0x28), let shentsize = u16(0x3a), let shnum = u16(0x3c), shentsize >= 64 else { return .notELF }
            let target = Array(symbol.utf8)
            for i in 0..<shnum {
                let sh = shoff + i * shentsize
                // SHT_DYNSYM = 11; its sh_link names the string table section.
                guard let type = u32(sh + 4), type == 11 else { continue }
                guard let symOff = u64(sh + 0x18), let symSize = u64(sh + 0x20), let link = u32(sh + 0x28),
                      let entSize = u64(sh + 0x38), entSize >= 24, link < shnum,
                      let strOff = u64(shoff + link * shentsize + 0x18), let strSize = u64(shoff + link * shentsize + 0x20),
                      symOff <= b.count, symSize <= b.count - symOff, strOff <= b.count, strSize <= b.count - strOff
                else { return .notELF }
                for s in 0..<(symSize / entSize) {
                    let e = symOff + s * entSize
                    // st_name (4), st_info (1), st_other (1), st_shndx (2): defined when shndx != SHN_UNDEF.
                    guard let name = u32(e), let shndx = u16(e + 6), shndx != 0, name < strSize else { continue }
                    let start = strOff + name
                    guard start + target.count < strOff + strSize, b[start + target.count] == 0 else { continue }
                    if (0..<target.count).allSatisfy({ b[start + $0] == target[$0] }) { return .exports }
                }
                return .lacks
            }
            return .lacks
        }
    }
}
