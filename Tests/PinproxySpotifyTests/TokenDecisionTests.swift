import Foundation
import PinproxyPolicy
import Testing
@testable import PinproxySpotify

@Suite("Pure token decisions")
struct TokenDecisionTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func reply(_ status: Int, _ body: String, headers: [(String, String)] = []) -> TokenReply {
        TokenReply(TokenEndpointResponse(status: status, headers: headers, body: Array(body.utf8)), now: now)
    }

    static let classified: [(Int, String, [(String, String)], TokenReply)] = [
        (200, #"{"access_token": "a", "token_type": "Bearer", "expires_in": 3600}"#, [],
         .granted(.init(accessToken: Secret("a"), lifetime: 3600, refreshToken: nil, scope: nil))),
        (200, #"{"access_token": "a", "token_type": "bearer", "expires_in": 3600.0, "refresh_token": "r", "scope": "user-read-email"}"#, [],
         .granted(.init(accessToken: Secret("a"), lifetime: 3600, refreshToken: Secret("r"), scope: "user-read-email"))),
        (200, #"{"access_token": "a", "token_type": "mac", "expires_in": 3600}"#, [], .failed(reason: "HTTP 200 whose token_type is not bearer")),
        (200, #"{"access_token": "a", "token_type": "Bearer"}"#, [], .failed(reason: "HTTP 200 without a positive expires_in")),
        (200, #"{"token_type": "Bearer", "expires_in": 3600}"#, [], .failed(reason: "HTTP 200 without access_token")),
        (200, "not json", [], .failed(reason: "HTTP 200 whose body is not a JSON object")),
        (400, #"{"error": "invalid_client", "error_description": "Invalid client secret"}"#, [], .invalidClient),
        (401, #"{"error": "invalid_client", "error_description": "Invalid client"}"#, [], .invalidClient),
        (400, #"{"error": "invalid_grant", "error_description": "Invalid refresh token"}"#, [], .invalidGrant),
        // The message text never decides: an invalid_request that says "invalid client" is still invalid_request.
        (400, #"{"error": "invalid_request", "error_description": "invalid_client"}"#, [], .rejected(code: "invalid_request", status: 400)),
        (400, #"{"error": "weird code!<script>"}"#, [], .rejected(code: "weirdcodescript", status: 400)),
        (403, "<html>blocked</html>", [], .failed(reason: "HTTP 403 without an OAuth error code")),
        (429, "", [("retry-after", "7")], .rateLimited(retryAfter: now.addingTimeInterval(7))),
        (429, "", [], .rateLimited(retryAfter: nil)),
        (500, #"{"error": "server_error"}"#, [], .failed(reason: "HTTP 500")),
        (503, "", [], .failed(reason: "HTTP 503")),
    ]

    @Test(arguments: classified.indices)
    func classifiesReplies(_ index: Int) {
        let (status, body, headers, expected) = Self.classified[index]
        #expect(Self.reply(status, body, headers: headers) == expected)
    }

    @Test func retryAfterTakesSecondsOrAnHTTPDate() {
        #expect(RetryAfter.parse("120", now: Self.now) == Self.now.addingTimeInterval(120))
        #expect(RetryAfter.parse(" 0 ", now: Self.now) == Self.now)
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: Self.now) == Date(timeIntervalSince1970: 784_111_777))
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: Self.now) == Date(timeIntervalSince1970: 784_111_777))
        #expect(RetryAfter.parse("Sun Nov  6 08:49:37 1994", now: Self.now) == Date(timeIntervalSince1970: 784_111_777))
        #expect(RetryAfter.parse("-5", now: Self.now) == nil)
        #expect(RetryAfter.parse("soon", now: Self.now) == nil)
    }

    @Test(arguments: [
        // (lifetime, refresh_before seconds, seconds after issue when refresh is due)
        (3600.0, 300, 3300.0),
        (3.0, 300, 1.5),
        (600.0, 300, 300.0),
        (600.0, 0, 600.0),
    ])
    func softDeadlineIsTheSmallerLead(_ lifetime: Double, _ before: Int, _ due: Double) {
        let deadline = RefreshTiming.softDeadline(issuedAt: Self.now, lifetime: lifetime, refreshBefore: .seconds(before))
        #expect(deadline.timeIntervalSince(Self.now) == due)
    }

    @Test func backoffIsFullJitterCappedAndNeverBeforeRetryAfter() {
        var backoff: Backoff?
        var ceilings: [Double] = []
        for _ in 0..<10 {
            backoff = Backoff.after(backoff, now: Self.now, retryAfter: nil, random: { ceilings.append($0.upperBound); return $0.upperBound })
        }
        #expect(ceilings == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60])
        #expect(backoff?.notBefore == Self.now.addingTimeInterval(60))
        let zero = Backoff.after(nil, now: Self.now, retryAfter: nil, random: { $0.lowerBound })
        #expect(zero.notBefore == Self.now.addingTimeInterval(Backoff.floor))
        let limited = Backoff.after(nil, now: Self.now, retryAfter: Self.now.addingTimeInterval(30), random: { $0.upperBound })
        #expect(limited.notBefore == Self.now.addingTimeInterval(30))
        #expect(limited.rateLimitedUntil == Self.now.addingTimeInterval(30))
    }
}
