'use strict'
// pi-native — everything from every subpath, plus which backend is in use.
const binding = require('./binding.js')
const liveness = require('./liveness.js')
const sessionRecovery = require('./session-recovery.js')

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

exports.deriveSessionPaths = sessionRecovery.deriveSessionPaths
exports.appendWorkerSessionArgs = sessionRecovery.appendWorkerSessionArgs
exports.resolveSessionRecoveryEnabled = sessionRecovery.resolveSessionRecoveryEnabled
exports.shouldAttemptSessionRecovery = sessionRecovery.shouldAttemptSessionRecovery
exports.recoverLastAssistantFromSession = sessionRecovery.recoverLastAssistantFromSession
