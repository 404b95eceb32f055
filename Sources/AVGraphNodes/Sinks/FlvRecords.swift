import AVGraph
import AVGraphTransport
import Foundation

/// The decoder configuration records FLV's sequence headers carry, and pictures in FLV's
/// framing, from what an encoder or a source hands the `rtmp` sink (`RtmpLiveSession`). What
/// cannot be made is an error the run reports under the sink's name.
public enum FlvRecords {
    /// FLV's AVC sequence header body: an avcC record as it is (a passthrough, an MP4 source),
    /// Annex B parameter sets (libx264's global header) gathered into one.
    public static func avc(_ extradata: [UInt8]) throws -> [UInt8] {
        if extradata.first == 1, AvcConfiguration(extradata) != nil { return extradata }
        guard let record = AvcConfiguration(annexB: extradata) else {
            throw LiveSessionRefused(description: "its H.264 stream has no SPS and PPS in its extradata (neither avcC nor Annex B)")
        }
        return record.bytes
    }

    /// The SequenceStart's hvcC: the record as a passthrough carries it, or made from x265's
    /// Annex B VPS, SPS and PPS.
    public static func hevc(_ extradata: [UInt8]) throws -> [UInt8] {
        if extradata.first == 1, HevcConfiguration(extradata) != nil { return extradata }
        guard let record = HevcRecordWriter.record(units: AvcConfiguration.units(annexB: extradata[...])) else {
            throw LiveSessionRefused(description: "its HEVC stream has no VPS, SPS and PPS avgraph can read in its extradata")
        }
        return record
    }

    /// An Annex B picture (start codes) with each NAL unit behind a 4-byte length instead.
    public static func lengthPrefixed(annexB bytes: ArraySlice<UInt8>) -> [UInt8] {
        AvcConfiguration.lengthPrefixed(annexB: bytes, lengthSize: 4)
    }
}
