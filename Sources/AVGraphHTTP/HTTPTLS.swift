import AVGraphTransport
import NIOSSL

/// The TLS side of `--http-tls CERT,KEY`: the listeners' loader (`ListenTLS`), its failures said
/// as a flag's, each beginning with the file it is about.
public enum HTTPTLS {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// What a client may choose in the handshake (ALPN), preferred first: Apple's players fetch
    /// LL-HLS over HTTP/2 only; a client that offers neither gets HTTP/1.1.
    static let applicationProtocols = ["h2", "http/1.1"]

    public static func context(certificate: String, key: String) throws(Failure) -> NIOSSLContext {
        // ListenTLS checks the files and says what is wrong with them; its context offers no ALPN
        // (an RTMP listener needs none), so the server's own is the same pair built again with it.
        do { _ = try ListenTLS.context(certificate: certificate, key: key) } catch {
            switch error {
            case .unreadable(let path, let isCertificate, let exists):
                throw Failure(description: "\(path): cannot read the \(isCertificate ? "certificate" : "private key"): \(exists ? "not readable" : "no such file")")
            case .noCertificate(let path, let detail):
                throw Failure(description: "\(path): not a PEM certificate (\(detail))")
            case .noKey(let path, let detail):
                throw Failure(description: "\(path): not a PEM private key (\(detail))")
            case .mismatch(let certificate, let key, let detail):
                throw Failure(description: "\(key): not the private key of \(certificate) (\(detail))")
            }
        }
        do {
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            configuration.applicationProtocols = applicationProtocols
            return try NIOSSLContext(configuration: configuration)
        } catch {
            // Read a moment ago and found good: only a file changed in between gets here.
            throw Failure(description: "\(certificate): changed while it was read (\(error))")
        }
    }
}
