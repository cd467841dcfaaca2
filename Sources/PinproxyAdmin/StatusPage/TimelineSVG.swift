import Foundation
import PinproxyPolicy

/// One policy's pin timeline as inline SVG: a row per pin, the transition
/// window shaded, warning and outage stretches tinted across all rows, today
/// as a line on the left edge, and month ticks. Every element carries a
/// `data-kind` and a `<title>` so a browser test and a screen reader can read it.
enum TimelineSVG {
    static let width = 720.0
    static let labelWidth = 0.0
    static let rowHeight = 18.0
    static let axisHeight = 18.0

    static func render(_ timeline: PinTimelineModel) -> String {
        let rows = max(timeline.bars.count, 1)
        let height = axisHeight + Double(rows) * rowHeight + 6
        let span = timeline.end.timeIntervalSince(timeline.start)
        func x(_ date: Date) -> Double { (date.timeIntervalSince(timeline.start) / span * width).clamped(0, width) }
        func f(_ value: Double) -> String { String(format: "%.1f", value) }

        var out = "<svg class=\"timeline\" role=\"img\" viewBox=\"0 0 \(f(width)) \(f(height))\" width=\"100%\" "
            + "preserveAspectRatio=\"none\" "
            + "aria-label=\"pin timeline, next \(Int(span / 86_400)) days\">"
        // Stretches and the transition first, so the bars draw over them.
        for stretch in timeline.stretches + (timeline.transition.map { [$0] } ?? []) {
            let left = x(stretch.from)
            let w = max(x(stretch.until) - left, 2)
            let what: String
            switch stretch.kind {
            case .warning: what = "fewer than two active pins"
            case .outage: what = "no active pin: outage"
            case .transition: what = "transition window: mismatches reported, not refused"
            }
            out += "<rect data-kind=\"\(stretch.kind.rawValue)\" class=\"\(stretch.kind.rawValue)\" x=\"\(f(left))\" y=\"\(f(axisHeight))\" "
                + "width=\"\(f(w))\" height=\"\(f(Double(rows) * rowHeight))\"><title>\(HTMLText.escape(what)) "
                + "\(DateText.format(stretch.from)) – \(DateText.format(stretch.until))</title></rect>"
        }
        // Month ticks: the first of each month inside the window.
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var month = calendar.date(from: calendar.dateComponents([.year, .month], from: timeline.start))!
        while month <= timeline.end {
            if month > timeline.start {
                let tick = x(month)
                let label = month.formatted(Date.FormatStyle(timeZone: calendar.timeZone).month(.abbreviated).day())
                out += "<line class=\"tick\" x1=\"\(f(tick))\" x2=\"\(f(tick))\" y1=\"\(f(axisHeight - 4))\" y2=\"\(f(height))\"/>"
                    + "<text class=\"tick\" x=\"\(f(tick + 3))\" y=\"12\">\(HTMLText.escape(label))</text>"
            }
            month = calendar.date(byAdding: .month, value: 1, to: month)!
        }
        for (index, bar) in timeline.bars.enumerated() {
            let y = axisHeight + Double(index) * rowHeight + 3
            let left = x(bar.from)
            let w = max(x(bar.until) - left, 2)
            let ends = bar.notAfter.map { "until \(DateText.format($0))" } ?? "no end date"
            let label = "sha256/\(bar.pin.prefix(12))…" + (bar.note.map { " \($0)" } ?? "")
                + (bar.opensAfter ? "" : bar.notAfter.map { " · until \(DateText.format($0).prefix(10))" } ?? "")
            out += "<g data-kind=\"pin\" data-pin=\"\(HTMLText.escape(bar.pin))\">"
                + "<rect class=\"pin\(bar.activeNow ? "" : " pending")\" x=\"\(f(left))\" y=\"\(f(y))\" width=\"\(f(w))\" "
                + "height=\"\(f(rowHeight - 6))\" rx=\"3\"><title>\(HTMLText.escape(label)) \(ends)</title></rect>"
                + "<text class=\"pinlabel\" x=\"\(f(min(left + 4, width - 200)))\" y=\"\(f(y + rowHeight - 9))\">"
                + "\(HTMLText.escape(label))</text></g>"
        }
        out += "<line data-kind=\"today\" class=\"today\" x1=\"1\" x2=\"1\" y1=\"0\" y2=\"\(f(height))\"><title>now \(DateText.format(timeline.start))</title></line>"
        out += "<text class=\"tick\" x=\"4\" y=\"12\">today</text>"
        return out + "</svg>"
    }
}

extension Double {
    func clamped(_ low: Double, _ high: Double) -> Double { Swift.min(Swift.max(self, low), high) }
}

/// Text into HTML (element content and double-quoted attributes alike).
/// It walks Unicode scalars, not `Character`s: a grapheme cluster such as
/// U+0600 + `<` or `"` + U+0301 compares unequal to `<` or `"`, so escaping
/// per character would let the markup through raw.
enum HTMLText {
    static func escape(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out.append(contentsOf: "&amp;".unicodeScalars)
            case "<": out.append(contentsOf: "&lt;".unicodeScalars)
            case ">": out.append(contentsOf: "&gt;".unicodeScalars)
            case "\"": out.append(contentsOf: "&quot;".unicodeScalars)
            case "'": out.append(contentsOf: "&#39;".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
