'use strict'
// pi-native/liveness — drop-in for the hosts' PID liveness helpers plus the identity API.
// Each export is a plain writable property so hosts can spy on it.
const { impl } = require('./binding.js')

exports.isReloadSessionProcessAlive = impl.isReloadSessionProcessAlive
exports.defaultIsPidAlive = impl.defaultIsPidAlive
exports.checkProcessLiveness = impl.checkProcessLiveness
exports.getProcessStartTime = impl.getProcessStartTime
exports.probePid = impl.probePid
exports.probePids = impl.probePids
exports.getProcessIdentity = impl.getProcessIdentity
exports.isSameProcess = impl.isSameProcess
exports.waitForProcessExit = impl.waitForProcessExit
exports.exitWatchMode = impl.exitWatchMode
