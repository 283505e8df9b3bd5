'use strict'
// pi-native/process-matrix-store — drop-in for pi-adaptative's core/process-matrix/store.ts.
// Each export is a plain writable property so hosts (and vi.spyOn) can replace it.
const { impl } = require('./binding.js')

exports.processMatrixDir = impl.processMatrixDir
exports.entryPath = impl.entryPath
exports.buildEntryId = impl.buildEntryId
exports.readEntry = impl.readEntry
exports.listEntries = impl.listEntries
exports.writeEntry = impl.writeEntry
exports.writeEntryIfUnchanged = impl.writeEntryIfUnchanged
exports.writeEntryIfUnchangedSync = impl.writeEntryIfUnchangedSync
exports.removeEntry = impl.removeEntry
exports.removeEntryIfUnchanged = impl.removeEntryIfUnchanged
exports.sweepOrphanTempFiles = impl.sweepOrphanTempFiles
exports.watchEntries = impl.watchEntries
exports.entryWatchMode = impl.entryWatchMode
