/// How one fuzz input is cut into reads: segments separated by the two bytes
/// 0x00 0xFF (rare in HTTP, YAML and TLS alike), so the fuzzer learns to split
/// a message across reads and to put several in one.
enum FuzzInput {
    static let separator: [UInt8] = [0x00, 0xFF]

    static func segments(_ bytes: ArraySlice<UInt8>, limit: Int = 64) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var index = start
        while index + 1 < bytes.endIndex, out.count < limit - 1 {
            if bytes[index] == separator[0] && bytes[index + 1] == separator[1] {
                out.append(bytes[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        out.append(bytes[start...])
        return out
    }
}
