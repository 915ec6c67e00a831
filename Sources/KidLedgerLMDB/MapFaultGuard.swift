#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Turns a memory fault inside an LMDB memory map into a clear message and a normal exit.
///
/// LMDB reads the data file through a memory map. When the file is damaged in a way no check can
/// see in advance (a B-tree page pointing past the end of a shortened file, a node whose sizes
/// were overwritten), a read of the map raises `SIGBUS` (a page beyond the end of the file) or
/// `SIGSEGV`. A process that called ``install(message:exitCode:)`` then prints `message` and
/// exits with `exitCode` instead of dying by the signal. Only faults whose address lies inside a
/// map of an open ``LMDBEnvironment``, whose instruction lies in liblmdb's code (LMDB follows
/// the file's page numbers, offsets and sizes as they are), or that happen while an LMDB
/// transaction is open (LMDB's copies with a damaged size run in libc's `memcpy`; the Swift code
/// around a transaction is memory-safe) are handled; any other fault is passed on to the handler
/// that was installed before (the Swift runtime's crash report, or the default action), so real
/// bugs still crash loudly. The process writes nothing after such a fault: LMDB writes the data
/// file only when a transaction commits, so the file is as it was.
///
/// Async-signal-safety: the handler reads only a fixed table of address ranges and a message
/// buffer prepared at installation, and calls `write` and `_exit`. While installed, LMDB's own
/// assertion failures (`mdb_assert`, which otherwise abort) end the same way.
public enum MapFaultGuard {
    // `nonisolated(unsafe)` below: the signal handler must read this state without a lock (none
    // is async-signal-safe), so it is plain memory, written only with `lock` held; `code` and
    // `previous` only once, by the first `install`.

    /// Map ranges of open environments: pairs (start, end) in a fixed table; (0, 0) is free.
    static let slots = 16
    nonisolated(unsafe) static let ranges: UnsafeMutablePointer<UInt> = {
        let p = UnsafeMutablePointer<UInt>.allocate(capacity: 2 * slots)
        p.initialize(repeating: 0, count: 2 * slots)
        return p
    }()
    nonisolated(unsafe) static var message: UnsafeMutablePointer<UInt8>?
    nonisolated(unsafe) static var messageCount = 0
    nonisolated(unsafe) static var exitCode: Int32 = 70
    /// The actions that were installed before, for faults that are not ours (heap storage with a
    /// fixed address, so the handler can read them).
    nonisolated(unsafe) static let previous: UnsafeMutablePointer<sigaction> = {
        let p = UnsafeMutablePointer<sigaction>.allocate(capacity: 3)
        p.initialize(repeating: sigaction(), count: 3)
        return p
    }()
    private static let installedFlag = Atomic<Bool>(false)
    /// The executable ranges of liblmdb's code (start, end pairs; (0, 0) unused), found at installation.
    nonisolated(unsafe) static let code: UnsafeMutablePointer<UInt> = {
        let p = UnsafeMutablePointer<UInt>.allocate(capacity: 8)
        p.initialize(repeating: 0, count: 8)
        return p
    }()
    /// LMDB transactions open in this process (any thread).
    static let openTransactions = Atomic<Int>(0)
    /// Whether ``install(message:exitCode:)`` ran in this process.
    static var installed: Bool { installedFlag.load(ordering: .acquiring) }
    private static let lock = Mutex<Void>(())

    /// Installs the handler for `SIGBUS` and `SIGSEGV` (once per process; later calls only change
    /// the message and code). Call it early, from the main thread, before opening stores.
    public static func install(message text: String, exitCode: Int32) {
        let bytes = Array(text.utf8)
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        buffer.initialize(from: bytes, count: bytes.count)
        lock.withLock { _ in
            message = buffer
            messageCount = bytes.count
            self.exitCode = exitCode
        }
        guard installedFlag.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        for (i, range) in mappings(containing: "/liblmdb", executable: true).prefix(4).enumerated() {
            code[2 * i] = range.start
            code[2 * i + 1] = range.end
        }
        // The handler runs on its own stack (of the installing thread): a damaged size can make
        // LMDB copy over the thread's stack, and a handler on a broken stack would fault again.
        let stackBytes = 256 << 10
        var stack = stack_t()
        stack.ss_sp = UnsafeMutableRawPointer.allocate(byteCount: stackBytes, alignment: 16)
        stack.ss_size = stackBytes
        stack.ss_flags = 0
        sigaltstack(&stack, nil)
        var action = sigaction()
        action.__sigaction_handler.sa_sigaction = { signal, info, context in
            MapFaultGuard.handle(signal, info, context)
        }
        action.sa_flags = SA_SIGINFO | Int32(SA_ONSTACK)
        sigemptyset(&action.sa_mask)
        sigaction(SIGBUS, &action, previous)
        sigaction(SIGSEGV, &action, previous + 1)
        sigaction(SIGABRT, &action, previous + 2)
    }

