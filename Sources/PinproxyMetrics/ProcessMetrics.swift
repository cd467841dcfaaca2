import Foundation
import Prometheus

/// The standard `process_*` families every Prometheus client library exports
/// (resident and virtual memory, open and maximum descriptors, CPU time,
/// start time), which docs/operations.md's alerts and dashboards use.
/// swift-prometheus 2.4 has no process collector, so they are read from
/// `/proc/self` at each scrape (`updateProcess()`); where there is no
/// `/proc` (macOS development) they are simply absent.
extension PinproxyMetrics {
    /// Reads `/proc/self/stat`, `/proc/self/fd` and the descriptor limit now.
    public func updateProcess() {
        guard let sample = ProcessSample.read() else { return }
        func gauge(_ name: String, _ help: String) -> Gauge {
            registry.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help))
        }
        gauge("process_resident_memory_bytes", "Resident memory size in bytes.").set(to: sample.residentBytes)
        gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.").set(to: sample.virtualBytes)
        gauge("process_open_fds", "Number of open file descriptors.").set(to: sample.openFDs)
        gauge("process_max_fds", "Maximum number of open file descriptors (the soft limit).").set(to: sample.maxFDs)
        gauge("process_start_time_seconds", "Start time of the process since the Unix epoch in seconds.").set(to: sample.startTime)
        // A counter (as the convention has it) fed the CPU time used since the last scrape.
        let cpu = registry.makeCounter(descriptor: MetricNameDescriptor(
            metricName: "process_cpu_seconds_total", unitName: "", helpText: "Total user and system CPU time spent in seconds."))
        let delta = state.withLockedValue { state -> Double in
            let delta = max(0, sample.cpuSeconds - state.processCPUSeconds)
            state.processCPUSeconds = max(state.processCPUSeconds, sample.cpuSeconds)
            return delta
        }
        cpu.increment(by: delta)
    }
}

/// One reading of the process's own numbers from Linux's `/proc`.
struct ProcessSample {
    var cpuSeconds: Double
    var residentBytes: Double
    var virtualBytes: Double
    var openFDs: Double
    var maxFDs: Double
    var startTime: Double

    static func read() -> ProcessSample? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let fields = parse(stat: stat),
              let bootTime = bootTime() else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count).map(Double.init) ?? 0
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return ProcessSample(
            cpuSeconds: (fields.utime + fields.stime) / ticks, residentBytes: fields.rssPages * page, virtualBytes: fields.vsize,
            openFDs: fds, maxFDs: Double(limit.rlim_cur), startTime: bootTime + fields.startTicks / ticks)
    }

    /// Fields 14, 15, 22, 23 and 24 of `proc(5)`'s stat line, counted after the
    /// command name, which is in parentheses and may itself hold spaces.
    static func parse(stat: String) -> (utime: Double, stime: Double, startTicks: Double, vsize: Double, rssPages: Double)? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        // After ")": field 3 (state) is index 0, so field N is index N - 3.
        let rest = stat[stat.index(after: close)...].split(separator: " ").compactMap { Double($0) ?? ($0.count == 1 ? 0 : nil) }
        guard rest.count > 21 else { return nil }
        return (rest[11], rest[12], rest[19], rest[20], rest[21])
    }

    /// `btime` of `/proc/stat`: the boot time the start ticks count from.
    static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix("btime ") }.flatMap { Double($0.dropFirst(6)) }
    }
}
