import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica
import KidLedgerSecurity

// Uploads and downloads of a member's relay session (docs/RELAY-DESIGN.md, "Sessions").
extension RelayMemberSession {
    // MARK: Uploads

    /// At welcome: what the relay holds of each origin this replica holds (its held vector by tag).
    func prepareUploads() throws(RelaySessionError) {
        let mine = try storage { try replica.versionVector() }
        for origin in mine.keys { uploadCursor[origin] = held[tag(of: origin)] ?? 0 }
    }

    /// The relay's answer to an upload.
    func answered(upload stored: Bool) throws(RelaySessionError) {
        guard uploadsInFlight > 0 else { throw .unexpectedMessage("an upload answer with no upload in flight") }
        uploadsInFlight -= 1
        if stored { summary.envelopesUploaded += 1 } else { summary.envelopesAlreadyHeld += 1 }
        // Stored or held already, the relay holds it now (runs go up from its held sequence without a gap).
        if !uploadRanges.isEmpty {
            let (stream, last) = uploadRanges.removeFirst()
            summary.relayHeld[stream] = max(summary.relayHeld[stream] ?? 0, last)
        }
    }

    /// The next envelope to upload: a run of one origin's changes as the log holds them, from
    /// above what the relay holds, ending at a signed head (where a receiver can authenticate it),
    /// within the setup's bounds (or, when no head falls within them, the protocol's own), with the
    /// heads a batch of them carries, sealed under the setup's epoch. Nil when nothing is left or
    /// the session's bound is reached.
    func nextEnvelope(using random: inout some RandomNumberGenerator) throws(RelaySessionError) -> [UInt8]? {
        let limits = setup.limits
        // Each pass takes a run off the queue, drops an origin, or refills it from a log that
        // holds finitely many changes above the cursor; the bound only guards the reasoning.
        for _ in 0..<(1 << 20) {
            guard !uploadsExhausted, uploadsSent < limits.uploadsPerSessionMax else { return nil }
            if uploadQueue.isEmpty {
                let found = try storage { try replica.encodedChanges(notCoveredBy: uploadCursor, limit: limits.changesPerEnvelope) }
                guard !found.isEmpty else { uploadsExhausted = true; return nil }
                uploadQueue = found[...]
            }
            let origin = uploadQueue.first!.origin
            guard let end = Self.runEnd(uploadQueue, changesMax: limits.changesPerEnvelope, bytesMax: limits.payloadBytes)
                ?? Self.runEnd(uploadQueue, changesMax: changesPerBatchMax, bytesMax: RelayEnvelope.payloadBytesMax) else {
                summary.runsTooLarge += 1
                summary.refuse("relay \(setup.relay.fingerprint): the changes of \(origin) after \(uploadCursor[origin] ?? 0) "
                    + "have no signed head within \(RelayEnvelope.payloadBytesMax) bytes; not uploaded")
                uploadCursor[origin] = .max
                uploadQueue = uploadQueue.drop { $0.origin == origin }
                continue
            }
            let run = uploadQueue[..<end]
            uploadQueue = uploadQueue[end...]
            uploadCursor[origin] = run.last!.sequence
            return try seal(run, using: &random)
        }
        return nil
    }

    /// Where a run from the front of `queue` ends: after its last change of the front origin
    /// that may end a batch, within `changesMax` changes and about `bytesMax` payload bytes.
    static func runEnd(_ queue: ArraySlice<EncodedChange>, changesMax: Int, bytesMax: Int) -> Int? {
        let origin = queue.first!.origin
        var end = queue.startIndex
        var bytes = 8  // the flag, count and head count of the payload
        var cut: Int?
        while end < queue.endIndex, queue[end].origin == origin, end - queue.startIndex < changesMax {
            bytes += queue[end].bytes.count + (queue[end].head.map { 84 + 18 * $0.choices.count + 10 } ?? 0)
            guard bytes <= bytesMax else { break }
            end += 1
            if queue[end - 1].mayEndBatch { cut = end }
        }
        return cut
    }

