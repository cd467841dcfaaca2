import Foundation
import Testing
@testable import PinproxySpotify

@Suite("application/x-www-form-urlencoded")
struct FormEncodingTests {
    static let escapes: [(String, String)] = [
        ("AZaz09-._~", "AZaz09-._~"),          // RFC 3986 unreserved: as is
        ("a b", "a+b"),
        ("a+b", "a%2Bb"),                      // a literal plus must not read back as a space
        ("50%", "50%25"),
        ("k=v&x", "k%3Dv%26x"),
        ("*'()!", "%2A%27%28%29%21"),
        ("http://127.0.0.1:8765/cb?x=1", "http%3A%2F%2F127.0.0.1%3A8765%2Fcb%3Fx%3D1"),
        ("é", "%C3%A9"),
        ("日本", "%E6%97%A5%E6%9C%AC"),
        ("🎵", "%F0%9F%8E%B5"),
        ("", ""),
    ]

    @Test(arguments: escapes)
    func componentsEscapeToTheUnreservedSet(text: String, escaped: String) {
        #expect(FormEncoding.escape(text) == escaped)
        #expect(FormEncoding.unescape(escaped) == text)
    }

    @Test func aURLQueryWritesSpacesAsPercent20() {
        #expect(FormEncoding.escape("user-read-private user-read-email", space: .percent20) == "user-read-private%20user-read-email")
        #expect(FormEncoding.encode([("scope", "a b"), ("x", "+")], space: .percent20) == "scope=a%20b&x=%2B")
        #expect(FormEncoding.unescape("a%20b+c") == "a b c")
    }

    @Test func pairsKeepTheirOrderAndRoundTrip() {
        let pairs = [
            ("grant_type", "authorization_code"), ("code", "AQ+b/c=="), ("redirect_uri", "com.example:/cb?a=1&b=2"),
            ("name with space", "value with space"), ("empty", ""), ("unicode", "Zoë 🎵 日本"), ("percent", "%41"),
        ]
        let body = FormEncoding.encode(pairs)
        #expect(body.hasPrefix("grant_type=authorization_code&code=AQ%2Bb%2Fc%3D%3D&"))
        let decoded = FormEncoding.decode(Array(body.utf8))
        #expect(decoded.map(\.0) == pairs.map(\.0))
        #expect(decoded.map(\.1) == pairs.map(\.1))
    }

    static let decodings: [(String, [String])] = [
        ("a=1&b=2", ["a", "1", "b", "2"]),
        ("a+b=c+d", ["a b", "c d"]),
        ("x=%2B", ["x", "+"]),
        ("x=%c3%a9", ["x", "é"]),                 // lowercase hex too
        ("x", ["x", ""]),                         // a name alone has an empty value
        ("=v", ["", "v"]),
        ("a=1&&b=2&", ["a", "1", "b", "2"]),      // empty segments are skipped
        ("a=b=c", ["a", "b=c"]),                  // only the first `=` separates
        ("x=%zz%4", ["x", "%zz%4"]),              // not an escape: kept as written
        ("x=100%", ["x", "100%"]),
        ("x=%FF", ["x", "\u{FFFD}"]),              // not UTF-8: the replacement character
        ("", []),
    ]

    @Test(arguments: decodings)
    func bodiesDecodeAsTheWHATWGStandardSays(body: String, flat: [String]) {
        let decoded = FormEncoding.decode(Array(body.utf8))
        #expect(decoded.flatMap { [$0.0, $0.1] } == flat)
    }

    @Test func everyByteSurvivesARoundTrip() {
        let text = String(decoding: (1...127).map(UInt8.init), as: UTF8.self) + "é€𝄞"
        let decoded = FormEncoding.decode(Array(FormEncoding.encode([(text, text)]).utf8))
        #expect(decoded.count == 1)
        #expect(decoded.first?.0 == text && decoded.first?.1 == text)
    }
}
