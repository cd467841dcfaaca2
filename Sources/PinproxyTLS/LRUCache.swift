/// A bounded least-recently-used map with O(1) lookups, inserts and evictions
/// (a dictionary of nodes in a doubly linked list kept by index). Not
/// thread-safe: wrap it in a lock where it is shared.
struct LRUCache<Key: Hashable, Value> {
    fileprivate struct Node {
        var key: Key
        var value: Value
        var previous: Int?
        var next: Int?
    }

    let capacity: Int
    private var nodes: [Node] = []
    private var index: [Key: Int] = [:]
    private var head: Int?  // most recently used
    private var tail: Int?  // least recently used

    init(capacity: Int) {
        precondition(capacity > 0, "an LRU cache needs room for one entry")
        self.capacity = capacity
    }

    var count: Int { index.count }

    mutating func value(for key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        moveToFront(slot)
        return nodes[slot].value
    }

    /// Inserts or replaces; returns the evicted entry's key, if one was evicted.
    @discardableResult
    mutating func set(_ value: Value, for key: Key) -> Key? {
        if let slot = index[key] {
            nodes[slot].value = value
            moveToFront(slot)
            return nil
        }
        if index.count < capacity {
            nodes.append(Node(key: key, value: value))
            let slot = nodes.count - 1
            index[key] = slot
            linkFront(slot)
            return nil
        }
        // Reuse the least recently used slot.
        let slot = tail!
        let evicted = nodes[slot].key
        unlink(slot)
        index[evicted] = nil
        nodes[slot] = Node(key: key, value: value)
        index[key] = slot
        linkFront(slot)
        return evicted
    }

    private mutating func moveToFront(_ slot: Int) {
        guard head != slot else { return }
        unlink(slot)
        linkFront(slot)
    }

    private mutating func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if let previous { nodes[previous].next = next } else { head = next }
        if let next { nodes[next].previous = previous } else { tail = previous }
        nodes[slot].previous = nil
        nodes[slot].next = nil
    }

    private mutating func linkFront(_ slot: Int) {
        nodes[slot].next = head
        nodes[slot].previous = nil
        if let head { nodes[head].previous = slot }
        head = slot
        if tail == nil { tail = slot }
    }
}

extension LRUCache: Sendable where Key: Sendable, Value: Sendable {}
extension LRUCache.Node: Sendable where Key: Sendable, Value: Sendable {}
