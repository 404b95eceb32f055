import AVGraphTransport
import NIOSSL

/// The TLS side of `--http-tls CERT,KEY`: the listeners' loader (`ListenTLS`), its failures said
/// as a flag's, each beginning with the file it is about.
public enum HTTPTLS {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public static func context(certificate: String, key: String) throws(Failure) -> NIOSSLContext {
        do { return try ListenTLS.context(certificate: certificate, key: key) } catch {
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
    }
}
