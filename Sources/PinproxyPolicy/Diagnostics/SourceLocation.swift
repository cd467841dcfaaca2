/// Where a value was written: the file, and the 1-based line and column of
/// its first character (columns in Unicode scalars, as libyaml counts them).
/// Kept next to every value a later error may have to point at, so that a
/// bind failure or an unreadable CA file names the line that asked for it.
public struct SourceLocation: Sendable, Hashable, Codable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int

    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// The location of a value nobody wrote: an embedded default.
    public static let embeddedDefaults = SourceLocation(file: "<embedded defaults>", line: 0, column: 0)

    /// A whole file, for problems that belong to no line (unreadable, empty).
    public static func file(_ path: String) -> SourceLocation {
        SourceLocation(file: path, line: 1, column: 1)
    }

    public var description: String { "\(file):\(line):\(column)" }
}

/// Locations of the values of one object (the main file, one host policy),
/// by dotted key path (`"admin.listen"`, `"tls.ciphers"`). Values stay plain
/// typed fields; their locations live here, looked up only on the error path.
public struct SourceMap: Sendable, Hashable {
    public private(set) var locations: [String: SourceLocation]
    /// Where the object itself starts (its first key, or the file).
    public var origin: SourceLocation

    public init(origin: SourceLocation, locations: [String: SourceLocation] = [:]) {
        self.origin = origin
        self.locations = locations
    }

    /// The location of `path`, else of its nearest written ancestor, else the origin.
    public subscript(path: String) -> SourceLocation {
        var key = Substring(path)
        while true {
            if let location = locations[String(key)] { return location }
            guard let dot = key.lastIndex(of: ".") else { return origin }
            key = key[..<dot]
        }
    }

    /// True when the value at `path` was written in a file (not defaulted).
    public func isWritten(_ path: String) -> Bool { locations[path] != nil }

    mutating func record(_ path: String, _ location: SourceLocation) {
        locations[path] = location
    }
}
