import AVGraph
import Foundation

/// The `screen` source's `region`: a rectangle of a screen, `x,y,WxH` from its top-left corner.
public struct ScreenRegion: OptionValueType {
    public var x: Int, y: Int, width: Int, height: Int

    public init(x: Int, y: Int, width: Int, height: Int) { self.x = x; self.y = y; self.width = width; self.height = height }

    public static let syntax = "x,y,WxH"
    public static let example = "0,0,1280x720 (x,y,WxH)"
    public static var schema: JSONValue { ["type": "string", "pattern": "^\\s*[0-9]+\\s*,\\s*[0-9]+\\s*,\\s*[0-9]+[xX][0-9]+\\s*$"] }

    /// `x,y,WxH` (`0,0,1280x720`); spaces around the parts are allowed. Nil when the text does not fit.
    public static func read(_ s: String) -> ScreenRegion? {
        let parts = s.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 3, let x = Int(parts[0]), let y = Int(parts[1]), x >= 0, y >= 0,
              let wh = ValueSyntax.size(parts[2]) else { return nil }
        return ScreenRegion(x: x, y: y, width: wh.width, height: wh.height)
    }

    public static func parse(_ value: PipeValue) throws(ValueProblem) -> ScreenRegion {
        guard let s = value.scalar else { throw ValueProblem(message: "expected \(syntax), got \(value.shown)", hint: "write it like \(example)") }
        guard let r = read(s) else { throw ValueProblem(message: "\(PipeValue.quoted(s)) is not a valid \(syntax)", hint: "write it like \(example)") }
        guard r.width <= 16384, r.height <= 16384, r.x <= 65535, r.y <= 65535 else {
            throw ValueProblem(message: "region \(PipeValue.quoted(s)) is out of range (corner up to 65535,65535, size up to 16384x16384)")
        }
        return r
    }

    public var text: String { "\(x),\(y),\(width)x\(height)" }
}
