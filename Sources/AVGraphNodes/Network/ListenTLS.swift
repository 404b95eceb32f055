import Foundation
import NIOSSL

/// The TLS side of a listening `rtmps://` source: its certificate chain and private key, read
/// from PEM files, checked to belong together. Every failure names the file it is about; `check`
/// and the start report the same words.
enum ListenTLS {
    /// Why the files make no TLS server, and the option (`cert` or `key`) it is about.
    struct Problem: Error, CustomStringConvertible {
        var description: String
        var option: String
    }

    /// A server context for `certificate` (PEM: the server's certificate, then any chain) and
    /// `key` (its PEM private key).
    static func context(certificate: String, key: String) throws(Problem) -> NIOSSLContext {
        let certificateBytes = try read(certificate, "certificate", option: "cert"), keyBytes = try read(key, "key", option: "key")
        guard let chain = try? NIOSSLCertificate.fromPEMBytes(certificateBytes), !chain.isEmpty else {
            throw Problem(description: "the certificate file \(certificate) holds no PEM certificate (-----BEGIN CERTIFICATE-----)", option: "cert")
        }
        guard let privateKey = try? NIOSSLPrivateKey(bytes: keyBytes, format: .pem) else {
            throw Problem(description: "the key file \(key) holds no PEM private key (an encrypted key needs its passphrase removed)", option: "key")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(privateKey))
        do { return try NIOSSLContext(configuration: configuration) } catch {
            throw Problem(description: "the key in \(key) does not belong to the certificate in \(certificate) (\(error))", option: "key")
        }
    }

    private static func read(_ path: String, _ what: String, option: String) throws(Problem) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw Problem(description: "cannot read the \(what) file \(path)", option: option) }
        return [UInt8](data)
    }
}
