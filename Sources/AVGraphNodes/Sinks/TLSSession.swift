import Foundation

/// TLS over a connected socket for `https://` uploads, from the GnuTLS that libavformat already
/// brought into the process (looked up by name, so avgraph links nothing new). The server's
/// certificate is checked against the system's trusted authorities (or `caFile`) and its name.
final class TLSSession {
    private let api: GnuTLS
    private var session: OpaquePointer?
    private var credentials: OpaquePointer?

    init(fd: Int32, host: String, caFile: String?) throws {
        guard let api = GnuTLS.shared else { throw Upload.Failure(description: "https needs GnuTLS (libgnutls.so.30), not found") }
        self.api = api
        func check(_ r: Int32, _ what: String) throws {
            if r < 0 { throw Upload.Failure(description: "TLS \(what): \(String(cString: api.strerror(r)))") }
        }
        try check(api.certificateAllocateCredentials(&credentials), "credentials")
        if let caFile {
            try check(api.certificateSetX509TrustFile(credentials, caFile, 1 /* PEM */), "reading \(caFile)")
        } else {
            try check(api.certificateSetX509SystemTrust(credentials), "system trust")
        }
        try check(api.initSession(&session, 2 /* GNUTLS_CLIENT */), "session")
        try check(api.setDefaultPriority(session), "priority")
        try check(api.credentialsSet(session, 1 /* GNUTLS_CRD_CERTIFICATE */, UnsafeMutableRawPointer(credentials)), "credentials")
        try check(host.withCString { api.serverNameSet(session, 1 /* GNUTLS_NAME_DNS */, $0, strlen($0)) }, "server name")
        host.withCString { api.sessionSetVerifyCert(session, $0, 0) }
        api.transportSetInt2(session, fd, fd)
        var r: Int32
        repeat { r = api.handshake(session) } while r < 0 && api.errorIsFatal(r) == 0
        try check(r, "handshake with \(host)")
    }

    deinit {
        if let session { api.deinitSession(session) }
        if let credentials { api.certificateFreeCredentials(credentials) }
    }

    func send(_ p: UnsafeRawPointer, _ count: Int) throws -> Int {
        while true {
            let n = api.recordSend(session, p, count)
            if n >= 0 { return n }
            if api.errorIsFatal(Int32(n)) != 0 { throw Upload.Failure(description: "TLS send: \(String(cString: api.strerror(Int32(n))))") }
        }
    }

    func recv(_ p: UnsafeMutableRawPointer, _ count: Int) throws -> Int {
        while true {
            let n = api.recordRecv(session, p, count)
            if n >= 0 { return n }
            if api.errorIsFatal(Int32(n)) != 0 { throw Upload.Failure(description: "TLS receive: \(String(cString: api.strerror(Int32(n))))") }
        }
    }

    func close() { _ = api.bye(session, 1 /* GNUTLS_SHUT_WR */) }
}

/// The GnuTLS functions an https upload uses, found in the running process.
struct GnuTLS: @unchecked Sendable {
    typealias Session = OpaquePointer?
    let certificateAllocateCredentials: @convention(c) (UnsafeMutablePointer<OpaquePointer?>) -> Int32
    let certificateSetX509SystemTrust: @convention(c) (OpaquePointer?) -> Int32
    let certificateSetX509TrustFile: @convention(c) (OpaquePointer?, UnsafePointer<CChar>, Int32) -> Int32
    let certificateFreeCredentials: @convention(c) (OpaquePointer?) -> Void
    let initSession: @convention(c) (UnsafeMutablePointer<OpaquePointer?>, UInt32) -> Int32
    let setDefaultPriority: @convention(c) (Session) -> Int32
    let credentialsSet: @convention(c) (Session, Int32, UnsafeMutableRawPointer?) -> Int32
    let serverNameSet: @convention(c) (Session, Int32, UnsafeRawPointer, Int) -> Int32
    let sessionSetVerifyCert: @convention(c) (Session, UnsafePointer<CChar>, UInt32) -> Void
    let transportSetInt2: @convention(c) (Session, Int32, Int32) -> Void
    let handshake: @convention(c) (Session) -> Int32
    let recordSend: @convention(c) (Session, UnsafeRawPointer, Int) -> Int
    let recordRecv: @convention(c) (Session, UnsafeMutableRawPointer, Int) -> Int
    let bye: @convention(c) (Session, Int32) -> Int32
    let deinitSession: @convention(c) (Session) -> Void
    let errorIsFatal: @convention(c) (Int32) -> Int32
    let strerror: @convention(c) (Int32) -> UnsafePointer<CChar>

    static let shared: GnuTLS? = {
        let handle = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_NOLOAD) ?? dlopen("libgnutls.so.30", RTLD_NOW)
        guard let handle else { return nil }
        func f<T>(_ name: String) -> T? { dlsym(handle, name).map { unsafeBitCast($0, to: T.self) } }
        guard let a: @convention(c) (UnsafeMutablePointer<OpaquePointer?>) -> Int32 = f("gnutls_certificate_allocate_credentials"),
              let b: @convention(c) (OpaquePointer?) -> Int32 = f("gnutls_certificate_set_x509_system_trust"),
              let c: @convention(c) (OpaquePointer?, UnsafePointer<CChar>, Int32) -> Int32 = f("gnutls_certificate_set_x509_trust_file"),
              let d: @convention(c) (OpaquePointer?) -> Void = f("gnutls_certificate_free_credentials"),
              let e: @convention(c) (UnsafeMutablePointer<OpaquePointer?>, UInt32) -> Int32 = f("gnutls_init"),
              let g: @convention(c) (Session) -> Int32 = f("gnutls_set_default_priority"),
              let h: @convention(c) (Session, Int32, UnsafeMutableRawPointer?) -> Int32 = f("gnutls_credentials_set"),
              let i: @convention(c) (Session, Int32, UnsafeRawPointer, Int) -> Int32 = f("gnutls_server_name_set"),
              let j: @convention(c) (Session, UnsafePointer<CChar>, UInt32) -> Void = f("gnutls_session_set_verify_cert"),
              let k: @convention(c) (Session, Int32, Int32) -> Void = f("gnutls_transport_set_int2"),
              let l: @convention(c) (Session) -> Int32 = f("gnutls_handshake"),
              let m: @convention(c) (Session, UnsafeRawPointer, Int) -> Int = f("gnutls_record_send"),
              let n: @convention(c) (Session, UnsafeMutableRawPointer, Int) -> Int = f("gnutls_record_recv"),
              let o: @convention(c) (Session, Int32) -> Int32 = f("gnutls_bye"),
              let p: @convention(c) (Session) -> Void = f("gnutls_deinit"),
              let q: @convention(c) (Int32) -> Int32 = f("gnutls_error_is_fatal"),
              let r: @convention(c) (Int32) -> UnsafePointer<CChar> = f("gnutls_strerror") else { return nil }
        return GnuTLS(certificateAllocateCredentials: a, certificateSetX509SystemTrust: b, certificateSetX509TrustFile: c,
                      certificateFreeCredentials: d, initSession: e, setDefaultPriority: g, credentialsSet: h, serverNameSet: i,
                      sessionSetVerifyCert: j, transportSetInt2: k, handshake: l, recordSend: m, recordRecv: n, bye: o, deinitSession: p,
                      errorIsFatal: q, strerror: r)
    }()
}
