import KidLedgerDomain
import KidLedgerReplica

/// How a command opens the ledger: ``Context/change(payingAllowances:paymentsOnStandardError:_:)``
/// for one that writes, ``Context/openLedger(paymentsOnStandardError:)`` for one that reads.
extension Context {
    /// Opens the ledger for a change and runs `body` on it in one write transaction
    /// (``Replica/change(_:)``): the gate (attentionRequired, exit 77; it needs the household, its
    /// members and this laptop's own settings), then the allowance periods now due (paid first, as
    /// before every ledger command; not with `payingAllowances` false), then `body`'s own checks
    /// and writes. Nothing another process commits can fall between a check and the write.
    /// When `body` throws, the periods paid still commit, and its error is thrown after the lines
    /// that say what was paid (printed once the transaction committed; on standard error with
    /// `paymentsOnStandardError`). `body` must not print (it may run twice: ``Replica/change(_:)``).
    func change<T>(payingAllowances: Bool = true, paymentsOnStandardError: Bool = false,
                   _ body: (Replica) throws -> T) throws -> T {
        let replica = try openReplica(readingZone: false)
        let me = try identity(creating: false)
        if let me { configure(replica, identity: me) }
        // Optionals, not a Result<T, any Error>: built in the replica module's unspecialized code,
        // a Result makes the runtime check that `any Error` is an Error, a scan of every
        // conformance record (about 1% of a give's instructions).
        let (paid, result, failure) = try replica.change { () -> ([Posting], T?, (any Error)?) in
            if let reason = try attentionReason(replica, identity: me) {
                throw CLIError("attention required: \(reason)", code: .notPermitted)
            }
            householdZone.withLock { $0 = try? replica.householdTimeZone() }
            var paid: [Posting] = []
            if payingAllowances, try replica.household() != nil { paid = try replica.payDueAllowances(now: clock.nowMillis()) }
            do {
                return (paid, try body(replica), nil)
            } catch {
                return (paid, nil, error)
            }
        }
        sayPaid(paid, onStandardError: paymentsOnStandardError)
        if let failure { throw failure }
        guard let result else { preconditionFailure("a change that did not fail has a result") }
        return result
    }

    /// Opens the replica for a command that reads, after paying the allowance periods now due when
    /// the gate lets this laptop write (never when attention is required or it is revoked): the
    /// gate and the payments in one write transaction, only when something is due.
    /// `paymentsOnStandardError`: the lines that say what was paid go to standard error (a command
    /// whose standard output is data, such as `export --csv -`).
    func openLedger(paymentsOnStandardError: Bool = false) throws -> Replica {
        let replica = try openReplica()
        guard try replica.hasDueAllowances(now: clock.nowMillis()) else { return replica }
        let me = try identity(creating: false)
        let paid = try replica.change {
            guard try attentionReason(replica, identity: me) == nil else { return [Posting]() }
            if let me { configure(replica, identity: me) }
            return try replica.payDueAllowances(now: clock.nowMillis())
        }
        sayPaid(paid, onStandardError: paymentsOnStandardError)
        return replica
    }

    /// Says what `paid` paid, one line each.
    func sayPaid(_ paid: [Posting], onStandardError: Bool = false) {
        for p in paid {
            let line = "Paid \(TextEscaping.terminal(p.childName))'s allowance of \(Money.format(cents: p.transaction.amountCents)) for the period from \(time.stamped(p.transaction.createdAtMillis)). Balance: \(Money.format(cents: p.balanceCents))"
            if onStandardError { console.err("kidledger: \(TextEscaping.terminal(line))\n") } else { say(line) }
        }
    }
}