    /// `run` as an envelope: the payload is a `changes` message's (``Message``), sealed.
    private func seal(_ run: ArraySlice<EncodedChange>, using random: inout some RandomNumberGenerator) throws(RelaySessionError) -> [UInt8] {
        let changes = try storage { try run.map { try RecordCodec.decodeChange($0.bytes) } }
        let payload = Message.changes(changes, isLast: true, heads: SignedHead.sent(with: run)).encodePayload()
        do {
            let header = try RelayEnvelopeHeader(stream: tag(of: run.first!.origin), firstSequence: run.first!.sequence,
                                                 lastSequence: run.last!.sequence, epoch: setup.sealEpoch)
            // The key is checked at start.
            let envelope = try RelayEnvelope.seal(payload, header: header, key: setup.keyring[setup.sealEpoch]!, using: &random)
            summary.changesUploaded += run.count
            summary.bytesUploaded += envelope.count
            return envelope
        } catch {
            throw .storage("cannot seal \(run.count) changes of \(run.first!.origin): \(error)")
        }
    }

    // MARK: Downloads

    /// Opens, checks and applies each envelope of a page, in order. An envelope that does not
    /// open under the keyring, whose payload is not one origin's run of its stream and range, or
    /// whose changes fail authentication, is refused with a sentence naming the relay, and
    /// nothing of it is applied.
    func apply(_ envelopes: [[UInt8]]) throws(RelaySessionError) {
        for envelope in envelopes {
            summary.envelopesReceived += 1
            // Checked when the page was decoded.
            guard let header = try? RelayEnvelope.header(of: envelope) else { throw .malformed("an envelope without its header") }
            let batch: (changes: [Change], heads: [SignedHead])
            do throws(RelaySealError) {
                let opened = try RelayEnvelope.open(envelope, stream: header.stream, keys: setup.keyring)
                batch = try decodeRun(opened.payload, header: opened.header)
            } catch {
                refuse(header, error.description)
                continue
            }
            let report: ApplyReport
            do {
                report = try replica.applyRemote(batch.changes, heads: batch.heads,
                                                 recomputes: recomputations < Limits.recomputationsPerSessionMax)
            } catch is Replica.RecomputationsSpent {
                summary.changesDeferred += batch.changes.count
                passDeferred += batch.changes.count
                continue
            } catch {
                throw .storage("\(error)")
            }
            if report.recomputed { recomputations += 1 }
            if report.unauthenticated > 0 {
                refuse(header, "its changes failed authentication by their member's signed heads")
                continue
            }
            let deferred = report.gaps + report.notAdmitted + report.heldBack
            summary.changesApplied += report.applied + report.forkedVersions
            summary.duplicates += report.duplicates
            summary.changesDeferred += deferred
            passApplied += report.applied + report.forkedVersions
            passDeferred += deferred
        }
    }

    /// The changes and heads of an opened payload, checked against its authenticated header: one
    /// origin's run whose stream is the header's, from its first to its last sequence.
    private func decodeRun(_ payload: [UInt8], header: RelayEnvelopeHeader) throws(RelaySealError) -> (changes: [Change], heads: [SignedHead]) {
        guard case .changes(let changes, _, let heads)? = try? Message.decode(type: 4, payload: payload), let first = changes.first else {
            throw .malformed("its payload is not a run of changes")
        }
        guard changes.allSatisfy({ $0.origin == first.origin }), tag(of: first.origin) == header.stream else {
            throw .malformed("its changes are not of its stream's origin")
        }
        guard first.sequence == header.firstSequence, changes.last!.sequence == header.lastSequence,
              zip(changes, changes.dropFirst()).allSatisfy({ $0.sequence <= $1.sequence }) else {
            throw .malformed("its changes are not the run its header names")
        }
        return (changes, heads)
    }

    private func refuse(_ header: RelayEnvelopeHeader, _ why: String) {
        summary.envelopesRefused += 1
        summary.refuse("relay \(setup.relay.fingerprint): envelope of stream \(header.stream) sequences "
            + "\(header.firstSequence)...\(header.lastSequence) (epoch \(header.epoch)) refused: \(why); nothing of it was applied")
    }
}
