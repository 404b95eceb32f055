import CFFmpeg

/// `avcodec_open2` with codec-private options by their FFmpeg names (`preset`, `frame_duration`...).
/// An option the encoder does not know stays in the dictionary; it is an error, not silently ignored
/// (a misspelled option would otherwise encode with the default).
func openEncoder(_ context: UnsafeMutablePointer<AVCodecContext>, _ codec: UnsafePointer<AVCodec>, options: [String: String]) throws {
    var dict: OpaquePointer?
    for (k, v) in options { av_dict_set(&dict, k, v, 0) }
    defer { av_dict_free(&dict) }
    let name = String(cString: codec.pointee.name)
    try AVFailure.check(avcodec_open2(context, codec, &dict), "opening the \(name) encoder")
    if let left = av_dict_get(dict, "", nil, AV_DICT_IGNORE_SUFFIX) {
        throw MediaError("the \(name) encoder does not know option '\(String(cString: left.pointee.key))'")
    }
}
