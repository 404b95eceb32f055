import CFFmpeg
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Unix sockets that only their owner can use: the control socket and the `socket` source listen
/// through here, `ctl` and `feed` connect through here. Another local user must not be able to
/// take a socket's place (bind the path first, swap the folder for a symlink) nor talk to ours.
public enum PrivateSocket {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        /// The socket (or its folder) belongs to someone else: retrying will not help.
        public let foreign: Bool
        init(_ description: String, foreign: Bool = false) {
            self.description = description
            self.foreign = foreign
        }
    }

    /// The per-user folder for sockets: `$XDG_RUNTIME_DIR/avgraph`, else `/tmp/avgraph-UID`;
    /// created 0700 and checked with lstat (a real folder, ours, no access for group or others),
    /// since in /tmp another user could have made it first.
    public static func runtimeFolder() throws -> String {
        let env = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] ?? ""
        let folder = env.isEmpty ? "/tmp/avgraph-\(getuid())" : env + "/avgraph"
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw Failure("cannot create the socket folder \(folder): \(String(cString: strerror(errno)))")
        }
        try checkPrivateFolder(folder)
        return folder
    }

    /// The default socket path for `name` (`PIPELINE` for control, `PIPELINE.NODE.ingest` for a socket source).
    public static func defaultPath(_ name: String) throws -> String { try runtimeFolder() + "/\(name).sock" }

    /// Where the default path would be, without creating or checking anything (for messages and `ctl`).
    public static func expectedPath(_ name: String) -> String {
        let env = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] ?? ""
        return (env.isEmpty ? "/tmp/avgraph-\(getuid())" : env + "/avgraph") + "/\(name).sock"
    }

    static func checkPrivateFolder(_ folder: String) throws {
        var st = stat()
        guard lstat(folder, &st) == 0 else { throw Failure("cannot use the socket folder \(folder): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw Failure("the socket folder \(folder) is not a folder (a symlink or a file); refusing to use it", foreign: true)
        }
        guard st.st_uid == getuid() else {
            throw Failure("the socket folder \(folder) belongs to \(userName(st.st_uid)), not you; refusing to use it", foreign: true)
        }
        guard st.st_mode & 0o077 == 0 else {
            throw Failure("the socket folder \(folder) is open to other users (mode \(String(st.st_mode & 0o777, radix: 8))); it must be 0700")
        }
    }

    /// `name (uid N)`, or `uid N` for a uid without a name.
    public static func userName(_ uid: uid_t) -> String {
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 1024)
        if getpwuid_r(uid, &pwd, &buffer, buffer.count, &result) == 0, let p = result, let name = p.pointee.pw_name {
            return "\(String(cString: name)) (uid \(uid))"
        }
        return "uid \(uid)"
    }

    static func address(_ path: String) throws -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw Failure("socket path '\(path)' is empty or longer than \(capacity - 1) bytes")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }

    private static func connectRaw(_ path: String) throws -> (fd: Int32, errno: Int32) {
        var addr = try address(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        let r = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        if r == 0 { return (fd, 0) }
        let e = errno
        Glibc.close(fd)
        return (-1, e)
    }

    /// Listens at `path` (socket 0600, made under umask 0177). Refuses a path that exists and is
    /// not a socket (it is never removed), a socket of another user, and a socket a live process
    /// answers on; only a stale socket of ours is replaced. A missing folder is made 0700.
    public static func listen(path: String, backlog: Int32 = 16) throws -> Int32 {
        var addr = try address(path)
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty && access(folder, F_OK) != 0 {
            do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) } catch {
                throw Failure("cannot create the socket folder \(folder): \(error.localizedDescription)")
            }
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw Failure("'\(path)' exists and is not a socket; refusing to replace it (choose another path or remove it yourself)")
            }
            guard st.st_uid == getuid() else {
                throw Failure("the socket '\(path)' belongs to \(userName(st.st_uid)); refusing to replace it", foreign: true)
            }
            let probe = try connectRaw(path)
            if probe.fd >= 0 {
                Glibc.close(probe.fd)
                throw Failure("the socket '\(path)' is in use by another running process")
            }
            // A socket of ours nobody answers on: left by a run that died.
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        let old = umask(0o177)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        umask(old)
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            let message = String(cString: strerror(errno))
            Glibc.close(fd)
            throw Failure("cannot listen on '\(path)': \(message)")
        }
        return fd
    }

    /// Which file `path` is now (device, inode), to remove later only the socket we bound.
    public static func identity(of path: String) -> [UInt] {
        var st = stat()
        guard lstat(path, &st) == 0 else { return [] }
        return [UInt(st.st_dev), UInt(st.st_ino)]
    }

    /// Removes the socket this process bound at `path` (`identity` taken after binding), and
    /// nothing else: a file put there since stays.
    public static func remove(path: String, identity: [UInt]) {
        var st = stat()
        if !identity.isEmpty, lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK, [UInt(st.st_dev), UInt(st.st_ino)] == identity { unlink(path) }
    }

    /// Whether the process at the other end of a unix socket runs as this process's user (SO_PEERCRED).
    public static func peerIsOwner(_ fd: Int32) -> Bool { avg_peer_uid(fd) == Int(getuid()) }

    public static func peerUID(_ fd: Int32) -> Int { avg_peer_uid(fd) }

    /// Connects to a socket only if it is ours: the socket file and the process listening on it
    /// (SO_PEERCRED) must both belong to this user, so a socket another user bound first is
    /// refused, naming that user, before anything is sent to it.
    public static func connect(path: String) throws -> Int32 {
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else { throw Failure("'\(path)' is not a socket") }
            guard st.st_uid == getuid() else {
                throw Failure("the socket '\(path)' belongs to \(userName(st.st_uid)), not you; refusing to use it", foreign: true)
            }
        }
        let (fd, e) = try connectRaw(path)
        guard fd >= 0 else { throw Failure("cannot connect to '\(path)': \(String(cString: strerror(e)))") }
        let peer = avg_peer_uid(fd)
        guard peer == Int(getuid()) else {
            Glibc.close(fd)
            throw Failure("the process listening on '\(path)' runs as \(peer < 0 ? "an unknown user" : userName(uid_t(peer))), not you; refusing to use it",
                          foreign: true)
        }
        return fd
    }
}
