import Foundation
import NIOSSL

/// A TLS server's certificate chain and private key, read from PEM files and checked to belong
/// together: the one loader of `rtmps://` listeners and of `--http-tls`. Each says a failure in
/// its own words (an option's error at `check`, a flag's at start); both name the file.
public enum ListenTLS {
    /// Why the files make no TLS server.
    public enum Failure: Error {
        case unreadable(path: String, certificate: Bool, exists: Bool)
        case noCertificate(path: String, detail: String)
        case noKey(path: String, detail: String)
        case mismatch(certificate: String, key: String, detail: String)
    }

    /// What a listening source's `check` says: the text, and the option (`cert` or `key`) it is about.
    package struct Problem: Error, CustomStringConvertible {
        package var description: String
        package var option: String

        package init(_ failure: Failure) {
            switch failure {
            case .unreadable(let path, let certificate, _):
                (description, option) = ("cannot read the \(certificate ? "certificate" : "key") file \(path)", certificate ? "cert" : "key")
            case .noCertificate(let path, _):
                (description, option) = ("the certificate file \(path) holds no PEM certificate (-----BEGIN CERTIFICATE-----)", "cert")
            case .noKey(let path, _):
                (description, option) = ("the key file \(path) holds no PEM private key (an encrypted key needs its passphrase removed)", "key")
            case .mismatch(let certificate, let key, let detail):
                (description, option) = ("the key in \(key) does not belong to the certificate in \(certificate) (\(detail))", "key")
            }
        }
    }

    /// A server context for `certificate` (PEM: the server's certificate, then any chain) and
    /// `key` (its PEM private key).
    public static func context(certificate: String, key: String) throws(Failure) -> NIOSSLContext {
        let certificateBytes = try read(certificate, certificate: true), keyBytes = try read(key, certificate: false)
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMBytes(certificateBytes) } catch {
            throw .noCertificate(path: certificate, detail: "\(error)")
        }
        guard !chain.isEmpty else { throw .noCertificate(path: certificate, detail: "no certificate in it") }
        let privateKey: NIOSSLPrivateKey
        do { privateKey = try NIOSSLPrivateKey(bytes: keyBytes, format: .pem) } catch {
            throw .noKey(path: key, detail: "\(error)")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(privateKey))
        do { return try NIOSSLContext(configuration: configuration) } catch {
            throw .mismatch(certificate: certificate, key: key, detail: "\(error)")
        }
    }

    /// The context, or the problem as a listening source's `check` says it.
    package static func checkedContext(certificate: String, key: String) throws(Problem) -> NIOSSLContext {
        do { return try context(certificate: certificate, key: key) } catch { throw Problem(error) }
    }

    private static func read(_ path: String, certificate: Bool) throws(Failure) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .unreadable(path: path, certificate: certificate, exists: FileManager.default.fileExists(atPath: path))
        }
        return [UInt8](data)
    }
}
