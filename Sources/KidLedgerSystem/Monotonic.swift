#if canImport(Glibc)
import Glibc
#endif

/// The one monotonic clock (CLOCK_MONOTONIC) of the drivers, the tools and the tests: deadlines,
/// timeouts and timings. Never goes back, unlike the wall clock. The core (Domain, Replica,
/// Protocol) and the simulator never read it: they are given time.
public enum Monotonic {
    /// Milliseconds since an arbitrary fixed point; never goes back.
    public static func millis() -> Int64 { micros() / 1_000 }

    /// Microseconds since the same fixed point, for timings.
    public static func micros() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000
    }

    /// Seconds since the same fixed point, to the nanosecond, for rates the tools report.
    public static func seconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
