'use strict'
// pi-native/atomic-file — drop-in for pi-adaptative's core/util/atomic-file.ts.
const { impl } = require('./binding.js')

exports.withFileLock = impl.withFileLock
exports.withFileLockSync = impl.withFileLockSync
exports.writeFileAtomic = impl.writeFileAtomic
exports.writeFileAtomicSync = impl.writeFileAtomicSync
