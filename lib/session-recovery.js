'use strict'
// pi-native/session-recovery — drop-in for pi-crew's session-recovery.ts.
// Each export is a plain writable property so hosts can spy on it.
const { impl } = require('./binding.js')

exports.deriveSessionPaths = impl.deriveSessionPaths
exports.appendWorkerSessionArgs = impl.appendWorkerSessionArgs
exports.resolveSessionRecoveryEnabled = impl.resolveSessionRecoveryEnabled
exports.shouldAttemptSessionRecovery = impl.shouldAttemptSessionRecovery
exports.recoverLastAssistantFromSession = impl.recoverLastAssistantFromSession
