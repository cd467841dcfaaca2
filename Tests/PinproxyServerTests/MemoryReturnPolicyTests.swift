@testable import PinproxyServer
import Testing

/// When a trim is worth its cost: after a real burst, once most of it is gone.
struct MemoryReturnPolicyTests {
    @Test(arguments: [
        (count: 0, peak: 10, trim: false),      // a quiet proxy: nothing to give back
        (count: 0, peak: 256, trim: true),      // a burst, fully drained
        (count: 40, peak: 400, trim: true),     // down to a tenth: most of it is free
        (count: 100, peak: 400, trim: false),   // still a quarter open
        (count: 300, peak: 300, trim: false),   // at its peak
    ])
    func trimsOnlyAfterABurstHasMostlyDrained(count: Int, peak: Int, trim: Bool) {
        #expect(MemoryReturn.drained(count, peak: peak) == trim)
    }

    @Test func mallocTrimIsFoundOnGlibc() {
        #if os(Linux)
        #expect(MemoryReturn.mallocTrim != nil)
        #endif
        #expect(MemoryReturn.residentBytes() > 0)
    }
}