    /// Records the map `[start, start + count)` of an open environment; returns its slot, or nil
    /// when the table is full (the map is then simply not guarded).
    static func register(start: UInt, count: Int) -> Int? {
        lock.withLock { _ in
            for slot in 0..<slots where ranges[2 * slot] == 0 && ranges[2 * slot + 1] == 0 {
                ranges[2 * slot + 1] = start &+ UInt(count)
                ranges[2 * slot] = start
                return slot
            }
            return nil
        }
    }

    /// Forgets a slot (the environment closed or remapped).
    static func unregister(_ slot: Int?) {
        guard let slot else { return }
        lock.withLock { _ in
            ranges[2 * slot] = 0
            ranges[2 * slot + 1] = 0
        }
    }

    /// The address range of this process's mapping of the file with `inode` whose path ends with
    /// `suffix` (the largest such mapping); nil when none is found.
    static func mapping(inode: UInt64, named suffix: String) -> (start: UInt, end: UInt)? {
        mappings(containing: suffix, where: { $0.hasSuffix(suffix) }, inode: inode).max { $0.end - $0.start < $1.end - $1.start }
    }

    /// The mappings listed in `/proc/self/maps` whose line contains `needle` and whose path
    /// satisfies `matches` (and, when given, whose inode is `inode`; when `executable`, only those
    /// mapped executable). Lines without `needle` are skipped before any string is built: the
    /// process has hundreds of mappings and this runs at every start-up.
    static func mappings(containing needle: String, where matches: (String) -> Bool = { _ in true },
                         inode: UInt64? = nil, executable: Bool = false) -> [(start: UInt, end: UInt)] {
        guard let file = fopen("/proc/self/maps", "r") else { return [] }
        defer { fclose(file) }
        var found: [(start: UInt, end: UInt)] = []
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), file) != nil {
            guard strstr(line, needle) != nil else { continue }
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            // start-end perms offset dev inode path
            let fields = text.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6 else { continue }
            var path = fields.dropFirst(5).joined(separator: " ")
            while path.last == "\n" { path.removeLast() }
            guard matches(path), inode.map({ UInt64(fields[4]) == $0 }) ?? true,
                  !executable || fields[1].contains("x") else { continue }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16),
                  end > start else { continue }
            found.append((start, end))
        }
        return found
    }

    /// Whether `address` lies inside a registered map.
    static func covers(_ address: UInt) -> Bool {
        for slot in 0..<slots {
            let start = ranges[2 * slot], end = ranges[2 * slot + 1]
            if end > start && address >= start && address < end { return true }
        }
        return false
    }

    /// LMDB's assertion callback while the guard is installed: an internal consistency check
    /// failed, which on a released LMDB means a damaged data file. Prints the message and exits
    /// with the guard's code instead of letting LMDB abort.
    static let assertFailed: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> Void = { _, _ in
        MapFaultGuard.exitWithMessage()
    }

    /// Writes the message to standard error and exits (async-signal-safe).
    private static func exitWithMessage() -> Never {
        if let message {
            var offset = 0
            while offset < messageCount {
                let n = write(2, message + offset, messageCount - offset)
                if n <= 0 { break }
                offset += n
            }
        }
        _exit(exitCode)
    }

    /// Whether `pc` lies in liblmdb's code.
    static func inLMDB(_ pc: UInt) -> Bool {
        for i in 0..<4 where code[2 * i + 1] > code[2 * i] && pc >= code[2 * i] && pc < code[2 * i + 1] { return true }
        return false
    }

    /// The faulting instruction's address from the signal context (0 where unknown).
    private static func programCounter(_ context: UnsafeMutableRawPointer?) -> UInt {
        guard let context else { return 0 }
        let uc = context.assumingMemoryBound(to: ucontext_t.self)
        #if arch(x86_64)
        return withUnsafeBytes(of: uc.pointee.uc_mcontext.gregs) { UInt($0.load(fromByteOffset: 16 * 8 /* REG_RIP */, as: UInt64.self)) }
        #elseif arch(arm64)
        return UInt(uc.pointee.uc_mcontext.pc)
        #else
        return 0
        #endif
    }

    private static func handle(_ signal: Int32, _ info: UnsafeMutablePointer<siginfo_t>?,
                               _ context: UnsafeMutableRawPointer?) {
        // An abort while a transaction is open: glibc found its heap overwritten (by LMDB copying
        // with a damaged size) or LMDB's own assertion failed.
        if signal == SIGABRT {
            if openTransactions.load(ordering: .relaxed) > 0 { exitWithMessage() }
            sigaction(signal, previous + 2, nil)
            return
        }
        let address = info.map { UInt(bitPattern: $0.pointee._sifields._sigfault.si_addr) } ?? 0
        // A read inside a store's map, any fault inside LMDB's own code (which follows the damaged
        // file's page pointers and sizes), or any fault while a transaction is open (LMDB copying
        // with a damaged size, e.g. through memcpy, which is libc's code): the data file is damaged.
        if covers(address) || inLMDB(programCounter(context)) || openTransactions.load(ordering: .relaxed) > 0 {
            exitWithMessage()
        }
        // Not ours: restore the previous handler and return; the faulting instruction runs again
        // and the fault goes to that handler (or kills the process by default).
        sigaction(signal, previous + (signal == SIGBUS ? 0 : signal == SIGSEGV ? 1 : 2), nil)
    }
}

