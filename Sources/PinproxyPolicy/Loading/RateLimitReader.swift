/// Reads a policy's `rate_limit:` (docs/contract.md §3).
struct RateLimitReader {
    func read(_ m: MappingReader, into map: inout SourceMap) -> RateLimitPolicy? {
        m.record(into: &map)
        guard m.has("requests_per_second") else {
            m.reader.bag.error(m.location, "`rate_limit` needs `requests_per_second` (e.g. `requests_per_second: 5`)")
            return nil
        }
        guard let node = m.node("requests_per_second"),
              let text = m.reader.text(node, key: "requests_per_second", expected: "a number greater than 0") else { return nil }
        guard let rate = Double(text), rate > 0, rate.isFinite else {
            m.reader.bag.error(m.valueLocation("requests_per_second"), "`requests_per_second` must be a number greater than 0, not `\(text)`")
            return nil
        }
        // Default burst: one second's worth, at least one request.
        let burst = m.has("burst") ? m.int("burst", atLeast: 1) : max(1, Int(rate.rounded(.up)))
        let per = m.has("per") ? m.choice("per", RateLimitPolicy.Per.self) : .policy
        guard let burst, let per else { return nil }
        return RateLimitPolicy(requestsPerSecond: rate, burst: burst, per: per)
    }
}
