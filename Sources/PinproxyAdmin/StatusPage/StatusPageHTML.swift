import Foundation
import PinproxyPolicy

/// The status page's HTML (docs/contract.md §13): one document, styles inline,
/// no script, no URL of anything else; it refreshes itself with a meta tag.
/// Every text from configuration or the network goes through `HTMLText.escape`.
public enum StatusPageHTML {
    /// Served with the page: nothing may load from anywhere, styles only from the page itself.
    public static let contentSecurityPolicy =
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    public static func render(_ model: StatusPageModel) -> String {
        let e = HTMLText.escape
        var html = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta http-equiv="refresh" content="\(model.refreshSeconds)">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>pinproxy status</title>
        <style>\(style)</style></head><body>
        <header><h1>pinproxy</h1><p class="muted">as of \(e(DateText.format(model.now))) · refreshes every \(model.refreshSeconds) s · \
        \(model.hosts.count) host polic\(model.hosts.count == 1 ? "y" : "ies") · hosts without a policy: \(e(model.defaultAction))</p></header>
        <main>
        """
        // What is failing now leads, in red; what will fail (expiry) follows.
        html += failingSection(model)
        let warned = model.hosts.filter { $0.timeline?.headline != nil }.map(\.pattern)
        if !warned.isEmpty {
            html += "<p class=\"alert warning\" data-kind=\"summary\">Pins run thin within \(model.timelineDays) days for: "
                + e(warned.joined(separator: ", ")) + "</p>"
        }
        html += reloadSection(model)
        html += "<section id=\"hosts\"><h2>Host policies</h2>"
        if model.hosts.isEmpty { html += "<p class=\"muted\">No host policy is loaded.</p>" }
        for host in model.hosts { html += hostSection(host, model: model) }
        html += "</section>"
        html += sessionsSection(model)
        html += "</main></body></html>\n"
        return html
    }

    static func hostSection(_ host: StatusPageModel.Host, model: StatusPageModel) -> String {
        let e = HTMLText.escape
        let warning = host.timeline?.headline
        var out = "<article class=\"host\(host.isFailing ? " failing" : "")\" data-policy=\"\(e(host.pattern))\">"
        out += "<h3>\(e(host.pattern)) <span class=\"badge \(e(host.action))\">\(e(host.action))</span>"
        if let enforcement = host.enforcement {
            out += " <span class=\"badge soft\">\(e(enforcement.replacingOccurrences(of: "_", with: " ")))</span>"
        }
        out += "</h3><dl>"
        out += "<dt>file</dt><dd>\(e(host.file))</dd>"
        if !host.upstream.isEmpty { out += "<dt>upstream</dt><dd>\(e(host.upstream.joined(separator: ", ")))</dd>" }
        if let credential = host.credential {
            out += "<dt>credential</dt><dd data-kind=\"credential\">\(e(credential))</dd>"
        }
        if host.action == "intercept" {
            out += "<dt>tls</dt><dd>\(e(host.tlsSummary))</dd>"
            let verdicts = host.verdicts.isEmpty ? "none yet" : host.verdicts.map { verdict in
                let refusing = verdict.count > 0 && (verdict.label == "mismatch_enforced" || verdict.label == "no_active_pins")
                return refusing ? "<span class=\"bad\">\(e(verdict.label)) \(verdict.count)</span>" : "\(e(verdict.label)) \(verdict.count)"
            }.joined(separator: " · ")
            out += "<dt>pin verdicts</dt><dd class=\"verdicts\">\(verdicts)</dd>"
            if let refused = host.recentRefusals {
                out += "<dt>refused now</dt><dd class=\"bad\" data-kind=\"refused-now\">\(e(refusalText(refused)))</dd>"
            }
            if let leaf = host.leafNotAfter {
                let days = model.daysLeft(leaf)
                out += "<dt>upstream leaf</dt><dd class=\"\(days < 14 ? "warn" : "")\">expires \(e(DateText.format(leaf))) (\(days) days)</dd>"
            } else {
                out += "<dt>upstream leaf</dt><dd class=\"muted\">not seen yet</dd>"
            }
            out += "<dt>last probe</dt><dd>\(probeText(host.probe, model: model))</dd>"
            if !host.observedHosts.isEmpty {
                let seen = host.observedHosts.map { "\($0.host) (\($0.chains) chain\($0.chains == 1 ? "" : "s"))" }.joined(separator: ", ")
                out += "<dt>chains seen</dt><dd>\(e(seen))</dd>"
            }
        }
        out += "</dl>"
        if let timeline = host.timeline {
            if let warning {
                let outage = timeline.stretches.contains { $0.kind == .outage }
                out += "<p class=\"alert \(outage ? "outage" : "warning")\" data-kind=\"timeline-warning\">\(e(warning))</p>"
            }
            out += "<figure>" + TimelineSVG.render(timeline)
            out += "<figcaption class=\"muted\">pins over the next \(Int(timeline.end.timeIntervalSince(timeline.start) / 86_400)) days; "
                + "amber: fewer than two active pins, red: none, blue: transition window</figcaption></figure>"
        } else if host.action == "intercept" {
            out += "<p class=\"muted\">No pins: the verified chain alone is trusted.</p>"
        }
        return out + "</article>"
    }

    /// The red block at the top: hosts whose pins refused client connections
    /// within the window, and hosts whose last probe failed.
    static func failingSection(_ model: StatusPageModel) -> String {
        let failing = model.failing
        guard !failing.isEmpty else { return "" }
        let e = HTMLText.escape
        var out = "<section id=\"failing\" class=\"alert outage\" data-kind=\"failing\"><h2>Failing now</h2><ul>"
        for host in failing {
            var what: [String] = []
            if let refused = host.recentRefusals { what.append(refusalText(refused)) }
            if let probe = host.probe, !probe.success {
                what.append("last probe failed (\(probe.error ?? "failed")) at \(DateText.format(probe.at))")
            }
            out += "<li data-failing=\"\(e(host.pattern))\"><strong>\(e(host.pattern))</strong>: \(e(what.joined(separator: "; ")))</li>"
        }
        return out + "</ul></section>"
    }

    static func refusalText(_ refused: StatusPageModel.RecentRefusals) -> String {
        "\(refused.count) client connection\(refused.count == 1 ? "" : "s") refused (\(refused.codes.map(\.rawValue).joined(separator: ", "))) "
            + "in the last \(StatusPageModel.failureWindowMinutes) minutes, the last at \(DateText.format(refused.last))"
    }

    static func probeText(_ probe: ProbeStatus?, model: StatusPageModel) -> String {
        let e = HTMLText.escape
        guard let probe else { return "<span class=\"muted\">not probed</span>" }
        let when = e(DateText.format(probe.at))
        if probe.success {
            return "<span class=\"ok\">ok</span> \(when)" + (probe.verdict.map { " · \(e($0))" } ?? "")
        }
        return "<span class=\"bad\">\(e(probe.error ?? "failed"))</span> \(when)" + (probe.detail.map { "<br><small>\(e($0))</small>" } ?? "")
    }

    static func reloadSection(_ model: StatusPageModel) -> String {
        let e = HTMLText.escape
        var out = "<section id=\"reload\"><h2>Configuration</h2><p>serving since \(e(DateText.format(model.loadedAt))) from "
            + "\(model.files.count) file\(model.files.count == 1 ? "" : "s")"
        if let reload = model.lastReload {
            let ok = reload.result == .success
            out += "; last reload \(e(DateText.format(reload.at))) (\(e(reload.trigger.rawValue))): "
                + "<span class=\"\(ok ? "ok" : "bad")\">\(ok ? "success" : "failed, the previous policies still serve")</span>"
        } else {
            out += "; no reload since start"
        }
        out += "</p>"
        if let errors = model.lastReload?.errors, !errors.isEmpty {
            out += "<ul class=\"errors\">" + errors.map { "<li>\(e($0.description))</li>" }.joined() + "</ul>"
        }
        if !model.warnings.isEmpty {
            out += "<details><summary>\(model.warnings.count) warning\(model.warnings.count == 1 ? "" : "s")</summary><ul>"
                + model.warnings.map { "<li>\(e($0.description))</li>" }.joined() + "</ul></details>"
        }
        return out + "</section>"
    }

    static func sessionsSection(_ model: StatusPageModel) -> String {
        guard !model.sessions.isEmpty else { return "" }
        let e = HTMLText.escape
        var out = "<section id=\"sessions\"><h2>Spotify sessions</h2><table><tr><th>session</th><th>flow</th><th>state</th></tr>"
        for session in model.sessions {
            out += "<tr data-session=\"\(e(session.name))\"><td>\(e(session.name))</td><td>\(e(session.flow))</td>"
                + "<td class=\"\(session.status.isHealthy ? "ok" : "bad")\">\(e(session.status.description))</td></tr>"
        }
        return out + "</table></section>"
    }

    static let style = """
    body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2933;background:#f6f7f9}
    header{padding:18px 28px 8px;background:#fff;border-bottom:1px solid #e1e4e8}
    h1{margin:0;font-size:20px;font-weight:600}h2{font-size:16px;font-weight:600;margin:22px 0 10px}
    h3{font-size:15px;font-weight:600;margin:0 0 8px}main{padding:4px 28px 28px;max-width:980px}
    .muted{color:#6b7785}.ok{color:#1f7a4d}.bad{color:#b42318}.warn{color:#9a5b00}
    .host,#reload p,table{background:#fff;border:1px solid #e1e4e8;border-radius:8px}
    .host{padding:14px 18px;margin-bottom:14px}.host.failing{border-color:#b42318;border-left-width:5px}
    #failing{padding:8px 14px;margin:14px 0}#failing h2{margin:0 0 4px;color:#912018}#failing ul{margin:0;padding-left:20px}#reload p{padding:10px 14px}
    dl{display:grid;grid-template-columns:120px 1fr;gap:2px 12px;margin:0 0 10px;font-size:14px}dt{color:#6b7785}dd{margin:0}
    .badge{font-size:12px;font-weight:500;padding:1px 8px;border-radius:10px;background:#e8eef6;color:#2d4a6b}
    .badge.deny{background:#fbe9e7;color:#b42318}.badge.tunnel{background:#eef0f2;color:#4b5563}.badge.soft{background:#f1f3f5;color:#4b5563}
    .alert{margin:6px 0;padding:6px 10px;border-radius:6px;font-size:14px}.alert.warning{background:#fff4e0;color:#7a4a00}
    .alert.outage{background:#fdecea;color:#912018}figure{margin:4px 0 0}figcaption{font-size:12px}
    svg.timeline{background:#fbfcfd;border:1px solid #eceff3;border-radius:6px}
    svg rect.pin{fill:#c9dcef;stroke:#4f7cac}svg rect.pin.pending{fill:#eef3f9;stroke-dasharray:3 2}svg rect.warning{fill:#f6c36a;opacity:.35}
    svg rect.outage{fill:#e5533d;opacity:.35}svg rect.transition{fill:#6ea8e0;opacity:.2}
    svg line.today{stroke:#1f2933;stroke-width:2}svg line.tick{stroke:#e1e4e8}svg text{font:10px system-ui,sans-serif;fill:#6b7785}
    svg text.pinlabel{fill:#1f2933;font-size:10px}
    table{border-collapse:separate;border-spacing:0;width:100%;font-size:14px}th,td{text-align:left;padding:6px 12px}
    th{color:#6b7785;font-weight:500;border-bottom:1px solid #e1e4e8}ul.errors{color:#b42318}
    """
}
