import Foundation
import NIOSSL

/// The TLS side of `--http-tls CERT,KEY`: a certificate chain and its private key, PEM files.
public enum HTTPTLS {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// A server context for the two files; every way they can be wrong is said with the file's name.
    public static func context(certificate: String, key: String) throws -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMBytes(try read(certificate, as: "certificate")) } catch let f as Failure { throw f } catch {
            throw Failure(description: "\(certificate): not a PEM certificate (\(error))")
        }
        guard !chain.isEmpty else { throw Failure(description: "\(certificate): no PEM certificate in it") }
        let privateKey: NIOSSLPrivateKey
        do { privateKey = try NIOSSLPrivateKey(bytes: try read(key, as: "private key"), format: .pem) } catch let f as Failure { throw f } catch {
            throw Failure(description: "\(key): not a PEM private key (\(error))")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(privateKey))
        do { return try NIOSSLContext(configuration: configuration) } catch {
            throw Failure(description: "\(key): not the private key of \(certificate) (\(error))")
        }
    }

    private static func read(_ path: String, as what: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            let why = FileManager.default.fileExists(atPath: path) ? "not readable" : "no such file"
            throw Failure(description: "\(path): cannot read the \(what): \(why)")
        }
        return Array(data)
    }
}
