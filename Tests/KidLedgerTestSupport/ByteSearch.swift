/// Whether `needle` (not empty) occurs in `haystack`: for tests that check bytes on the wire for
/// something that must not be there (a key, an id, a name).
public func occurs(in haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    let first = needle[0]
    var i = 0
    while i <= haystack.count - needle.count {
        if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
        i += 1
    }
    return false
}
