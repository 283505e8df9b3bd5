'use strict'
// pi-native — everything from every subpath, plus which backend is in use.
const binding = require('./binding.js')
const liveness = require('./liveness.js')
const sessionRecovery = require('./session-recovery.js')
const store = require('./process-matrix-store.js')
const atomicFile = require('./atomic-file.js')

/** `'native'` when the Rust addon is loaded, `'js'` on the pure-JavaScript fallback. */
exports.backend = binding.backend

exports.isReloadSessionProcessAlive = liveness.isReloadSessionProcessAlive
exports.defaultIsPidAlive = liveness.defaultIsPidAlive
exports.checkProcessLiveness = liveness.checkProcessLiveness
exports.getProcessStartTime = liveness.getProcessStartTime
exports.probePid = liveness.probePid
exports.probePids = liveness.probePids
exports.getProcessIdentity = liveness.getProcessIdentity
exports.isSameProcess = liveness.isSameProcess
exports.waitForProcessExit = liveness.waitForProcessExit
exports.exitWatchMode = liveness.exitWatchMode

exports.deriveSessionPaths = sessionRecovery.deriveSessionPaths
exports.appendWorkerSessionArgs = sessionRecovery.appendWorkerSessionArgs
exports.resolveSessionRecoveryEnabled = sessionRecovery.resolveSessionRecoveryEnabled
exports.shouldAttemptSessionRecovery = sessionRecovery.shouldAttemptSessionRecovery
exports.recoverLastAssistantFromSession = sessionRecovery.recoverLastAssistantFromSession

exports.processMatrixDir = store.processMatrixDir
exports.entryPath = store.entryPath
exports.buildEntryId = store.buildEntryId
exports.readEntry = store.readEntry
exports.listEntries = store.listEntries
exports.writeEntry = store.writeEntry
exports.writeEntryIfUnchanged = store.writeEntryIfUnchanged
exports.writeEntryIfUnchangedSync = store.writeEntryIfUnchangedSync
exports.removeEntry = store.removeEntry
exports.removeEntryIfUnchanged = store.removeEntryIfUnchanged
exports.sweepOrphanTempFiles = store.sweepOrphanTempFiles
exports.watchEntries = store.watchEntries
exports.entryWatchMode = store.entryWatchMode

exports.withFileLock = atomicFile.withFileLock
exports.withFileLockSync = atomicFile.withFileLockSync
exports.writeFileAtomic = atomicFile.writeFileAtomic
exports.writeFileAtomicSync = atomicFile.writeFileAtomicSync
